/// SQL with its parameters bound, never spliced: every `\(value)` in the literal
/// becomes `$n` and travels separately to the server.
///
///     let rows = try await connection.query("SELECT id FROM users WHERE handle = \(handle)")
///
/// Text that must be spliced (an identifier, say) goes through `\(unsafeRaw:)`, whose name
/// is meant to make a reviewer stop.
public struct PostgresQuery: Sendable, Hashable, ExpressibleByStringInterpolation {
    public var sql: String
    public var bindings: [PostgresBinding]
    /// Where each parameter's `$n` starts in `sql` (UTF-8 offsets), as interpolation wrote
    /// them: what `append` renumbers, and nothing else. Nil for SQL given as text.
    var placeholders: [Int]?

    public init(unsafeSQL sql: String, bindings: [PostgresBinding] = []) {
        self.sql = sql
        self.bindings = bindings
        self.placeholders = bindings.isEmpty ? [] : nil
    }

    public init(stringLiteral value: String) {
        self.sql = value
        self.bindings = []
        self.placeholders = []
    }

    public init(stringInterpolation: StringInterpolation) {
        self.sql = stringInterpolation.sql
        self.bindings = stringInterpolation.bindings
        self.placeholders = stringInterpolation.placeholders
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var bindings: [PostgresBinding] = []
        var placeholders: [Int] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            bindings.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) {
            sql += literal
        }

        public mutating func appendInterpolation(_ value: some PostgresEncodable) {
            bind(value.postgresBinding)
        }

        public mutating func appendInterpolation(_ value: (some PostgresEncodable)?) {
            bind(value?.postgresBinding ?? .null)
        }

        /// Writes a count into the SQL as its digits, not as a parameter: for a value the plan
        /// turns on, such as a `LIMIT`. A prepared statement's generic plan cannot see a
        /// parameter's value and takes a `LIMIT $n` for a tenth of the rows, so PostgreSQL
        /// planned such a statement anew at every run (60–70 µs, more than a page's executor
        /// time on the market's newest). Each value is a statement of its own: only for
        /// values from a small range (a page's size is 1 to 100).
        public mutating func appendInterpolation(literal value: Int) {
            precondition(value >= 0, "a literal is a count")
            // Apart from a placeholder just before it, which the digits would lengthen ($1, $15).
            if let last = sql.utf8.last, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(last) { sql += " " }
            sql += String(value)
        }

        /// Splices text into the SQL as is. Only for text that never comes from a user.
        public mutating func appendInterpolation(unsafeRaw text: String) {
            sql += text
        }

        mutating func bind(_ binding: PostgresBinding) {
            bindings.append(binding)
            placeholders.append(sql.utf8.count)
            sql += "$\(bindings.count)"
        }
    }
}

extension PostgresQuery {
    /// A statement name that stands for the SQL text and its parameter types.
    static func preparedName(_ query: PostgresQuery) -> String {
        var hasher = StableHasher()
        hasher.combine(query.sql)
        for binding in query.bindings { hasher.combine(String(binding.type.rawValue)) }
        return "lender_\(hasher.value)"
    }
}

/// FNV-1a, 64 bits: the same name for the same text in every process (Hasher is seeded).
struct StableHasher {
    var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func combine(_ text: String) {
        // Over the contiguous bytes: through `utf8`'s iterator, a long statement's hash was 1%
        // of a profile read's CPU.
        var text = text
        var value = self.value
        text.withUTF8 { bytes in
            for byte in bytes {
                value ^= UInt64(byte)
                value &*= 0x0000_0100_0000_01b3
            }
        }
        value ^= 0xff
        value &*= 0x0000_0100_0000_01b3
        self.value = value
    }
}

extension PostgresQuery {
    /// Appends `other`, its parameters renumbered after this one's: for a statement built from
    /// the parts that apply. Only the placeholders interpolation wrote are renumbered; a `$`
    /// in literal text (a string, a dollar quote) is left as it is.
    public mutating func append(_ other: PostgresQuery) {
        guard let theirs = other.placeholders else {
            preconditionFailure("only statements made by interpolation can be appended with parameters")
        }
        let offset = bindings.count
        let start = sql.utf8.count
        var text = Array(other.sql.utf8)
        // From the last placeholder back, so the offsets before each one stay true.
        for (index, position) in theirs.enumerated().reversed() {
            let old = Array("$\(index + 1)".utf8)
            let new = Array("$\(index + 1 + offset)".utf8)
            text.replaceSubrange(position..<position + old.count, with: new)
        }
        // Their new offsets, front to back: each earlier renumbering lengthened the text.
        var shift = 0
        let moved = theirs.enumerated().map { index, position in
            defer { shift += "\(index + 1 + offset)".utf8.count - "\(index + 1)".utf8.count }
            return start + position + shift
        }
        sql += String(decoding: text, as: UTF8.self)
        bindings += other.bindings
        placeholders = placeholders.map { $0 + moved }
    }

    /// `parts` joined by `separator`, their parameters renumbered in order.
    public static func joined(_ parts: [PostgresQuery], separator: String) -> PostgresQuery {
        var joined: PostgresQuery = ""
        for (index, part) in parts.enumerated() {
            if index > 0 { joined.append(PostgresQuery(stringLiteral: separator)) }
            joined.append(part)
        }
        return joined
    }
}
