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

    public init(unsafeSQL sql: String, bindings: [PostgresBinding] = []) {
        self.sql = sql
        self.bindings = bindings
    }

    public init(stringLiteral value: String) {
        self.sql = value
        self.bindings = []
    }

    public init(stringInterpolation: StringInterpolation) {
        self.sql = stringInterpolation.sql
        self.bindings = stringInterpolation.bindings
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var bindings: [PostgresBinding] = []

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

        /// Splices text into the SQL as is. Only for text that never comes from a user.
        public mutating func appendInterpolation(unsafeRaw text: String) {
            sql += text
        }

        mutating func bind(_ binding: PostgresBinding) {
            bindings.append(binding)
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
        for byte in text.utf8 {
            value ^= UInt64(byte)
            value &*= 0x0000_0100_0000_01b3
        }
        value ^= 0xff
        value &*= 0x0000_0100_0000_01b3
    }
}

extension PostgresQuery {
    /// Appends `other`, its parameters renumbered after this one's: for a statement built from
    /// the parts that apply. Only for SQL written in code, where `$` and digits is a parameter.
    public mutating func append(_ other: PostgresQuery) {
        let offset = bindings.count
        bindings += other.bindings
        guard offset > 0, other.sql.contains("$") else {
            sql += other.sql
            return
        }
        var rest = Substring(other.sql)
        while let dollar = rest.firstIndex(of: "$") {
            sql += rest[..<dollar]
            let digits = rest[rest.index(after: dollar)...].prefix { $0.isASCII && $0.isNumber }
            sql += "$"
            if let number = Int(digits) { sql += String(number + offset) }
            rest = rest[digits.endIndex...]
        }
        sql += rest
    }

    /// `parts` joined by `separator`, their parameters renumbered in order.
    public static func joined(_ parts: [PostgresQuery], separator: String) -> PostgresQuery {
        var joined = PostgresQuery(unsafeSQL: "")
        for (index, part) in parts.enumerated() {
            if index > 0 { joined.sql += separator }
            joined.append(part)
        }
        return joined
    }
}
