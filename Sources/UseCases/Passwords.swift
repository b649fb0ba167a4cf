import Crypto
import Foundation
import HummingbirdBcrypt
import NIOPosix
import Synchronization

/// bcrypt for registration and login, bounded: at most `concurrent` run at once, and at most
/// `waiting` of each kind wait for a turn; beyond that a request is refused at once (503 with
/// `Retry-After`) instead of queueing behind a flood. Checks (logins) and hashes
/// (registrations) wait apart, and a freed turn goes to a waiting check first, so a flood of
/// registrations can slow a login by one hash at most and never refuse it (issue 48: 40
/// connections registering refused 14 of 14 logins). Hashes run on NIO's thread pool, off
/// the event loops and Swift's pool.
///
/// New hashes are bcrypt of a pre-hash, `base64(HMAC-SHA-256(password))`, stored with the
/// prefix `$lender1`: bcrypt reads only 72 bytes, and the pre-hash lets all 128 characters of
/// a password count. Hashes without the prefix (the first release's) are checked as before.
public final class PasswordHasher: Sendable {
    public let cost: UInt8
    private let concurrent: Int
    private let waiting: Int
    private let state = Mutex(State())

    private struct State {
        var running = 0
        /// Waiting checks, then waiting hashes: the first are served first.
        var queues: [Lane: [CheckedContinuation<Void, Never>]] = [.check: [], .hash: []]
        var checks = 0
    }

    /// What a turn is for: checking a password (a login), or hashing a new one.
    private enum Lane { case check, hash }

    public init(cost: UInt8, concurrent: Int = max(1, ProcessInfo.processInfo.activeProcessorCount), waiting: Int = 32) {
        self.cost = cost
        self.concurrent = concurrent
        self.waiting = waiting
    }

    static let prefix = "$lender1"
    private static let preHashKey = SymmetricKey(data: Data("lender password pre-hash, v1".utf8))

    static func preHash(_ password: String) -> String {
        Data(HMAC<SHA256>.authenticationCode(for: Data(password.utf8), using: preHashKey)).base64EncodedString()
    }

    /// A hash to store for `password`.
    public func hash(_ password: String) async throws -> String {
        let cost = cost
        let preHashed = Self.preHash(password)
        return try await run(.hash) { Self.prefix + Bcrypt.hash(preHashed, cost: cost) }
    }

    /// Whether `password` is the one `hash` was made from.
    public func verify(_ password: String, hash: String) async throws -> Bool {
        try await run(.check) {
            if hash.hasPrefix(Self.prefix) {
                return Bcrypt.verify(Self.preHash(password), hash: String(hash.dropFirst(Self.prefix.count)))
            }
            return Bcrypt.verify(password, hash: hash)
        }
    }

    /// bcrypt runs so far: for tests that check what was never hashed.
    public var checks: Int { state.withLock { $0.checks } }

    private func run<T: Sendable>(_ lane: Lane, _ work: @escaping @Sendable () -> T) async throws -> T {
        try await acquire(lane)
        defer { release() }
        // A request given up while it waited (its client left) spends no hash.
        try Task.checkCancellation()
        return try await NIOThreadPool.singleton.runIfActive(work)
    }

    private func acquire(_ lane: Lane) async throws {
        enum Turn { case now, wait, refuse }
        let turn = state.withLock { state -> Turn in
            state.checks += 1
            if state.running < concurrent {
                state.running += 1
                return .now
            }
            return state.queues[lane, default: []].count < waiting ? .wait : .refuse
        }
        switch turn {
        case .now: return
        case .refuse:
            state.withLock { $0.checks -= 1 }
            throw TryLater(
                .busy, code: "busy", detail: "Too many password checks at once; try again shortly.", retryAfterSeconds: 1)
        case .wait:
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Bool in
                    // A turn may have come free between the check and here.
                    if state.running < concurrent {
                        state.running += 1
                        return true
                    }
                    state.queues[lane, default: []].append(continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// Hands the turn to the next waiter, a check before a hash (it keeps `running` as it
    /// is), else frees it.
    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            for lane in [Lane.check, .hash] where !(state.queues[lane]?.isEmpty ?? true) {
                return state.queues[lane]!.removeFirst()
            }
            state.running -= 1
            return nil
        }
        next?.resume()
    }
}
