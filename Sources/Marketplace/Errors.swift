/// The body of a domain event: what the log stores for it, under its stable name. Each
/// aggregate's event enum wraps one body per case.
public protocol EventBody: Codable, Sendable {
    static var eventType: String { get }
}

/// One invalid field of a command, with a stable code.
public struct FieldError: Hashable, Sendable, Codable {
    public var field: String
    public var code: String
    public var message: String

    public init(field: String, code: String, message: String) {
        self.field = field
        self.code = code
        self.message = message
    }
}

/// Why the domain refused a command. Each case is a rule; the gateway maps the kind to an
/// HTTP status and passes the code on unchanged.
public struct DomainError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Kind: Hashable, Sendable {
        /// Fields are missing or malformed (422); every one is listed.
        case invalid
        /// The actor is not who they claim, or did not say (401).
        case unauthorized
        /// The actor may not do this (403).
        case forbidden
        /// The thing does not exist (404).
        case notFound
        /// The current state does not allow it (409).
        case conflict
        /// The payment processor refused the charge (402).
        case paymentDeclined
        /// What was asked for is spent or expired for good: a used link, an old code (410).
        case gone
        /// The actor did this too often lately; later it may go (429, `Retry-After` an hour).
        case tooOften
    }

    public var kind: Kind
    /// Stable, for clients: `item_not_available`, `bid_not_pending`, ...
    public var code: String
    public var message: String
    public var fields: [FieldError]
    /// The periods that stand in the way (`dates_unavailable`, `dates_booked`), earliest first.
    public var conflicts: [Period] = []

    public init(_ kind: Kind, _ code: String, _ message: String, fields: [FieldError] = []) {
        self.kind = kind
        self.code = code
        self.message = message
        self.fields = fields
    }

    public static func invalid(_ fields: [FieldError]) -> DomainError {
        DomainError(.invalid, "validation_failed", "Some fields are invalid.", fields: fields)
    }

    public var description: String { "\(code): \(message)" }
}

/// The refusals more than one rule or use case gives: one spelling of each code.
extension DomainError {
    public static let userNotFound = DomainError(.notFound, "user_not_found", "No such user.")
    public static let userExists = DomainError(.conflict, "user_exists", "This user is already registered.")
    public static let itemNotFound = DomainError(.notFound, "item_not_found", "No such item.")
    public static let itemExists = DomainError(.conflict, "item_exists", "This item was already posted.")
    public static let bidNotFound = DomainError(.notFound, "bid_not_found", "No such bid.")
    public static let loanNotFound = DomainError(.notFound, "loan_not_found", "No such loan.")
    public static let cardNotFound = DomainError(.notFound, "card_not_found", "No such card on file.")
    public static let invalidCredentials = DomainError(
        .unauthorized, "invalid_credentials", "The handle or the password is wrong.")
    public static let concurrencyConflict = DomainError(
        .conflict, "concurrency_conflict", "Too many concurrent changes; try again.")

    /// The same refusal, in words for this case.
    public func saying(_ message: String) -> DomainError {
        var error = self
        error.message = message
        return error
    }

    public static func handleTaken(_ handle: String) -> DomainError {
        DomainError(
            .conflict, "handle_taken", "The handle \(handle) is taken.",
            fields: [FieldError(field: "handle", code: "handle_taken", message: "another account has it")])
    }

    public static func loanNotFundraising(_ status: LoanStatus) -> DomainError {
        DomainError(.conflict, "loan_not_fundraising", "The loan is \(status.rawValue), not fundraising.")
    }
}

/// Collects field problems, then throws them all at once.
struct Validation {
    private(set) var problems: [FieldError] = []

    mutating func check(_ condition: Bool, _ field: String, _ code: String, _ message: String) {
        if !condition { problems.append(FieldError(field: field, code: code, message: message)) }
    }

    mutating func add(_ more: [FieldError]) {
        problems += more
    }

    func throwIfInvalid() throws {
        if !problems.isEmpty { throw DomainError.invalid(problems) }
    }
}

extension DomainError {
    /// A validation failure naming every problem, if there is any.
    static func throwIfAny(_ problems: [FieldError]) throws {
        if !problems.isEmpty { throw DomainError.invalid(problems) }
    }
}
