import EventStore
import Marketplace
import Synchronization

/// The `Idempotency-Key` of the request being handled, for the command gateway to append with
/// the command's events. Set by `IdempotencyMiddleware` for the handler's task only.
public final class IdempotentRequest: Sendable {
    @TaskLocal public static var current: IdempotentRequest?

    public let idempotency: Idempotency
    /// What the key held when the request arrived: this request repeats that one.
    public let recorded: IdempotencyRecord?
    private let replayed = Mutex(false)

    public init(_ idempotency: Idempotency, recorded: IdempotencyRecord?) {
        self.idempotency = idempotency
        self.recorded = recorded
    }

    /// Whether the answer given is the first request's, rebuilt.
    public var wasReplayed: Bool { replayed.withLock { $0 } }
    func markReplayed() { replayed.withLock { $0 = true } }

    public static let keyReused = DomainError(
        .invalid, "idempotency_key_reused", "This Idempotency-Key was used for another request.",
        fields: [FieldError(field: "Idempotency-Key", code: "idempotency_key_reused", message: "a key of another request")])
}
