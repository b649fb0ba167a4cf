/// A request refused for now, by a limit rather than a rule: too many attempts (429) or too
/// much at once (503). It says when to try again; the HTTP layer sends that as `Retry-After`.
public struct TryLater: Error, Sendable, Hashable {
    public enum Reason: Sendable, Hashable {
        /// This caller has spent its attempts for a while.
        case tooManyAttempts
        /// The server is too busy for this, for anyone, right now.
        case busy
    }

    public var reason: Reason
    public var code: String
    public var detail: String
    public var retryAfterSeconds: Int

    public init(_ reason: Reason, code: String, detail: String, retryAfterSeconds: Int) {
        self.reason = reason
        self.code = code
        self.detail = detail
        self.retryAfterSeconds = retryAfterSeconds
    }
}
