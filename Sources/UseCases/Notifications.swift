import Crypto
import Foundation
import Mail
import Marketplace
import Postgres
import Projections

/// Whether notices of one kind go by e-mail and by push (SPEC §12.4).
public struct NoticeChannels: Codable, Hashable, Sendable {
    public var email: Bool
    public var push: Bool

    public init(email: Bool, push: Bool) {
        self.email = email
        self.push = push
    }
}

/// What a user chose for each kind of notice: the defaults, and the kinds they changed (rows
/// of `notification_settings`, deleted when they are forgotten).
public struct NotificationSettings: Sendable {
    /// Push for everything; mail for what needs an answer or changes a deal, not for every
    /// message, review or repayment's credit (the feed and push carry those).
    public static let defaults: [NoticeKind: NoticeChannels] = Dictionary(
        uniqueKeysWithValues: NoticeKind.allCases.map { kind in
            let quiet: Set<NoticeKind> = [.messageReceived, .reviewReceived, .balanceCredited]
            return (kind, NoticeChannels(email: !quiet.contains(kind), push: true))
        })

    /// A change to one kind: a channel left out stays as it is.
    public struct Change: Sendable, Hashable {
        public var email: Bool?
        public var push: Bool?

        public init(email: Bool? = nil, push: Bool? = nil) {
            self.email = email
            self.push = push
        }
    }

    let pool: PostgresPool

    public init(pool: PostgresPool) { self.pool = pool }

    /// Every kind's channels for `user`.
    public func of(_ user: UserID) async throws -> [NoticeKind: NoticeChannels] {
        try await pool.withConnection { try await Self.read([user.rawValue], on: $0)[user.rawValue] ?? Self.defaults }
    }

    /// Applies `changes` (each kind's channels named in it), then every kind's channels.
    public func change(_ user: UserID, _ changes: [NoticeKind: Change]) async throws -> [NoticeKind: NoticeChannels] {
        try await pool.withTransaction { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\("notification-settings:\(user)"), 0))")
            var settings = try await Self.read([user.rawValue], on: connection)[user.rawValue] ?? Self.defaults
            for (kind, change) in changes {
                var channels = settings[kind] ?? Self.defaults[kind]!
                if let email = change.email { channels.email = email }
                if let push = change.push { channels.push = push }
                settings[kind] = channels
                try await Self.store(user.rawValue, kind.rawValue, channels, on: connection)
            }
            return settings
        }
    }

    /// No more mail of `kind` (of any notice when nil): what an unsubscribe link does. Nothing
    /// for a user who is gone.
    public func unsubscribe(_ user: UserID, from kind: NoticeKind?) async throws {
        try await pool.withTransaction { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\("notification-settings:\(user)"), 0))")
            let here = try await connection.query(
                "SELECT 1 FROM users_view WHERE user_id = \(user.rawValue) AND forgotten_at IS NULL")
            guard !here.isEmpty else { return }
            let settings = try await Self.read([user.rawValue], on: connection)[user.rawValue] ?? Self.defaults
            for notice in kind.map({ [$0] }) ?? NoticeKind.allCases {
                var channels = settings[notice] ?? Self.defaults[notice]!
                channels.email = false
                try await Self.store(user.rawValue, notice.rawValue, channels, on: connection)
            }
        }
    }

    private static func store(_ user: UUID, _ kind: String, _ channels: NoticeChannels, on connection: PostgresConnection)
        async throws
    {
        try await connection.query(
            """
            INSERT INTO notification_settings (user_id, kind, email, push)
            VALUES (\(user), \(kind), \(channels.email), \(channels.push))
            ON CONFLICT (user_id, kind) DO UPDATE SET email = excluded.email, push = excluded.push
            """)
    }

    /// The settings of `users`, the defaults filled in.
    static func read(_ users: [UUID], on connection: PostgresConnection) async throws -> [UUID: [NoticeKind: NoticeChannels]] {
        let rows = try await connection.query(
            "SELECT user_id, kind, email, push FROM notification_settings WHERE user_id = ANY (\(users.map(\.lowercaseText))::uuid[])")
        var settings = [UUID: [NoticeKind: NoticeChannels]]()
        for user in users { settings[user] = defaults }
        for row in rows {
            guard let kind = NoticeKind(rawValue: try row.decode("kind")) else { continue }
            settings[try row.decode("user_id", as: UUID.self), default: defaults][kind] = NoticeChannels(
                email: try row.decode("email"), push: try row.decode("push"))
        }
        return settings
    }
}

/// A phone a user's pushes go to.
public struct Device: Sendable, Hashable {
    public enum Platform: String, Sendable, CaseIterable { case ios, android }

    public var token: String
    public var platform: Platform
    public var createdAt: Date
}

