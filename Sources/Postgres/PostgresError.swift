/// An error from PostgreSQL or from this module, with the server's diagnostic fields
/// so that callers can tell a unique violation or a serialization failure from the rest.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The server refused the statement; `sqlState` says why.
        case server
        /// Could not connect, or the connection broke.
        case connection
        /// Every pooled connection stayed busy past the pool's wait limit.
        case poolExhausted
        /// The pool or its thread pool has shut down.
        case shutDown
        /// A value could not be decoded into the requested Swift type.
        case decoding
        /// A value cannot be sent (for example a string containing NUL).
        case encoding
    }

    public var kind: Kind
    public var message: String
    public var sqlState: String?
    public var detail: String?
    public var hint: String?
    public var constraint: String?
    public var table: String?
    public var schema: String?
    public var column: String?

    public init(
        _ kind: Kind, message: String, sqlState: String? = nil, detail: String? = nil, hint: String? = nil,
        constraint: String? = nil, table: String? = nil, schema: String? = nil, column: String? = nil
    ) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
        self.detail = detail
        self.hint = hint
        self.constraint = constraint
        self.table = table
        self.schema = schema
        self.column = column
    }

    public var description: String {
        var text = message
        if let sqlState { text = "\(sqlState): \(text)" }
        if let detail { text += " (\(detail))" }
        if let hint { text += " Hint: \(hint)" }
        return text
    }

    /// SQLSTATE 23505.
    public var isUniqueViolation: Bool { sqlState == SQLState.uniqueViolation }
    /// SQLSTATE 40001.
    public var isSerializationFailure: Bool { sqlState == SQLState.serializationFailure }
    /// The connection is unusable, or the server is going away (class 08 and 57P).
    public var isConnectionFailure: Bool {
        kind == .connection || (sqlState.map { $0.hasPrefix("08") || $0.hasPrefix("57P") } ?? false)
    }

    /// SQLSTATE 25006: a write refused as read-only. This project's READ ONLY transactions
    /// (`snapshot`, the audits) never write, so it means the server is (or became) a standby:
    /// this connection reached a database that is no longer the primary.
    public var isReadOnlyServer: Bool { sqlState == SQLState.readOnlySQLTransaction }

    /// The database cannot serve now: unreachable, going away, refusing connections (53300:
    /// too many), a standby where a primary was (25006, during a failover), or every pooled
    /// connection busy past the wait. A retry later may succeed; the request itself was not
    /// at fault.
    public var isUnavailable: Bool {
        isConnectionFailure || kind == .poolExhausted || kind == .shutDown
            || sqlState == "53300" || isReadOnlyServer
    }
}

/// The SQLSTATE codes this project tells apart.
public enum SQLState {
    public static let uniqueViolation = "23505"
    public static let foreignKeyViolation = "23503"
    public static let checkViolation = "23514"
    public static let serializationFailure = "40001"
    public static let readOnlySQLTransaction = "25006"
    public static let deadlockDetected = "40P01"
    public static let raiseException = "P0001"
    public static let insufficientPrivilege = "42501"
    public static let undefinedTable = "42P01"
    public static let queryCanceled = "57014"
}
