import Foundation
import Marketplace
import Synchronization

/// The sessions this server checked lately, by token digest: a request whose token was seen a
/// moment ago costs no statement. An entry lives `lifetime` at most, never past its session's
/// expiry, and is forgotten at once when the database announces a change to its session (a
/// logout on any server: `SessionAnnouncements`, migration 0014). At capacity it starts again empty.
public final class SessionCache: Sendable {
    struct Entry {
        var session: LiveSession
        var expiresAt: Date
        var checkedAt: ContinuousClock.Instant
    }

    public static let channel = "lender_sessions"

    let capacity: Int
    let lifetime: Duration
    private let entries = Mutex<(byDigest: [Data: Entry], forgets: Int)>(([:], 0))

    /// `lifetime` zero turns the cache off: every request checks its session in the database.
    public init(capacity: Int = 100_000, lifetime: Duration = .seconds(10)) {
        self.capacity = capacity
        self.lifetime = lifetime
    }

    func session(for digest: Data, at now: Date = Date()) -> LiveSession? {
        guard lifetime > .zero else { return nil }
        let clock = ContinuousClock.now
        return entries.withLock { entries in
            guard let entry = entries.byDigest[digest] else { return nil }
            guard entry.expiresAt > now, clock - entry.checkedAt < lifetime else {
                entries.byDigest[digest] = nil
                return nil
            }
            return entry.session
        }
    }

    /// Taken before a session is read from the database, and given back to `store`: a read
    /// that a forget overtook (a logout committed meanwhile) is not kept.
    func ticket() -> Int { entries.withLock { $0.forgets } }

    func store(_ session: LiveSession, expiresAt: Date, for digest: Data, ticket: Int) {
        guard lifetime > .zero else { return }
        entries.withLock { entries in
            guard entries.forgets == ticket else { return }
            if entries.byDigest.count >= capacity { entries.byDigest.removeAll(keepingCapacity: true) }
            entries.byDigest[digest] = Entry(session: session, expiresAt: expiresAt, checkedAt: .now)
        }
    }

    func forget(_ digest: Data) {
        entries.withLock { entries in
            entries.byDigest[digest] = nil
            entries.forgets &+= 1
        }
    }

    /// Forgets the session whose digest an announcement names (hex).
    public func forget(announced hex: String) {
        guard let digest = Data(hex: hex) else { return }
        forget(digest)
    }

    /// Forgets every session of `user` (their account was closed, suspended or reinstated).
    func forget(user: UserID) {
        entries.withLock { entries in
            entries.byDigest = entries.byDigest.filter { $0.value.session.user != user }
            entries.forgets &+= 1
        }
    }

    /// Forgets everything: after announcements may have been missed (the listener reconnected).
    public func forgetAll() {
        entries.withLock { entries in
            entries.byDigest.removeAll()
            entries.forgets &+= 1
        }
    }
}

/// A live session: whose it is, and the suspension that held when it was read (SPEC §12.5).
public struct LiveSession: Sendable, Hashable {
    public var user: UserID
    public var suspension: Suspension?

    public init(user: UserID, suspension: Suspension? = nil) {
        self.user = user
        self.suspension = suspension
    }
}

extension Data {
    /// From lower- or upper-case hex; nil for anything else.
    init?(hex: String) {
        guard hex.utf8.count % 2 == 0 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(hex.utf8.count / 2)
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }
}
