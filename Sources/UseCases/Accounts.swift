import Crypto
import Aggregates
import EventStore
import Foundation
import Marketplace
import Payments
import Postgres
import Synchronization

/// A bearer token handed out at login. Only its SHA-256 is stored.
public struct Session: Codable, Sendable, Equatable {
    public var token: String
    public var expiresAt: Date
    public var userId: UserID
}

/// Registration, login, logout and token checks. Passwords are bcrypt-hashed through one
/// bounded queue (`PasswordHasher`), and kept in `credentials`, never in the log.
public struct Accounts: Sendable {
    public let pool: PostgresPool
    public let gateway: CommandGateway
    /// bcrypt at 12 in production; tests use the minimum, 4, because bcrypt is slow on purpose.
    public let passwords: PasswordHasher
    /// The sessions checked lately; shared by every copy of these accounts in the process.
    public let sessions: SessionCache
    public var sessionLifetime: TimeInterval = 30 * 24 * 3600
    /// Where a forgotten user's released card holds are voided (nil: left to
    /// `lender payments reconcile`, which voids what the log released).
    public var processor: (any PaymentProcessor)?

    private let decoy: DecoyHash

    public init(pool: PostgresPool, gateway: CommandGateway, bcryptCost: UInt8 = 12, sessions: SessionCache = SessionCache()) {
        self.init(pool: pool, gateway: gateway, passwords: PasswordHasher(cost: bcryptCost), sessions: sessions)
    }

    public init(pool: PostgresPool, gateway: CommandGateway, passwords: PasswordHasher, sessions: SessionCache = SessionCache()) {
        self.pool = pool
        self.gateway = gateway
        self.passwords = passwords
        self.sessions = sessions
        self.decoy = DecoyHash(passwords)
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
        // The domain's rules first, and a taken handle, so that neither costs a hash. (The
        // unique handle below still settles two registrations racing for one.)
        _ = try UserDecider.decide(command, UserDecider.initial)
        guard try await pool.query("SELECT 1 FROM credentials WHERE handle = \(handle)").isEmpty else {
            throw DomainError.handleTaken(handle)
        }
        let emailDigest = try await emailIndex().digest(email)
        guard try await pool.query("SELECT 1 FROM email_index WHERE digest = \(emailDigest)").isEmpty else {
            throw Self.emailTaken
        }

        let hash = try await passwords.hash(password)
        do {
            let handled = try await gateway.handle(command, on: .user, id: userID, actor: userID, metadata: metadata) {
                session in
                try session.query(
                    """
                    INSERT INTO credentials (user_id, handle, password_hash)
                    VALUES (\(userID.rawValue), \(handle), \(hash))
                    """)
                try session.query("INSERT INTO email_index (digest, user_id) VALUES (\(emailDigest), \(userID.rawValue))")
            }
            guard case .registered(let registered) = handled.events.first, let append = handled.append else {
                throw DomainError.userExists
            }
            return Registered(user: registered, position: append.lastPosition)
        } catch let error as PostgresError where error.isUniqueViolation && error.constraint == "credentials_handle_key" {
            throw DomainError.handleTaken(handle)
        } catch let error as PostgresError where error.isUniqueViolation && error.constraint == "email_index_pkey" {
            throw Self.emailTaken
        }
    }

    /// The store's data keys hold the index's key: a server always has them (`DATA_KEY_FILE`).
    public func emailIndex() throws -> EmailIndex {
        guard let keys = gateway.store.personalData?.keys else {
            throw DataKeyError.noMasterKey("the event store was built without personal data keys")
        }
        return EmailIndex(keys: keys)
    }

    static let emailTaken = DomainError(
        .conflict, "email_taken", "An account with this e-mail address exists already.",
        fields: [FieldError(field: "email", code: "email_taken", message: "an account has this address already")])

    /// Failed logins allowed within `loginWindow` seconds: for one handle from one address;
    /// from one address, whatever the handles; and for one handle from every address at all.
    /// A lock-out is aimed at a pair, so a stranger's five guesses do not lock the owner out
    /// from their own address; only a spread attack (from more than ten addresses) locks a
    /// handle for everyone, and it gets at most `maxFailuresPerHandle` guesses a window.
    public var maxFailuresPerPair = 5
    public var maxFailuresPerAddress = 20
    public var maxFailuresPerHandle = 50
    public var loginWindow = 15 * 60
    /// How long an attempt waits for the checks in flight on its handle or address before it
    /// is refused (429, `Retry-After: 1`): a crowd at one handle waits a bounded time.
    public var busyWait = Duration.seconds(5)

