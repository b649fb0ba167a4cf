import Crypto
import Foundation
import Postgres
import Synchronization

/// The master keys that wrap every data key (`DATA_KEY_FILE`): one base64 AES-256 key a
/// line, the first the current one, which wraps new keys; the others only unwrap, until
/// `lender keys rotate-master` has rewrapped everything under the first.
public struct MasterKeys: Sendable {
    public let currentID: String
    let current: SymmetricKey
    let byID: [String: SymmetricKey]

    public init(_ keys: [SymmetricKey]) throws {
        guard let first = keys.first else { throw DataKeyError.noMasterKey("the key file holds no key") }
        current = first
        currentID = Self.id(of: first)
        byID = Dictionary(keys.map { (Self.id(of: $0), $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// Reads a key file: base64 keys of 32 bytes, one a line, newest first.
    public init(file path: String) throws {
        guard let contents = FileManager.default.contents(atPath: path) else {
            throw DataKeyError.noMasterKey("cannot read \(path)")
        }
        try self.init(text: String(decoding: contents, as: UTF8.self), source: path)
    }

    public init(text: String, source: String = "the key") throws {
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
        try self.init(
            lines.map { line in
                guard let bytes = Data(base64Encoded: line), bytes.count == 32 else {
                    throw DataKeyError.noMasterKey("\(source): each line must be 32 bytes in base64")
                }
                return SymmetricKey(data: bytes)
            })
    }

    /// A new master key, as a line of a key file.
    public static func newKeyLine() -> String {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
    }

    /// Names a master key without revealing it: stored beside each key it wraps.
    static func id(of key: SymmetricKey) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data("lender master key id".utf8), using: key)
        return Data(mac).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    func wrap(_ key: SymmetricKey, subject: String) throws -> Data {
        let bytes = key.withUnsafeBytes { Data($0) }
        return try AES.GCM.seal(bytes, using: current, authenticating: Data(subject.utf8)).combined!
    }

    func unwrap(_ wrapped: Data, masterID: String, subject: String) throws -> SymmetricKey {
        guard let master = byID[masterID] else { throw DataKeyError.unknownMasterKey(masterID) }
        let box = try AES.GCM.SealedBox(combined: wrapped)
        return SymmetricKey(data: try AES.GCM.open(box, using: master, authenticating: Data(subject.utf8)))
    }
}

public enum DataKeyError: Error, Sendable, Hashable, CustomStringConvertible {
    case noMasterKey(String)
    case unknownMasterKey(String)
    /// The subject was forgotten: nothing more may be written about them.
    case forgotten(String)

    public var description: String {
        switch self {
        case .noMasterKey(let why):
            "no master key (\(why)): set DATA_KEY_FILE to a file made with `lender keys new-master > FILE`"
        case .unknownMasterKey(let id):
            "a data key is wrapped by master key \(id), which DATA_KEY_FILE does not hold"
        case .forgotten(let subject): "\(subject) was forgotten; nothing more is written about them"
        }
    }
}

/// Each person's data key (AES-256-GCM), kept outside the log in `data_keys`, wrapped by the
/// master key. Forgetting a person deletes their key: what the log holds sealed with it can
/// never be read again, and the log itself is not touched (crypto-shredding).
///
/// Unwrapped keys are cached for `lifetime`: another server forgets a key at the latest then.
/// A forgotten person can no longer act, so a key cached a little longer only opens, in that
/// server's memory, what it opened before.
public final class DataKeys: Sendable {
    public let pool: PostgresPool
    private let masters: Mutex<MasterKeys>
    private let file: String?
    private let lifetime: Duration
    private let cache = Mutex([String: Cached]())
    private static let maxCached = 50_000

    private struct Cached {
        /// Nil: the subject was forgotten.
        var key: SymmetricKey?
        var at: ContinuousClock.Instant
    }

    /// When `file` was last read, to see a rotation by another process.
    private let fileModified: Mutex<Date?>

    public init(pool: PostgresPool, masters: MasterKeys, file: String? = nil, lifetime: Duration = .seconds(60)) {
        self.pool = pool
        self.masters = Mutex(masters)
        self.file = file
        self.lifetime = lifetime
        self.fileModified = Mutex(file.flatMap(Self.modified))
    }

    private static func modified(_ path: String) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
    }

    /// Reads the key file again if it changed since (`lender keys rotate-master`), so that a
    /// key made after a rotation is wrapped by the new master key, not the one this process
    /// started with.
    private func reloadIfRotated() throws {
        guard let file, let now = Self.modified(file), now != fileModified.withLock({ $0 }) else { return }
        let reloaded = try MasterKeys(file: file)
        masters.withLock { $0 = reloaded }
        fileModified.withLock { $0 = now }
    }

    public var currentMasterID: String { masters.withLock { $0.currentID } }

    /// The key that seals what is written about `subject`, made on first need. Two writers
    /// making one at once both get the one that was stored first.
    public func sealingKey(for subject: String) async throws -> SymmetricKey {
        if let cached = cached(subject) {
            guard let key = cached else { throw DataKeyError.forgotten(subject) }
            return key
        }
        try reloadIfRotated()
        let fresh = SymmetricKey(size: .bits256)
        let (masterID, wrapped) = try masters.withLock { ($0.currentID, try $0.wrap(fresh, subject: subject)) }
        // DO UPDATE, not DO NOTHING: it returns the row a concurrent writer stored first.
        // Committed without waiting for its flush: nothing is sealed with the key before this
        // commit, and every append that seals with it commits after it, synchronously, which
        // flushes the log up to and past this row. A key lost in a crash sealed nothing.
        let row = try await pool.query(
            """
            INSERT INTO data_keys AS k (subject, wrapped, master_key_id)
            SELECT \(subject), \(wrapped), \(masterID) FROM (SELECT set_config('synchronous_commit', 'off', true)) AS unflushed
            ON CONFLICT (subject) DO UPDATE SET subject = k.subject
            RETURNING wrapped, master_key_id
            """, prepared: true
        ).single()
        guard let key = try unwrap(row, subject: subject) else { throw DataKeyError.forgotten(subject) }
        remember(subject, key)
        return key
    }

    /// The keys of those of `subjects` not forgotten.
    public func openingKeys(for subjects: Set<String>) async throws -> [String: SymmetricKey] {
        var (found, missing) = fromCache(subjects)
        if !missing.isEmpty {
            let rows = try await pool.query(
                "SELECT subject, wrapped, master_key_id FROM data_keys WHERE subject = ANY(\(Array(missing)))",
                prepared: true)
            try load(rows, into: &found)
        }
        return found
    }

    /// `openingKeys(for:)` on a session of the caller's (a rebuild's transaction).
    public func openingKeys(for subjects: Set<String>, in session: inout PostgresSession) throws -> [String: SymmetricKey] {
        var (found, missing) = fromCache(subjects)
        if !missing.isEmpty {
            let rows = try session.query(
                "SELECT subject, wrapped, master_key_id FROM data_keys WHERE subject = ANY(\(Array(missing)))",
                prepared: true)
            try load(rows, into: &found)
        }
        return found
    }

    /// Destroys `subject`'s key in the caller's transaction, leaving a tombstone so that none
    /// is made again. `forgotLocally` after it commits.
    public static func forget(_ subject: String, in session: inout PostgresSession) throws {
        try session.query(
            """
            INSERT INTO data_keys AS k (subject, wrapped, master_key_id, forgotten_at) VALUES (\(subject), NULL, NULL, now())
            ON CONFLICT (subject) DO UPDATE SET wrapped = NULL, master_key_id = NULL, forgotten_at = coalesce(k.forgotten_at, now())
            """)
    }

    public func forgotLocally(_ subject: String) {
        cache.withLock { $0[subject] = Cached(key: nil, at: .now) }
    }

    /// Rewraps every key under the current master key, in one transaction; returns how many.
    /// `onlyStale`: those wrapped by another (made by a server that had not yet seen a
    /// rotation); `lender serve` does this at start.
    public func rewrapAll(onlyStale: Bool = false) async throws -> Int {
        try reloadIfRotated()
        let masters = masters.withLock { $0 }
        // All of them: no master key has an empty id.
        let stale = onlyStale ? masters.currentID : ""
        return try await pool.withConnection { connection in
            try await connection.withBlockingSession { session in
                try session.withTransaction { session in
                    let rows = try session.query(
                        """
                        SELECT subject, wrapped, master_key_id FROM data_keys
                        WHERE wrapped IS NOT NULL AND master_key_id <> \(stale) FOR UPDATE
                        """)
                    var subjects = [String]()
                    var wrapped = [String]()
                    for row in rows {
                        let subject: String = try row.decode("subject")
                        let key = try masters.unwrap(
                            try row.decode("wrapped"), masterID: try row.decode("master_key_id"), subject: subject)
                        subjects.append(subject)
                        wrapped.append(try masters.wrap(key, subject: subject).base64EncodedString())
                    }
                    if !subjects.isEmpty {
                        try session.query(
                            """
                            UPDATE data_keys AS k SET wrapped = decode(r.wrapped, 'base64'), master_key_id = \(masters.currentID)
                            FROM unnest(\(subjects), \(wrapped)) AS r(subject, wrapped) WHERE k.subject = r.subject
                            """)
                    }
                    return subjects.count
                }
            }
        }
    }

    // MARK: Cache

    /// `.some(nil)`: known to be forgotten; nil: not cached (or too old).
    private func cached(_ subject: String) -> SymmetricKey?? {
        cache.withLock { cache in
            guard let entry = cache[subject], entry.at.duration(to: .now) < lifetime else { return nil }
            return .some(entry.key)
        }
    }

    private func fromCache(_ subjects: Set<String>) -> (found: [String: SymmetricKey], missing: Set<String>) {
        var found = [String: SymmetricKey]()
        var missing = Set<String>()
        for subject in subjects {
            switch cached(subject) {
            case .some(.some(let key)): found[subject] = key
            case .some(.none): break
            case .none: missing.insert(subject)
            }
        }
        return (found, missing)
    }

    private func load(_ rows: PostgresRows, into found: inout [String: SymmetricKey]) throws {
        for row in rows {
            let subject: String = try row.decode("subject")
            if let key = try unwrap(row, subject: subject) {
                found[subject] = key
                remember(subject, key)
            } else {
                forgotLocally(subject)
            }
        }
        // The rest have no key: nothing was ever sealed for them. Not cached: one may be made.
    }

    private func unwrap(_ row: PostgresRow, subject: String) throws -> SymmetricKey? {
        guard let wrapped = try row.decode("wrapped", as: Data?.self),
            let masterID = try row.decode("master_key_id", as: String?.self)
        else { return nil }
        do {
            return try masters.withLock { try $0.unwrap(wrapped, masterID: masterID, subject: subject) }
        } catch DataKeyError.unknownMasterKey where file != nil {
            // Rotated by another process since this one started: the file holds the new key.
            try reloadIfRotated()
            return try masters.withLock { try $0.unwrap(wrapped, masterID: masterID, subject: subject) }
        }
    }

    private func remember(_ subject: String, _ key: SymmetricKey) {
        cache.withLock { cache in
            if cache.count >= Self.maxCached { cache.removeAll(keepingCapacity: true) }
            cache[subject] = Cached(key: key, at: .now)
        }
    }
}
