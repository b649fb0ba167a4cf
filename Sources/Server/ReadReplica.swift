import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Marketplace
import Postgres
import Projections
import Synchronization

/// Which database answered a read: the `X-Read-From` header of the routes a replica may serve.
public enum ReadFrom: String, Sendable {
    case primary
    case replica
}

/// The streaming replica that lists and profiles are read from (`READ_DATABASE_URL`).
///
/// A replica replays the log's commits in order, views included, so once its `log_head` has
/// reached a position it holds everything up to that position. Read-your-writes is therefore
/// one comparison: a read that must see position N (`X-Min-Position`, the `position` a
/// command answered) goes to the replica once its head is at N or beyond, else to the primary.
public final class ReadReplica: Sendable {
    public let pool: PostgresPool
    let primary: PostgresPool
    let logger: Logger
    /// The highest head seen on the replica: it only grows, so a read at or below it needs no look.
    private let knownHead = Mutex<Int64>(0)
    /// The highest head seen on the primary: a position at or below it is one the log has.
    private let knownPrimaryHead = Mutex<Int64>(0)
    /// With several replica hosts, the head one connection reads says nothing of the host the
    /// read then goes to: a read that must see a position goes to the primary.
    let severalHosts: Bool

    public init(pool: PostgresPool, primary: PostgresPool, logger: Logger) {
        self.pool = pool
        self.primary = primary
        self.logger = logger
        self.severalHosts = pool.configuration.hasSeveralHosts
    }

    /// Where a read that must see the log up to `minimum` goes; anything without one, the replica.
    func placement(atLeast minimum: Int64?) async -> ReadFrom {
        guard let minimum else { return .replica }
        if severalHosts { return .primary }
        guard minimum > knownHead.withLock({ $0 }) else { return .replica }
        do {
            let replicaHead = try await head()
            guard replicaHead < minimum else { return .replica }
            // A position past the primary's head too (a client's mistake, or `2^63-1` sent to
            // push every read onto the primary) is read as the head: no log has it yet. Asked
            // of the primary only for a position past the highest head seen there, so a read
            // that follows a write the replica lacks costs no more than before.
            guard minimum > knownPrimaryHead.withLock({ $0 }) else { return .primary }
            let primaryHead = try await LogHead.read(from: primary)
            knownPrimaryHead.withLock { $0 = max($0, primaryHead) }
            return replicaHead >= min(minimum, primaryHead) ? .replica : .primary
        } catch {
            logger.warning("the read replica does not answer; reading from the primary", metadata: ["error": "\(error)"])
            return .primary
        }
    }

    /// The replica's log head, now.
    func head() async throws -> Int64 {
        let head = try await LogHead.read(from: pool)
        knownHead.withLock { $0 = max($0, head) }
        return head
    }

    /// How far the replica is behind the primary.
    public struct Lag: Sendable, Codable, Equatable {
        /// Events the primary has that the replica has not replayed yet.
        public var positions: Int64
        /// How long ago the oldest event the replica has not replayed was appended; 0 once
        /// caught up. (Not the time since its last replay, which grows while nothing is written.)
        public var seconds: Double
        public var replicaHead: Int64
        public var primaryHead: Int64
    }

    /// The lag, or nil when the replica (or the primary) does not answer within `limit`: a
    /// probe or a scrape must not wait out a connect timeout. The query is left to finish
    /// by itself, since a libpq call does not stop when cancelled.
    public func lag(within limit: Duration) async -> Lag? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Lag?, Never>) in
            let first = FirstAnswer(continuation)
            Task {
                do { first.give(try await lag()) } catch {
                    logger.warning("the read replica's lag is unknown", metadata: ["error": "\(error)"])
                    first.give(nil)
                }
            }
            Task {
                try? await Task.sleep(for: limit)
                first.give(nil)
            }
        }
    }

    public func lag() async throws -> Lag {
        let replicaHead = try await head()
        let (primaryHead, secondsBehind) = try await LogHead.read(from: primary, after: replicaHead)
        let behind = max(0, primaryHead - replicaHead)
        return Lag(
            positions: behind, seconds: behind == 0 ? 0 : max(0, secondsBehind), replicaHead: replicaHead,
            primaryHead: primaryHead)
    }
}

/// Resumes a continuation with the first value given, and ignores the rest.
final class FirstAnswer<Value: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<Value, Never>?>

    init(_ continuation: CheckedContinuation<Value, Never>) { self.continuation = Mutex(continuation) }

    func give(_ value: Value) {
        continuation.withLock { $0.take() }?.resume(returning: value)
    }
}

/// The same view on the replica and on the primary; the request's placement picks one.
struct Replicated<View: Sendable>: Sendable {
    let primary: View
    let replica: View

    init(_ make: (PostgresPool) -> View, primary: PostgresPool, replica: ReadReplica?) {
        self.primary = make(primary)
        self.replica = make(replica?.pool ?? primary)
    }

    func on(_ context: UserContext) -> View { context.readFrom == .replica ? replica : primary }
}

/// Places each read of the routes a replica may serve: `X-Min-Position: N` keeps it on the
/// primary until the replica has replayed position N. A replica that does not answer (or
/// cancels the read to replay, 40001) is stepped around: the read is made again on the
/// primary. The answer says where it was read, in `X-Read-From`.
struct ReadPlacementMiddleware: RouterMiddleware {
    typealias Context = UserContext
    let replica: ReadReplica?

    func handle(_ request: Request, context: UserContext, next: (Request, UserContext) async throws -> Response) async throws
        -> Response
    {
        var context = context
        let minimum = try Self.minimumPosition(request)
        context.readFrom = await replica?.placement(atLeast: minimum) ?? .primary
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as PostgresError where context.readFrom == .replica && (error.isUnavailable || error.isSerializationFailure) {
            context.logger.warning("a read failed on the replica; reading from the primary", metadata: ["error": "\(error)"])
            context.readFrom = .primary
            response = try await next(request, context)
        }
        response.headers[.readFrom] = context.readFrom.rawValue
        return response
    }

    static func minimumPosition(_ request: Request) throws -> Int64? {
        guard let text = request.headers[.minPosition] else { return nil }
        guard let position = Int64(text), position >= 0 else {
            throw DomainError.invalid([
                FieldError(field: "X-Min-Position", code: "invalid_position", message: "a log position, 0 or more")
            ])
        }
        return position
    }
}

extension HTTPField.Name {
    static let minPosition = HTTPField.Name("X-Min-Position")!
    static let readFrom = HTTPField.Name("X-Read-From")!
}
