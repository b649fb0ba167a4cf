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
