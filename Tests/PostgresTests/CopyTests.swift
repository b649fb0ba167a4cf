import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Rows sent by COPY")
struct CopyTests {
    /// Text with COPY's separators and escapes in it reads back byte for byte, each value by
    /// its column's type, NULL as NULL.
    @Test func hostileTextNullsAndTypedValuesReadBackAsSent() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE t (n bigint PRIMARY KEY, id uuid, at timestamptz, body text)")
                let texts = ["tab\there", "line\nbreak", "carriage\rreturn", #"back\slash \N \. "quoted""#, "\\.", "", "é😀"]
                let id = UUID()
                let at = Date(timeIntervalSince1970: 1_790_000_000.25)
                var rows = PostgresCopyRows(unsafeRawTarget: "t (n, id, at, body)", width: 4)
                for (n, text) in texts.enumerated() { rows.append([n, id, at, text]) }
                rows.append([texts.count, nil as UUID?, nil as Date?, nil as String?])
                let sent = rows
                try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in try session.copy(sent) }
                }
                let read = try await pool.query("SELECT n, id, at, body FROM t ORDER BY n")
                try #require(read.count == texts.count + 1)
                for (n, text) in texts.enumerated() {
                    #expect(try read[n].decode("body", as: String.self) == text)
                    #expect(try read[n].decode("id", as: UUID.self) == id)
                    #expect(try read[n].decode("at", as: Date.self) == at)
                }
                #expect(try read[texts.count].decode("body", as: String?.self) == nil)
                #expect(try read[texts.count].decode("id", as: UUID?.self) == nil)
                #expect(try read[texts.count].decode("at", as: Date?.self) == nil)
            }
        }
    }

    /// Rows of more than one piece (1 MiB each) arrive whole; a COPY the server will not
    /// start (no such table) is an error, and the connection takes its next statement.
    @Test func manyPiecesArriveWholeAndARefusedStartLeavesTheConnectionUsable() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE t (n bigint PRIMARY KEY, body text)")
                var rows = PostgresCopyRows(unsafeRawTarget: "t (n, body)", width: 2)
                let body = String(repeating: "0123456789abcde\t", count: 4096)
                for n in 0..<50 { rows.append([n, body]) }
                var missing = PostgresCopyRows(unsafeRawTarget: "no_such_table (n)", width: 1)
                missing.append([1])
                let (sent, refused) = (rows, missing)
                try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        try session.copy(sent)
                        let error = #expect(throws: PostgresError.self) { try session.copy(refused) }
                        #expect(error?.sqlState == "42P01")
                        let answer = try session.query("SELECT 41 + 1 AS x").single().decode("x", as: Int.self)
                        #expect(answer == 42)
                    }
                }
                let read = try await pool.query("SELECT count(*)::int AS c, sum(length(body))::int8 AS l FROM t").single()
                #expect(try read.decode("c", as: Int.self) == 50)
                #expect(try read.decode("l", as: Int.self) == 50 * 16 * 4096)
                let same = try await pool.query("SELECT count(*)::int AS c FROM t WHERE body = \(body)").single()
                #expect(try same.decode("c", as: Int.self) == 50)
            }
        }
    }

    /// A value PostgreSQL text cannot hold is refused before anything is sent; a row the
    /// table refuses fails the whole COPY. Either way nothing is written, and the connection
    /// takes its next statement.
    @Test func aNulOrARefusedRowWritesNothingAndTheConnectionGoesOn() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE t (n bigint PRIMARY KEY, body text)")
                var nul = PostgresCopyRows(unsafeRawTarget: "t (n, body)", width: 2)
                nul.append([1, "fine"])
                nul.append([2, "a\u{0}b"])
                var duplicate = PostgresCopyRows(unsafeRawTarget: "t (n, body)", width: 2)
                duplicate.append([1, "first"])
                duplicate.append([1, "again"])
                var notANumber = PostgresCopyRows(unsafeRawTarget: "t (n, body)", width: 2)
                notANumber.append(["one", "x"])
                let refusals = (nul: nul, duplicate: duplicate, notANumber: notANumber)
                try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        let refused = #expect(throws: PostgresError.self) { try session.copy(refusals.nul) }
                        #expect(refused?.kind == .encoding)
                        let conflict = #expect(throws: PostgresError.self) { try session.copy(refusals.duplicate) }
                        #expect(conflict?.sqlState == "23505")
                        let invalid = #expect(throws: PostgresError.self) { try session.copy(refusals.notANumber) }
                        #expect(invalid?.sqlState == "22P02")
                        let answer = try session.query("SELECT 41 + 1 AS x").single().decode("x", as: Int.self)
                        #expect(answer == 42)
                    }
                }
                #expect(try await pool.query("SELECT count(*) AS c FROM t").single().decode("c", as: Int.self) == 0)
            }
        }
    }

    /// Recorded between statements, a COPY is sent in its place: after the statements before
    /// it, before those after it, in the same transaction; and not inside a pipeline.
    @Test func aRecordedCopyRunsInItsPlaceAmongPipelinedStatements() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE t (n integer PRIMARY KEY, total bigint)")
                var middle = PostgresCopyRows(unsafeRawTarget: "u (n)", width: 1)
                for n in 101...200 { middle.append([n]) }
                let copied = middle
                try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        let statements = try session.recording { session in
                            for n in 1...100 {
                                try session.query("INSERT INTO t VALUES (\(n), coalesce((SELECT total FROM t WHERE n = \(n - 1)), 0) + \(n))")
                            }
                            // Into a table a statement before it makes: only there if that ran first.
                            try session.query("CREATE TABLE u (n integer PRIMARY KEY)")
                            try session.copy(copied)
                            try session.query("INSERT INTO t SELECT n, 0 FROM u")
                            // Reads what the COPY wrote: only right if it ran before.
                            try session.query("UPDATE t SET total = (SELECT total FROM t WHERE n = 100) + n WHERE n > 100")
                        }
                        #expect(statements.count == 104)
                        #expect(try session.query("SELECT count(*) AS c FROM t").single().decode("c", as: Int.self) == 0)
                        try session.withTransaction { session in try session.pipelined(recorded: statements) }
                        let inPipeline = #expect(throws: PostgresError.self) {
                            try session.withTransaction { session in try session.pipelined { session in try session.copy(copied) } }
                        }
                        #expect(inPipeline?.message.contains("pipeline") == true)
                        // In the caller's transaction: a statement failing after the COPY takes
                        // its rows back with it.
                        var more = PostgresCopyRows(unsafeRawTarget: "u (n)", width: 1)
                        for n in 201...210 { more.append([n]) }
                        let failing = try session.recording { [more] session in
                            try session.copy(more)
                            try session.query("SELECT 1 / 0")
                        }
                        let divided = #expect(throws: PostgresError.self) {
                            try session.withTransaction { session in try session.pipelined(recorded: failing) }
                        }
                        #expect(divided?.sqlState == "22012")
                        let kept = try session.query("SELECT count(*) AS c FROM u WHERE n > 200").single().decode("c", as: Int.self)
                        #expect(kept == 0)
                    }
                }
                let totals = try await pool.query("SELECT sum(total)::int8 AS s, count(*)::int AS c FROM t").single()
                #expect(try totals.decode("c", as: Int.self) == 200)
                #expect(try totals.decode("s", as: Int.self) == (1...100).reduce(0) { $0 + $1 * ($1 + 1) / 2 } + (101...200).reduce(0) { $0 + 5050 + $1 })
            }
        }
    }
}