    /// Checks the password, after the rate limits. Each attempt takes its place under the
    /// limits *before* bcrypt runs, under locks on its handle and address; one that finds the
    /// limits full with checks in flight waits for them, and one that finds them full of
    /// failures is 429 with `Retry-After`. So a parallel burst of guesses gets no more checks
    /// than a sequence, and the right password is never refused for the checks beside it
    /// (migration 0030). A success takes its pair's failures back. The limits live in the
    /// database, so servers share them.
    public func login(handle: String, password: String, address: String = "unknown") async throws -> Session {
        try await attempt(handle: handle, address: address) { try await verifiedLogin(handle: handle, password: password) }
    }

    /// Checks a signed-in user's password again (closing the account asks for it), counted
    /// against the same limits as a login, so that a stolen token cannot guess it.
    public func confirmPassword(of user: UserID, password: String, address: String = "unknown") async throws {
        let rows = try await pool.query("SELECT handle FROM credentials WHERE user_id = \(user.rawValue)")
        guard let handle = try rows.first?.decode("handle", as: String.self) else { throw DomainError.invalidCredentials }
        do {
            try await attempt(handle: handle, address: address) {
                _ = try await verifiedHash(handle: handle, password: password)
            }
        } catch let error as DomainError where error.code == DomainError.invalidCredentials.code {
            // A close that won a race emptied the hash: the session is gone, not the password wrong.
            let hash = try await pool.query("SELECT password_hash FROM credentials WHERE user_id = \(user.rawValue)").first?
                .decode("password_hash", as: String.self)
            if hash?.isEmpty ?? true { throw DomainError(.unauthorized, "unauthenticated", "This account was closed.") }
            throw error
        }
    }

    /// Runs a password check under the rate limits (see `login`).
    private func attempt<Result>(handle: String, address: String, _ check: () async throws -> Result) async throws -> Result {
        // No such handle can exist: refused before anything is counted or hashed (a handle of
        // kilobytes would not even fit the failures' index).
        guard UserDecider.isValidHandle(handle) else {
            throw DomainError.invalidCredentials
        }
        let reservation = try await reserveLoginAttempt(handle: handle, address: address)
        do {
            let result = try await check()
            // The owner's success takes back the failures from their own address only: a
            // guesser elsewhere gets no fresh tries from it. Only failures settled before this
            // attempt began: guesses checked beside it, and those still in flight, stay (0038).
            try await pool.query(
                """
                DELETE FROM login_failures
                WHERE handle = \(handle) AND address = \(address)
                  AND (id = \(reservation)
                       OR (NOT checking AND coalesce(settled_at, at) < (SELECT at FROM login_failures WHERE id = \(reservation))))
                """)
            // An address the owner logs in from is theirs: failures elsewhere do not lock it (0032).
            try await pool.query(
                """
                INSERT INTO login_known_addresses (handle, address) VALUES (\(handle), \(address))
                ON CONFLICT (handle, address) DO UPDATE SET last_success = now()
                """)
            return result
        } catch let error as DomainError where error.code == DomainError.invalidCredentials.code {
            // A wrong password: its place becomes a failure.
            try await pool.query("UPDATE login_failures SET checking = false, settled_at = now() WHERE id = \(reservation)")
            throw error
        } catch {
            // Neither a success nor a wrong password (busy, the database failed): not a failure.
            _ = try? await pool.query("DELETE FROM login_failures WHERE id = \(reservation)")
            throw error
        }
    }