/// The devices of each user (SPEC §12.4): a token is one device's, so registering it again,
/// even by someone else, moves it (and drops what was waiting to be pushed to it).
public struct Devices: Sendable {
    /// The newest this many of a user's devices are kept: reinstalling an app makes a new token
    /// each time, and the old ones are not always removed.
    public static let perUser = 10
    /// APNs tokens are 64 hex digits, FCM's about 160 of letters, digits, `:`, `-` and `_`.
    public static let tokenLength = 8...512

    let pool: PostgresPool

    public init(pool: PostgresPool) { self.pool = pool }

    public static func validate(token: String) throws {
        let allowed = token.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || ":_-.".utf8.contains(byte)
        }
        guard tokenLength.contains(token.utf8.count), allowed else {
            throw DomainError.invalid([
                FieldError(field: "token", code: "invalid_token", message: "8 to 512 letters, digits, ':', '_', '-' or '.'")
            ])
        }
    }

    public func register(_ token: String, platform: Device.Platform, for user: UserID) async throws -> Device {
        try Self.validate(token: token)
        return try await pool.withTransaction { connection in
            // One registration of a user's at a time: a burst keeps the newest ten, not more.
            try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\("devices:\(user)"), 0))")
            // Pushes waiting for the token's last holder are not the new one's to see.
            try await connection.query(
                """
                DELETE FROM outbox WHERE channel = 'push' AND recipient = \(token) AND user_id <> \(user.rawValue)
                  AND sent_at IS NULL
                """)
            let row = try await connection.query(
                """
                INSERT INTO devices (token, user_id, platform) VALUES (\(token), \(user.rawValue), \(platform.rawValue))
                ON CONFLICT (token) DO UPDATE SET user_id = excluded.user_id, platform = excluded.platform, created_at = now()
                RETURNING created_at
                """
            ).single()
            try await connection.query(
                """
                DELETE FROM devices WHERE user_id = \(user.rawValue) AND token NOT IN (
                    SELECT token FROM devices WHERE user_id = \(user.rawValue) ORDER BY created_at DESC, token LIMIT \(Self.perUser))
                """)
            return Device(token: token, platform: platform, createdAt: try row.decode("created_at"))
        }
    }

    /// 404 `device_not_found` for a token that is not the user's.
    public func remove(_ token: String, of user: UserID) async throws {
        try await pool.withTransaction { connection in
            let removed = try await connection.query(
                "DELETE FROM devices WHERE token = \(token) AND user_id = \(user.rawValue)")
            guard removed.affectedRows == 1 else {
                throw DomainError(.notFound, "device_not_found", "No device of yours has this token.")
            }
            try await connection.query("DELETE FROM outbox WHERE channel = 'push' AND recipient = \(token) AND sent_at IS NULL")
        }
    }

    public func of(_ user: UserID) async throws -> [Device] {
        try await pool.query(
            "SELECT token, platform, created_at FROM devices WHERE user_id = \(user.rawValue) ORDER BY created_at, token"
        ).map { row in
            Device(
                token: try row.decode("token"), platform: Device.Platform(rawValue: try row.decode("platform")) ?? .ios,
                createdAt: try row.decode("created_at"))
        }
    }
}

/// Signed, login-free unsubscribe links (RFC 8058): a user's id and a notice kind (or every
/// kind), with an HMAC-SHA-256 of them under a key of the server's secret. They never expire:
/// a link in an old mail still works.
public struct UnsubscribeTokens: Sendable {
    let key: SymmetricKey

    public init(key: SymmetricKey) { self.key = key }

    /// `kind` nil: every notice's mail.
    public func token(for user: UserID, kind: NoticeKind?) -> String {
        let payload = Array(user.rawValue.lowercaseText.utf8) + Array((kind?.rawValue ?? "all").utf8)
        return Self.base64URL(payload) + "." + Self.base64URL(Array(mac(payload)))
    }

    /// The user and kind a token names; nil for one this server did not sign.
    public func open(_ token: String) -> (user: UserID, kind: NoticeKind?)? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, token.utf8.count <= 200, let payload = Self.bytes(parts[0]), let tag = Self.bytes(parts[1]),
            tag.count == 16, payload.count > 36
        else { return nil }
        // Compared in constant time: a forger learns nothing from how long a refusal takes.
        guard constantTimeEqual(mac(payload), tag) else { return nil }
        guard let user = UUID(uuidString: String(decoding: payload.prefix(36), as: UTF8.self)) else { return nil }
        let name = String(decoding: payload.dropFirst(36), as: UTF8.self)
        if name == "all" { return (UserID(user), nil) }
        guard let kind = NoticeKind(rawValue: name) else { return nil }
        return (UserID(user), kind)
    }

    private func mac(_ payload: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: payload, using: key)).prefix(16).map { $0 }
    }

    private func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func bytes(_ text: Substring) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64).map(Array.init)
    }
}
