import Foundation
import HTTPTypes
import Hummingbird
import Marketplace
import Synchronization
import UseCases

/// How many postings (rentals, requests, loans) and bids one user may write, as token
/// buckets: `perHour` on average, up to a quarter of it at once. Past that, 429
/// `too_many_writes` with `Retry-After`. Kept in each server's memory: with several servers a
/// user gets each one's share, which still bounds a flood (it does not need to be exact, as
/// the login and payment limits do). A repeat of an idempotent request is not counted.
public struct WriteLimits: Sendable {
    public var postingsPerHour: Int
    public var bidsPerHour: Int
    /// Every other change a user makes to the log: revisions, approvals, withdrawals, their
    /// profile and blocks, their cart.
    public var changesPerHour: Int
    /// Photo uploads (each up to 10 MiB and a decode), apart from the cheap changes: issue 48
    /// found 1,200 an hour in `changes` worth ~31 GB an hour of storage to one account.
    public var photosPerHour: Int
    /// Registrations from one client address (an IPv6 /64), counted before anything is looked
    /// up or hashed: a flood of them neither fills the bcrypt queue for long nor probes which
    /// e-mail addresses have accounts (`email_taken`) faster than this.
    public var registrationsPerHour: Int

    public init(
        postingsPerHour: Int = 120, bidsPerHour: Int = 600, changesPerHour: Int = 1200, photosPerHour: Int = 120,
        registrationsPerHour: Int = 60
    ) {
        self.postingsPerHour = postingsPerHour
        self.bidsPerHour = bidsPerHour
        self.changesPerHour = changesPerHour
        self.photosPerHour = photosPerHour
        self.registrationsPerHour = registrationsPerHour
    }

    /// No limits: for load tests.
    public static let unlimited = WriteLimits(
        postingsPerHour: 0, bidsPerHour: 0, changesPerHour: 0, photosPerHour: 0, registrationsPerHour: 0)

    enum Kind: String, Sendable {
        case postings, bids, changes, photos
    }

    func perHour(_ kind: Kind) -> Int {
        switch kind {
        case .postings: postingsPerHour
        case .bids: bidsPerHour
        case .changes: changesPerHour
        case .photos: photosPerHour
        }
    }
}

/// The buckets, by user and kind.
final class WriteLimiter: Sendable {
    let limits: WriteLimits
    private let buckets = Mutex([String: (tokens: Double, at: ContinuousClock.Instant)]())

    init(_ limits: WriteLimits) { self.limits = limits }

    /// Takes one write from the user's bucket, or throws 429 saying when the next is allowed.
    func take(_ kind: WriteLimits.Kind, by user: UserID) throws {
        try take("\(kind.rawValue):\(user)", perHour: limits.perHour(kind), what: kind.rawValue)
    }

    /// Takes one registration from the client address's bucket (429 `too_many_registrations`).
    func takeRegistration(from address: String) throws {
        try take("registrations:\(address)", perHour: limits.registrationsPerHour, what: "registrations", code: "too_many_registrations")
    }

    /// Takes one from the bucket `key` (any caller: a user, a client address) of `perHour`.
    func take(_ key: String, perHour: Int, what: String, code: String = "too_many_writes") throws {
        guard perHour > 0 else { return }
        let capacity = Double(max(1, perHour / 4))
        let perSecond = Double(perHour) / 3600
        let now = ContinuousClock.now
        let wait: Int? = buckets.withLock { buckets in
            // Bounded memory: a bucket untouched for an hour is full again, as good as absent.
            if buckets.count > 100_000 { buckets = buckets.filter { now - $0.value.at < .seconds(3600) } }
            let (tokens, at) = buckets[key] ?? (capacity, now)
            let refilled = min(capacity, tokens + Double((now - at) / .seconds(1)) * perSecond)
            guard refilled >= 1 else {
                buckets[key] = (refilled, now)
                return Int(((1 - refilled) / perSecond).rounded(.up))
            }
            buckets[key] = (refilled - 1, now)
            return nil
        }
        if let wait {
            throw Problem(
                .tooManyRequests, code: code,
                detail: "At most \(perHour) \(what) an hour; try again in \(wait) s.",
                headers: [.retryAfter: "\(max(1, wait))"])
        }
    }
}

/// Counts the route's writes against the caller's bucket of `kind`.
struct WriteLimitMiddleware: RouterMiddleware {
    let limiter: WriteLimiter
    let kind: WriteLimits.Kind

    func handle(_ request: Request, context: UserContext, next: (Request, UserContext) async throws -> Response) async throws
        -> Response
    {
        if request.method != .get, request.method != .head, IdempotentRequest.current?.recorded == nil {
            try limiter.take(kind, by: context.user)
        }
        return try await next(request, context)
    }
}