    /// The reserved attempt's row, counted as a failure until the password is checked.
    private func reserveLoginAttempt(handle: String, address: String) async throws -> Int64 {
        // `reserve_login_attempt` (migrations 0012, 0030) never waits for a lock: while another
        // attempt on the same handle or address is being counted, or the limits are full of
        // checks in flight, it answers `busy`, and this one tries again shortly, holding no
        // connection meanwhile.
        let clock = ContinuousClock()
        let deadline = clock.now + busyWait
        var pause = Duration.milliseconds(2)
        while true {
            let row = try await pool.query(
                """
                SELECT outcome, wait_seconds, reservation FROM reserve_login_attempt(
                    \(handle), \(address), \(loginWindow)::int, \(maxFailuresPerPair)::int, \(maxFailuresPerAddress)::int,
                    \(maxFailuresPerHandle)::int)
                """
            ).single()
            let outcome: String = try row.decode("outcome")
            let wait: Int = try row.decode("wait_seconds")
            switch outcome {
            case "reserved":
                return try row.decode("reservation", as: Int64.self)
            case "busy" where clock.now < deadline:
                // Growing, with jitter: a crowd at one handle polls a few times, not hundreds.
                try await Task.sleep(for: pause * Double.random(in: 0.5...1.5))
                pause = min(pause * 2, .milliseconds(500))
                continue
            default:
                let what =
                    switch outcome {
                    case "limited_pair": "for this handle from this address"
                    case "limited_address": "from this address"
                    case "limited_handle": "for this handle"
                    default: "at once for this handle"
                    }
                throw TryLater(
                    .tooManyAttempts, code: "too_many_attempts",
                    detail: "Too many failed logins \(what); try again in \(wait) s.", retryAfterSeconds: wait)
            }
        }
    }

    private func verifiedLogin(handle: String, password: String) async throws -> Session {
        let userID = try await verifiedHash(handle: handle, password: password)
        let token = Self.newToken()
        let expiresAt = Date().addingTimeInterval(sessionLifetime)
        try await pool.query(
            """
            INSERT INTO sessions (token_hash, user_id, expires_at)
            VALUES (\(Self.digest(token)), \(userID.rawValue), \(expiresAt))
            """)
        return Session(token: token, expiresAt: expiresAt, userId: userID)
    }

    /// The handle's user, when the password is theirs.
    private func verifiedHash(handle: String, password: String) async throws -> UserID {
        let rows = try await pool.query("SELECT user_id, password_hash FROM credentials WHERE handle = \(handle)")
        let row = rows.first
        // An unknown handle costs a bcrypt check too, so timing does not tell handles apart.
        // A forgotten account's hash is empty: checked against the decoy, never matching.
        let stored = try row?.decode("password_hash", as: String.self).nonEmpty
        let hash = if let stored { stored } else { try await decoy.value() }
        let matches = try await passwords.verify(password, hash: hash)
        guard matches, stored != nil, let row else {
            throw DomainError.invalidCredentials
        }
        return UserID(try row.decode("user_id", as: UUID.self))
    }

    /// The user a token belongs to, while it is neither expired nor revoked: from the cache
    /// of sessions checked lately, else from the database.
    public func authenticate(token: String) async throws -> UserID? {
        try await session(token: token)?.user
    }

    /// The live session a token names, with its user's suspension if any (a suspension, its
    /// change and its end each forget the user's cached sessions on every server).
    public func session(token: String) async throws -> LiveSession? {
        let digest = Self.digest(token)
        if let session = sessions.session(for: digest) { return session }
        let ticket = sessions.ticket()
        let rows = try await pool.query(
            """
            SELECT s.user_id, s.expires_at, v.user_id IS NOT NULL AS suspended, v.until
            FROM sessions s LEFT JOIN suspensions_view v ON v.user_id = s.user_id
            WHERE s.token_hash = \(digest) AND s.revoked_at IS NULL AND s.expires_at > now()
            """, prepared: true)
        guard let row = rows.first else { return nil }
        let session = LiveSession(
            user: UserID(try row.decode("user_id", as: UUID.self)),
            suspension: try row.decode("suspended", as: Bool.self) ? Suspension(until: try row.decode("until", as: Date?.self)) : nil)
        sessions.store(session, expiresAt: try row.decode("expires_at"), for: digest, ticket: ticket)
        return session
    }

    /// Revokes the session; returns whether there was a live one. This server forgets it at
    /// once; the others when the database announces it (migration 0014).
    public func logout(token: String) async throws -> Bool {
        let digest = Self.digest(token)
        defer { sessions.forget(digest) }
        return try await pool.query(
            """
            UPDATE sessions SET revoked_at = now()
            WHERE token_hash = \(digest) AND revoked_at IS NULL
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
    private let passwords: PasswordHasher
    private let cached = Mutex<String?>(nil)

    init(_ passwords: PasswordHasher) { self.passwords = passwords }

    func value() async throws -> String {
        if let hash = cached.withLock({ $0 }) { return hash }
        let hash = try await passwords.hash(UUID().uuidString)
        cached.withLock { $0 = $0 ?? hash }
        return hash
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
