import Crypto
import EventStore
import Foundation
import HummingbirdBcrypt
import Marketplace
import NIOPosix
import Postgres
import Synchronization

/// A bearer token handed out at login. Only its SHA-256 is stored.
public struct Session: Codable, Sendable, Equatable {
    public var token: String
    public var expiresAt: Date
    public var userId: UserID
}

/// Registration, login, logout and token checks. Passwords are bcrypt-hashed off the event
/// loops and off Swift's cooperative pool, and kept in `credentials`, never in the log.
public struct Accounts: Sendable {
    public let pool: PostgresPool
    public let gateway: CommandGateway
    /// 12 in production; tests use the minimum, 4, because bcrypt is slow on purpose.
    public var bcryptCost: UInt8
    public var sessionLifetime: TimeInterval = 30 * 24 * 3600

    private let decoy: DecoyHash

    public init(pool: PostgresPool, gateway: CommandGateway, bcryptCost: UInt8 = 12) {
        self.pool = pool
        self.gateway = gateway
        self.bcryptCost = bcryptCost
        self.decoy = DecoyHash(cost: bcryptCost)
    }

    public struct Registered: Sendable {
        public var user: UserRegistered
        public var position: Int64
    }

    /// Validates through the domain, hashes the password, then appends `UserRegistered` with
    /// the credentials row written in the same transaction: both or neither. The row's unique
    /// handle is the claim on the handle; a second claim fails the whole append.
    public func register(
        handle: String, displayName: String, email: String, password: String, country: String?,
        metadata: EventMetadata = EventMetadata()
    ) async throws -> Registered {
        let userID = UserID()
        let command = UserCommand.register(
            userID: userID, handle: handle, displayName: displayName, email: email, password: password, country: country)
        // The domain's rules first, so a bad password is never hashed.
        _ = try UserDecider.decide(command, UserDecider.initial)

        let cost = bcryptCost
        let hash = try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) }
        do {
            let handled = try await gateway.handle(command, on: .user, id: userID, actor: userID, metadata: metadata) {
                session in
                try session.query(
                    """
                    INSERT INTO credentials (user_id, handle, password_hash)
                    VALUES (\(userID.rawValue), \(handle), \(hash))
                    """)
            }
            guard case .registered(let registered) = handled.events.first, let append = handled.append else {
                throw DomainError(.conflict, "user_exists", "This user is already registered.")
            }
            return Registered(user: registered, position: append.lastPosition)
        } catch let error as PostgresError where error.isUniqueViolation && error.constraint == "credentials_handle_key" {
            throw DomainError(.conflict, "handle_taken", "The handle \(handle) is taken.")
        }
    }

    /// A new session for the right handle and password; the same error for every wrong pair.
    /// Failed logins that lock a handle, and a client address, for `loginWindow` seconds.
    public var maxFailuresPerHandle = 5
    public var maxFailuresPerAddress = 20
    public var loginWindow = 15 * 60

    /// Checks the password, after the rate limits: a handle or a client address with too many
    /// recent failures gets 429 with `Retry-After`, before any bcrypt work is spent. The limits
    /// live in the database, so several servers share them.
    public func login(handle: String, password: String, address: String = "unknown") async throws -> Session {
        try await checkLoginRate(handle: handle, address: address)
        do {
            let session = try await verifiedLogin(handle: handle, password: password)
            try await pool.query("DELETE FROM login_failures WHERE handle = \(handle)")
            return session
        } catch let error as DomainError where error.code == "invalid_credentials" {
            try await pool.query(
                """
                WITH expired AS (DELETE FROM login_failures WHERE at < now() - make_interval(secs => \(loginWindow)))
                INSERT INTO login_failures (handle, address) VALUES (\(handle), \(address))
                """)
            throw error
        }
    }

    private func checkLoginRate(handle: String, address: String) async throws {
        let row = try await pool.query(
            """
            WITH recent AS (SELECT handle, address, at FROM login_failures
                            WHERE at > now() - make_interval(secs => \(loginWindow))
                              AND (handle = \(handle) OR address = \(address)))
            SELECT (SELECT count(*) FROM recent WHERE handle = \(handle)) AS by_handle,
                   (SELECT count(*) FROM recent WHERE address = \(address)) AS by_address,
                   ceil(extract(epoch FROM (SELECT min(at) FROM recent) + make_interval(secs => \(loginWindow)) - now()))::int8 AS wait
            """
        ).single()
        let byHandle: Int = try row.decode("by_handle")
        let byAddress: Int = try row.decode("by_address")
        guard byHandle < maxFailuresPerHandle, byAddress < maxFailuresPerAddress else {
            let wait = max(1, try row.decode("wait", as: Int?.self) ?? loginWindow)
            let what = byHandle >= maxFailuresPerHandle ? "for this handle" : "from this address"
            throw Problem(
                .tooManyRequests, code: "too_many_attempts",
                detail: "Too many failed logins \(what); try again in \(wait) s.", headers: [.retryAfter: "\(wait)"])
        }
    }

    private func verifiedLogin(handle: String, password: String) async throws -> Session {
        let rows = try await pool.query("SELECT user_id, password_hash FROM credentials WHERE handle = \(handle)")
        let row = rows.first
        // An unknown handle costs a bcrypt check too, so timing does not tell handles apart.
        let stored = try row?.decode("password_hash", as: String.self)
        let hash = if let stored { stored } else { try await decoy.value() }
        let matches = try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash) }
        guard matches, let row else {
            throw DomainError(.unauthorized, "invalid_credentials", "The handle or the password is wrong.")
        }
        let userID = UserID(try row.decode("user_id", as: UUID.self))
        let token = Self.newToken()
        let expiresAt = Date().addingTimeInterval(sessionLifetime)
        try await pool.query(
            """
            INSERT INTO sessions (token_hash, user_id, expires_at)
            VALUES (\(Self.digest(token)), \(userID.rawValue), \(expiresAt))
            """)
        return Session(token: token, expiresAt: expiresAt, userId: userID)
    }

    /// The user a token belongs to, while it is neither expired nor revoked.
    public func authenticate(token: String) async throws -> UserID? {
        let rows = try await pool.query(
            """
            SELECT user_id FROM sessions
            WHERE token_hash = \(Self.digest(token)) AND revoked_at IS NULL AND expires_at > now()
            """, prepared: true)
        return try rows.first.map { UserID(try $0.decode("user_id", as: UUID.self)) }
    }

    /// Revokes the session; returns whether there was a live one.
    public func logout(token: String) async throws -> Bool {
        try await pool.query(
            """
            UPDATE sessions SET revoked_at = now()
            WHERE token_hash = \(Self.digest(token)) AND revoked_at IS NULL
            """
        ).affectedRows == 1
    }

    /// 256 random bits, base64url without padding.
    static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func digest(_ token: String) -> Data {
        Data(SHA256.hash(data: Data(token.utf8)))
    }
}

/// A valid bcrypt hash, at the accounts' cost, of nothing anyone types: checked for unknown
/// handles. Made once, on first need, on the thread pool (bcrypt blocks on purpose).
final class DecoyHash: Sendable {
    private let cost: UInt8
    private let cached = Mutex<String?>(nil)

    init(cost: UInt8) { self.cost = cost }

    func value() async throws -> String {
        if let hash = cached.withLock({ $0 }) { return hash }
        let cost = cost
        let hash = try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(UUID().uuidString, cost: cost) }
        cached.withLock { $0 = $0 ?? hash }
        return hash
    }
}
