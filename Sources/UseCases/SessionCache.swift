import Foundation
import Marketplace
import Synchronization

/// The sessions this server checked lately, by token digest: a request whose token was seen a
/// moment ago costs no statement. An entry lives `lifetime` at most, never past its session's
/// expiry, and is forgotten at once when the database announces a change to its session (a
/// logout on any server: `SessionAnnouncements`, migration 0014). At capacity it starts again empty.
public final class SessionCache: Sendable {
    struct Entry {
        var user: UserID
        var expiresAt: Date
        var checkedAt: ContinuousClock.Instant
    }

    public static let channel = "lender_sessions"

    let capacity: Int
    let lifetime: Duration
    private let entries = Mutex<[Data: Entry]>([:])

    /// `lifetime` zero turns the cache off: every request checks its session in the database.
    public init(capacity: Int = 100_000, lifetime: Duration = .seconds(10)) {
        self.capacity = capacity
        self.lifetime = lifetime
    }

    func user(for digest: Data, at now: Date = Date()) -> UserID? {
        guard lifetime > .zero else { return nil }
        let clock = ContinuousClock.now
        return entries.withLock { entries in
            guard let entry = entries[digest] else { return nil }
            guard entry.expiresAt > now, clock - entry.checkedAt < lifetime else {
                entries[digest] = nil
                return nil
            }
            return entry.user
        }
    }

    func store(_ user: UserID, expiresAt: Date, for digest: Data) {
        guard lifetime > .zero else { return }
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[digest] = Entry(user: user, expiresAt: expiresAt, checkedAt: .now)
        }
    }

    func forget(_ digest: Data) {
        _ = entries.withLock { $0.removeValue(forKey: digest) }
    }

    /// Forgets the session whose digest an announcement names (hex).
    public func forget(announced hex: String) {
        guard let digest = Data(hex: hex) else { return }
        forget(digest)
    }

    /// Forgets everything: after announcements may have been missed (the listener reconnected).
    public func forgetAll() {
        entries.withLock { $0.removeAll() }
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
