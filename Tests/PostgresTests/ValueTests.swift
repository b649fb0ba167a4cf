import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Values round-trip through parameters and back")
struct ValueTests {
    /// Sends `value` as a parameter, casts it to `sqlType`, and reads it back.
    func roundTrip<T: PostgresCodable & Equatable>(_ value: T?, as sqlType: String, on pool: PostgresPool) async throws -> T? {
        let row = try await pool.query("SELECT \(value)::\(unsafeRaw: sqlType) AS value").single()
        return try row.decode("value", as: T?.self)
    }

    @Test func everyTypeRoundTripsWithNull() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                #expect(try await roundTrip(true, as: "boolean", on: pool) == true)
                #expect(try await roundTrip(false, as: "boolean", on: pool) == false)
                #expect(try await roundTrip(Int.max, as: "bigint", on: pool) == Int.max)
                #expect(try await roundTrip(Int.min, as: "bigint", on: pool) == Int.min)
                #expect(try await roundTrip(Int32.min, as: "integer", on: pool) == Int32.min)
                #expect(try await roundTrip(Int64(-42), as: "bigint", on: pool) == -42)
                #expect(try await roundTrip(0.1, as: "double precision", on: pool) == 0.1)
                #expect(try await roundTrip(-1.5e300, as: "double precision", on: pool) == -1.5e300)
                #expect(try await roundTrip(Double.infinity, as: "double precision", on: pool) == .infinity)
                #expect(try await roundTrip("", as: "text", on: pool) == "")
                let id = UUID()
                #expect(try await roundTrip(id, as: "uuid", on: pool) == id)
                let bytes = Data((0...255).map { UInt8($0) })
                #expect(try await roundTrip(bytes, as: "bytea", on: pool) == bytes)
                #expect(try await roundTrip(Data(), as: "bytea", on: pool) == Data())
                // PostgreSQL keeps microseconds.
                let now = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 * 1_000_000).rounded() / 1_000_000)
                let back = try #require(try await roundTrip(now, as: "timestamptz", on: pool))
                #expect(abs(back.timeIntervalSince(now)) < 0.000_001)
                let old = Date(timeIntervalSince1970: -1_000_000_000.25)
                #expect(try await roundTrip(old, as: "timestamptz", on: pool) == old)

                #expect(try await roundTrip(Bool?.none, as: "boolean", on: pool) == nil)
                #expect(try await roundTrip(Int?.none, as: "bigint", on: pool) == nil)
                #expect(try await roundTrip(Int32?.none, as: "integer", on: pool) == nil)
                #expect(try await roundTrip(Double?.none, as: "double precision", on: pool) == nil)
                #expect(try await roundTrip(String?.none, as: "text", on: pool) == nil)
                #expect(try await roundTrip(UUID?.none, as: "uuid", on: pool) == nil)
                #expect(try await roundTrip(Date?.none, as: "timestamptz", on: pool) == nil)
                #expect(try await roundTrip(Data?.none, as: "bytea", on: pool) == nil)
                #expect(try await roundTrip(JSONB?.none, as: "jsonb", on: pool) == nil)
            }
        }
    }

    /// A double read back is the double written, even where the database is set to print
    /// floats rounded (`extra_float_digits` 0, as before PostgreSQL 12).
    @Test func aDoubleReadsBackExactlyWhateverTheDatabaseSays() async throws {
        try await TestDatabase.withEmpty { configuration in
            let name = "\"" + configuration.database.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            try await TestDatabase.withPool(try TestDatabase.adminConfiguration().database(configuration.database), size: 1) {
                try await $0.query("ALTER DATABASE \(unsafeRaw: name) SET extra_float_digits = 0")
            }
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                for value in [27.717245000000001, 0.1 + 0.2] {
                    let back: Double? = try await roundTrip(value, as: "double precision", on: pool)
                    #expect(back == value)
                }
            }
        }
    }

    /// Numbers are read from a result's bytes, not through a `String` each: they read as their
    /// text reads, bit for bit, PostgreSQL's extremes and specials among them.
    @Test func numbersReadFromTheirBytesAsFromTheirText() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let rows = try await pool.query(
                    """
                    SELECT d, CASE WHEN abs(d) < 9e12 THEN (d * 1e6)::int8 END AS i FROM (
                        SELECT (random() - 0.5) * 10 ^ (random() * 600 - 300) AS d FROM generate_series(1, 3000)
                        UNION ALL SELECT (random() - 0.5) * 360 FROM generate_series(1, 3000)
                        UNION ALL SELECT unnest(ARRAY['0', '-0', '5e-324', '-2.2250738585072014e-308', '1.7976931348623157e308',
                                                      '-1e15', '123456789012345680000']::float8[])
                    ) numbers
                    """)
                #expect(rows.count == 6_007)
                for row in rows {
                    let text = try #require(row.text(0))
                    #expect(try row.decode("d", as: Double.self).bitPattern == Double(text)!.bitPattern, "\(text)")
                    if let integer = row.text(1) { #expect(try row.decode("i", as: Int.self) == Int(integer)!) }
                }
                #expect(rows.contains { $0.text(0) == "-0" }, "negative zero is among them")
                #expect(rows.contains { $0.text(0)?.contains("e+") == true }, "and numbers written with a positive exponent")
                let specials = try await pool.query(
                    "SELECT 'NaN'::float8, 'Infinity'::float8, '-Infinity'::float8, \(Int64.min)::int8, \(Int32.max)::int4").single()
                #expect(try specials.decode(0, as: Double.self).isNaN)
                #expect(try specials.decode(1, as: Double.self) == .infinity)
                #expect(try specials.decode(2, as: Double.self) == -.infinity)
                #expect(try specials.decode(3, as: Int64.self) == .min)
                #expect(try specials.decode(4, as: Int32.self) == .max)
                // Past Int's range (an xid8 may be): a decoding error naming the column, not a wrapped number.
                let huge = try await pool.query("SELECT '18446744073709551615'::xid8 AS x").single()
                #expect(throws: PostgresError.self) { try huge.decode("x", as: Int.self) }
            }
        }
        func bytes<T>(_ text: String, _ read: (UnsafeBufferPointer<UInt8>) -> T?) -> T? {
            let utf8 = Array(text.utf8) + [0]
            return utf8.withUnsafeBufferPointer { read(UnsafeBufferPointer(rebasing: $0.dropLast())) }
        }
        for malformed in ["", "-", "+", "12a", " 1", "1 ", "1.5", "9223372036854775808", "--1"] {
            #expect(bytes(malformed) { Int(postgresBytes: $0, type: .int8) } == nil, "\(malformed)")
        }
        #expect(bytes("-9223372036854775808") { Int(postgresBytes: $0, type: .int8) } == .min)
        #expect(bytes("+7") { Int32(postgresBytes: $0, type: .int4) } == 7)
        #expect(bytes("2147483648") { Int32(postgresBytes: $0, type: .int4) } == nil)
        #expect(bytes("-2147483648") { Int32(postgresBytes: $0, type: .int4) } == .min)
        for malformed in ["", " 1", "1 ", "1x", "--1", "1e", "."] {
            #expect(bytes(malformed) { Double(postgresBytes: $0, type: .float8) } == nil, "\(malformed)")
        }
        #expect(bytes("-1.25e-3") { Double(postgresBytes: $0, type: .float8) } == -0.00125)
        // The text reads the same way, by the same parsers.
        #expect(Double(postgresText: "NaN", type: .float8)?.isNaN == true)
        #expect(Double(postgresText: "-Infinity", type: .float8) == -.infinity)
        #expect(Double(postgresText: "1.5", type: .float8) == 1.5 && Double(postgresText: " 1.5", type: .float8) == nil)
        #expect(Double(postgresText: "1.5\u{0}2", type: .float8) == nil && Double(postgresText: "", type: .float8) == nil)
        #expect(Int(postgresText: "-42", type: .int8) == -42 && Int(postgresText: "4 2", type: .int8) == nil)
    }

    /// Timestamps read as PostgreSQL counts them: its text of 5,002 instants from 1900 to 2200
    /// and two before the year 1000,
    /// leap days and month ends among them, against its own epoch; in UTC and with offsets.
    @Test func timestampsReadAsPostgreSQLCountsThem() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let rows = try await pool.query(
                    """
                    SELECT t, extract(epoch FROM t)::float8 AS epoch FROM (
                        SELECT timestamptz '1900-01-01 00:00:00+00' + random() * interval '300 years' AS t FROM generate_series(1, 4990)
                        UNION ALL SELECT unnest(ARRAY[timestamptz '2000-02-29 23:59:59.999999+00', '2024-12-31 12:00:00+00',
                            '1970-01-01 00:00:00+00', '1969-12-31 23:59:59.5+00', '2100-03-01 00:00:00+00',
                            '1900-02-28 00:00:01+00', '2199-12-31 23:59:59+00', '2023-01-31 00:00:00+00',
                            '2023-03-01 00:00:00+00', '2024-02-29 00:00:00+00', '0999-12-31 23:59:59+00',
                            '0001-01-01 00:00:00+00'])
                    ) instants
                    """)
                #expect(rows.count == 5_002)
                var sent = PostgresBatchColumn(), texts = PostgresBatchColumn()
                for row in rows {
                    let epoch = try row.decode("epoch", as: Double.self)
                    let read = try row.decode("t", as: Date.self)
                    #expect(abs(read.timeIntervalSince1970 - epoch) < 0.000_001, "\(row.text(0) ?? "")")
                    sent.append(read)
                    texts.append(row.text(0))
                }
                // And written as PostgreSQL reads them: each sent back is the instant it was,
                // exactly until 2106 (2^32 s), and after it to the microsecond, where a Date's
                // double steps by 0.95 µs.
                let differing = try await pool.query(
                    """
                    WITH d AS (
                        SELECT b.t, CASE WHEN b.t < timestamptz '2106-01-01 00:00:00+00' THEN a.t <> b.t
                                         ELSE abs(extract(epoch FROM a.t - b.t)) > 0.000001 END AS off
                        FROM unnest(\(sent)::timestamptz[]) WITH ORDINALITY AS a(t, i)
                        JOIN unnest(\(texts)::timestamptz[]) WITH ORDINALITY AS b(t, i) USING (i)
                    )
                    SELECT count(*) FILTER (WHERE off)::int AS n, count(*)::int AS all, min(t::text) FILTER (WHERE off) AS first
                    FROM d
                    """
                ).single()
                #expect(try differing.decode("all", as: Int.self) == 5_002)
                #expect(try differing.decode("n", as: Int.self) == 0, "\(differing.text(2) ?? "")")
                // Offsets are taken away; a month of 13, or no seconds, is no timestamp.
                for (text, epoch) in [
                    ("2026-11-25 17:30:00+05:45", 1_795_607_100.0), ("2026-11-25 17:30:00-03", 1_795_638_600.0),
                    ("2026-11-25T17:30:00.25", 1_795_627_800.25), ("1969-12-31 23:00:00-01:00:30", 30.0),
                ] {
                    #expect(Date(postgresText: text, type: .timestamptz)?.timeIntervalSince1970 == epoch, "\(text)")
                }
                #expect(Date(postgresText: "2026-13-01 00:00:00+00", type: .timestamptz) == nil)
                #expect(Date(postgresText: "2026-11-25 17:30", type: .timestamptz) == nil)
            }
        }
    }

    /// Narrow rows find a column by comparing names, wide ones by hashing them: both find every
    /// column, the first of two with one name, and refuse a name the row does not have.
    @Test func columnsAreFoundByNameInNarrowAndWideRows() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                for width in [3, 40] {
                    let columns = (0..<width).map { "\($0) AS c\($0)" }.joined(separator: ", ")
                    let row = try await pool.query(PostgresQuery(unsafeSQL: "SELECT \(columns), -1 AS c0")).single()
                    for index in 0..<width { #expect(try row.decode("c\(index)", as: Int.self) == index, "\(width) wide") }
                    #expect(throws: PostgresError.self) { try row.decode("nope", as: Int.self) }
                }
            }
        }
    }

    @Test func hostileStringsRoundTripUnchanged() async throws {
        let strings = [
            "it's", "''; drop table x; --", "'; drop table x; --", #"back\slash \\ \x00 \n"#, "\"double\" quotes",
            "$1 $2 ?", "emoji 🐘👩🏽‍💻🇳🇵", "Ελληνικά, 日本語, עברית, العربية", "\t\r\n whitespace \u{2028}",
            String(repeating: "x", count: 100_000),
        ]
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE x (id serial PRIMARY KEY, body text NOT NULL)")
                for string in strings {
                    #expect(try await roundTrip(string, as: "text", on: pool) == string)
                    let id = try await pool.query("INSERT INTO x (body) VALUES (\(string)) RETURNING id")
                        .single().decode("id", as: Int.self)
                    let stored = try await pool.query("SELECT body FROM x WHERE id = \(id)").single()
                        .decode("body", as: String.self)
                    #expect(stored == string)
                }
                // The table survived every attempt at injection.
                let count = try await pool.query("SELECT count(*) AS n FROM x").single().decode("n", as: Int.self)
                #expect(count == strings.count)
            }
        }
    }

    @Test func arraysRoundTrip() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let numbers: [Int64] = [1, -2, Int64.max, 0]
                let row = try await pool.query("SELECT \(numbers) AS numbers, \([Int]()) AS empty").single()
                #expect(try row.decode("numbers", as: [Int64].self) == numbers)
                #expect(try row.decode("empty", as: [Int].self) == [])
                let words = ["plain", "with space", "comma,inside", "quote\"d", "back\\slash", "NULL", "", "{braces}", "🐘"]
                let back = try await pool.query("SELECT \(words) AS words").single().decode("words", as: [String].self)
                #expect(back == words)
                // The server's own rendering, not just our round trip.
                let server = try await pool.query("SELECT ARRAY['a b', NULL, 'c']::text[] AS a").single()
                #expect(throws: PostgresError.self) { try server.decode("a", as: [String].self) }
                let count = try await pool.query("SELECT cardinality(\(words)) AS n").single().decode("n", as: Int.self)
                #expect(count == words.count)
            }
        }
    }

    /// A batch's column is untyped: the cast where it is used types the parameter, so it is
    /// read once into that array, not into a `text[]` converted element by element after.
    @Test func aBatchColumnTakesTheTypeOfItsCast() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                var ids = PostgresBatchColumn(), times = PostgresBatchColumn()
                ids.append(UUID(uuidString: "0b8e8c1e-6e0a-4c39-9d39-3f1a0c0f0d2e")!)
                times.append(Date(timeIntervalSince1970: 1_800_000_000))
                let row = try await pool.query(
                    "SELECT count(*) AS n FROM unnest(\(ids)::uuid[], \(times)::timestamptz[]) AS r(id, at) WHERE at IS NOT NULL",
                    prepared: true
                ).single()
                #expect(try row.decode("n", as: Int.self) == 1)
                let types = try await pool.query(
                    "SELECT parameter_types::text[] AS types FROM pg_prepared_statements WHERE statement LIKE '%unnest(%'"
                ).single().decode("types", as: [String].self)
                #expect(types == ["uuid[]", "timestamp with time zone[]"])
            }
        }
    }

    /// A batch's column is one array literal written value by value: escapes, NULLs and
    /// every type's text come back as sent, in order.
    @Test func batchColumnsUnnestToTheirValues() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let words: [String?] = ["plain", nil, "quote\"d", "back\\slash", "NULL", "", "{braces},comma", "🐘", nil]
                var column = PostgresBatchColumn()
                #expect(column.isEmpty)
                for word in words { column.append(word) }
                #expect(column.count == words.count)
                let back = try await pool.query(
                    "SELECT w FROM unnest(\(column)::text[]) WITH ORDINALITY AS t(w, n) ORDER BY n"
                ).map { try $0.decode("w", as: String?.self) }
                #expect(back == words)
                var numbers = PostgresBatchColumn()
                for number in [Int64.min, 0, 42] { numbers.append(number) }
                let sum = try await pool.query("SELECT sum(n)::text AS s FROM unnest(\(numbers)::int8[]) AS t(n)").single()
                #expect(try sum.decode("s", as: String.self) == "\(Int64.min + 42)")
                let empty = try await pool.query("SELECT cardinality(\(PostgresBatchColumn())::text[]) AS n").single()
                #expect(try empty.decode("n", as: Int.self) == 0)
            }
        }
    }

    @Test func jsonbRoundTripsItsValue() async throws {
        struct Payload: Codable, Equatable {
            var name: String
            var amounts: [Int]
            var nested: [String: Bool]
        }
        let payload = Payload(name: "O'Brien \"quoted\" 🐘", amounts: [1, -2, 3], nested: ["a": true])
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let row = try await pool.query("SELECT \(try JSONB(payload)) AS value").single()
                #expect(row.columns[0].type == .jsonb)
                #expect(try row.decode("value", as: JSONB.self).decode(Payload.self) == payload)
            }
        }
    }

    @Test func nulInAStringIsRefusedNotTruncated() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                for text in ["before\u{0}after", "\u{0}", "\u{0}first", "last\u{0}", String(repeating: "long ", count: 500) + "\u{0}"] {
                    let error = try await #require(throws: PostgresError.self) {
                        try await pool.query("SELECT \(text)::text")
                    }
                    #expect(error.kind == .encoding)
                }
                let inSQL = try await #require(throws: PostgresError.self) {
                    try await pool.query(PostgresQuery(unsafeSQL: "SELECT 1 -- \u{0}"))
                }
                #expect(inSQL.kind == .encoding && inSQL.message.contains("SQL text"))
                // Empty text and text without NUL go through.
                #expect(try await pool.query("SELECT \("")::text AS a, \("no nul")::text AS b").single().decode("b") == "no nul")
            }
        }
    }

    @Test func decodingNamesTheColumnOnMismatchOrNull() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let row = try await pool.query("SELECT 'abc'::text AS word, NULL::bigint AS missing, 7 AS seven").single()
                let mismatch = try #require(throws: PostgresError.self) { try row.decode("word", as: Int.self) }
                #expect(mismatch.kind == .decoding)
                #expect(mismatch.column == "word")
                let null = try #require(throws: PostgresError.self) { try row.decode("missing", as: Int.self) }
                #expect(null.kind == .decoding)
                #expect(null.message.contains("NULL"))
                #expect(try row.decode("missing", as: Int?.self) == nil)
                #expect(try row.decode(2, as: Int.self) == 7)
                #expect(throws: PostgresError.self) { try row.decode("nope", as: Int.self) }
            }
        }
    }
}

@Suite("UUID text")
struct UUIDTextTests {
    @Test func canonicalTextParsesToTheSameUUIDInEitherCase() {
        for _ in 0..<1000 {
            let uuid = UUID()
            #expect(UUID(postgresText: uuid.uuidString.lowercased(), type: .uuid) == uuid)
            #expect(UUID(postgresText: uuid.uuidString, type: .uuid) == uuid)
        }
    }

    @Test func malformedTextIsNotAUUID() {
        for text in [
            "", "6ba7b810-9dad-11d1-80b4-00c04fd430c", "6ba7b810-9dad-11d1-80b4-00c04fd430c8a", "6ba7b810x9dad-11d1-80b4-00c04fd430c8",
            "6ba7b8109-dad-11d1-80b4-00c04fd430c8", "6ba7b810-9dad-11d1-80b4-00c04fd430cg", "6ba7b810-9dad-11d1-80b4-00c04fd43 c8",
        ] {
            #expect(UUID(postgresText: text, type: .uuid) == nil, "\(text)")
        }
    }
}
