import Aggregates
import Crypto
import EventStore
import Foundation
import Mail
import Marketplace
import Postgres

/// Password reset and change, and e-mail verification (SPEC §12.4). Tokens and codes are
/// kept as SHA-256 digests; what they unlock is mailed through the outbox, in the transaction
/// that stores them.
extension Accounts {
    /// How many reset mails one account is sent an hour: past it, the request is answered the
    /// same and nothing is mailed (a limit that showed would say the account exists).
    public static let resetMailsPerHour = 5
    public static let resetLifetime: TimeInterval = 3600
    public static let codeLifetime: TimeInterval = 30 * 60
    public static let maxWrongCodes = 5
    /// How many codes one user is mailed an hour: each is five guesses, and a mail in their box.
    public static let codeMailsPerHour = 5

    /// Mails a reset link to the account with this address, if there is one. Answers the same
    /// either way, having done the same work before answering (the address's digest and one
    /// lookup); the rest is done after.
    public func requestPasswordReset(email: String, mail: MailSettings) async throws {
        let digest = try await emailIndex().digest(email)
        guard let user = try await pool.query("SELECT user_id FROM email_index WHERE digest = \(digest)").first
            .map({ UserID(try $0.decode("user_id", as: UUID.self)) })
        else { return }
        let gateway = gateway
        let pool = pool
        Task {
            do {
                try await Self.mailReset(to: user, gateway: gateway, pool: pool, mail: mail)
            } catch {
                gateway.logger.error("a password reset was not mailed", metadata: ["error": "\(error)"])
            }
        }
    }

    static func mailReset(to user: UserID, gateway: CommandGateway, pool: PostgresPool, mail: MailSettings) async throws {
        let (state, _) = try await gateway.load(.user(user), .user)
        guard state.exists else { return }
        let token = newToken()
        try await pool.withTransaction { connection in
            guard try await Outbox.mailedThisHour("password_reset", to: user.rawValue, on: connection) < resetMailsPerHour
            else { return }
            try await connection.query(
                """
                INSERT INTO password_resets (token_digest, user_id, expires_at)
                VALUES (\(digest(token)), \(user.rawValue), now() + make_interval(secs => \(Int(resetLifetime))))
                """)
            let words = MailTemplates.bundled.render(
                "password_reset",
                ["handle": state.handle, "link": "\(mail.publicURL)/reset-password?token=\(token)", "token": token])
            try await Outbox.enqueue(
                Outbox.Row(
                    user: user.rawValue, recipient: state.email, kind: "password_reset", subject: words.subject,
                    text: words.text, html: words.html, unsubscribe: mail.unsubscribeURL(for: user, kind: nil)), on: connection)
        }
    }

    public static let tokenInvalid = DomainError(.gone, "token_invalid", "This reset link was used already, or never made.")
    public static let tokenExpired = DomainError(.gone, "token_expired", "This reset link is more than an hour old; ask for another.")

    /// Sets the password a reset token allows; revokes every session of the user (on every
    /// server: changed session rows are announced) and every other reset token.
    public func confirmPasswordReset(token: String, password: String) async throws {
        try Self.checkNewPassword(password, field: "password")
        guard
            let row = try await pool.query(
                """
                SELECT user_id, expires_at < now() AS expired FROM password_resets
                WHERE token_digest = \(Self.digest(token)) AND used_at IS NULL
                """
            ).first
        else { throw Self.tokenInvalid }
        guard !(try row.decode("expired", as: Bool.self)) else { throw Self.tokenExpired }
        let user = UserID(try row.decode("user_id", as: UUID.self))
        let hash = try await passwords.hash(password)
        let digest = Self.digest(token)
        _ = try await gateway.handle(.changePassword(byReset: true), on: .user, id: user, actor: user) { session in
            // The token is spent here, under the append's transaction: of two uses, the second
            // finds it spent, and its refusal rolls its append back.
            let spent = try session.query(
                "UPDATE password_resets SET used_at = now() WHERE token_digest = \(digest) AND used_at IS NULL AND expires_at > now()"
            ).affectedRows
            guard spent == 1 else { throw Self.tokenInvalid }
            try Self.setPassword(hash, of: user, keeping: nil, in: &session)
        }
    }

    /// A signed-in user's new password, given the current one (403 `wrong_password`); their
    /// other sessions are revoked, `keeping` (the request's) stays.
    public func changePassword(of user: UserID, current: String, new: String, keeping token: String, address: String) async throws {
        try Self.checkNewPassword(new, field: "newPassword")
        do {
            try await confirmPassword(of: user, password: current, address: address)
        } catch let error as DomainError where error.code == DomainError.invalidCredentials.code {
            throw DomainError(
                .forbidden, "wrong_password", "The current password is not this account's.",
                fields: [FieldError(field: "currentPassword", code: "wrong_password", message: "not this account's password")])
        }
        let hash = try await passwords.hash(new)
        let kept = Self.digest(token)
        _ = try await gateway.handle(.changePassword(byReset: false), on: .user, id: user, actor: user) { session in
            try Self.setPassword(hash, of: user, keeping: kept, in: &session)
        }
    }

    static func setPassword(_ hash: String, of user: UserID, keeping kept: Data?, in session: inout PostgresSession) throws {
        try session.query("UPDATE credentials SET password_hash = \(hash) WHERE user_id = \(user.rawValue)")
        try session.query(
            "UPDATE password_resets SET used_at = now() WHERE user_id = \(user.rawValue) AND used_at IS NULL")
        try session.query(
            """
            UPDATE sessions SET revoked_at = now()
            WHERE user_id = \(user.rawValue) AND revoked_at IS NULL AND (\(kept)::bytea IS NULL OR token_hash <> \(kept))
            """)
    }

    static func checkNewPassword(_ password: String, field: String) throws {
        let problems = UserDecider.givenRegistrationProblems(
            handle: nil, displayName: nil, email: nil, password: password, country: nil)
        guard problems.isEmpty else {
            throw DomainError.invalid(problems.map { FieldError(field: field, code: $0.code, message: $0.message) })
        }
    }

    /// Mails a 6-digit code to the user's address (one code at a time: a new one replaces it).
    public func requestEmailVerification(for user: UserID, mail: MailSettings) async throws {
        let (state, _) = try await gateway.load(.user(user), .user)
        guard state.exists else { throw DomainError.userNotFound }
        guard !state.emailVerified else { return }
        var generator = SystemRandomNumberGenerator()
        let code = String(format: "%06d", Int.random(in: 0..<1_000_000, using: &generator))
        try await pool.withTransaction { connection in
            guard try await Outbox.mailedThisHour("email_verification", to: user.rawValue, on: connection) < Self.codeMailsPerHour
            else {
                throw TryLater(
                    .tooManyAttempts, code: "too_many_codes",
                    detail: "At most \(Self.codeMailsPerHour) codes an hour; use the last one mailed.", retryAfterSeconds: 600)
            }
            try await connection.query(
                """
                INSERT INTO email_codes (user_id, code_digest, expires_at)
                VALUES (\(user.rawValue), \(Self.digest(code)), now() + make_interval(secs => \(Int(Self.codeLifetime))))
                ON CONFLICT (user_id) DO UPDATE
                SET code_digest = excluded.code_digest, created_at = now(), expires_at = excluded.expires_at, wrong_tries = 0
                """)
            let words = MailTemplates.bundled.render("email_verification", ["handle": state.handle, "code": code])
            try await Outbox.enqueue(
                Outbox.Row(
                    user: user.rawValue, recipient: state.email, kind: "email_verification", subject: words.subject,
                    text: words.text, html: words.html, unsubscribe: mail.unsubscribeURL(for: user, kind: nil)), on: connection)
        }
    }

    public static let wrongCode = DomainError(
        .invalid, "wrong_code", "That is not the code we sent.",
        fields: [FieldError(field: "code", code: "wrong_code", message: "not the code mailed")])
    public static let codeExpired = DomainError(.gone, "code_expired", "The code is more than 30 minutes old; ask for another.")

    /// The mailed code, given back: `EmailVerified`. Five wrong ones spend it (429).
    public func confirmEmailVerification(for user: UserID, code: String) async throws {
        let row = try await pool.query(
            """
            UPDATE email_codes SET wrong_tries = wrong_tries + CASE WHEN code_digest = \(Self.digest(code)) THEN 0 ELSE 1 END
            WHERE user_id = \(user.rawValue) AND wrong_tries < \(Self.maxWrongCodes)
            RETURNING code_digest = \(Self.digest(code)) AS right, expires_at < now() AS expired, wrong_tries
            """
        ).first
        guard let row else {
            let spent = try await pool.query("SELECT 1 FROM email_codes WHERE user_id = \(user.rawValue)").first != nil
            if spent {
                throw TryLater(
                    .tooManyAttempts, code: "too_many_wrong_codes",
                    detail: "Five wrong codes: ask for a new one.", retryAfterSeconds: 60)
            }
            throw Self.codeExpired
        }
        guard !(try row.decode("expired", as: Bool.self)) else { throw Self.codeExpired }
        guard try row.decode("right", as: Bool.self) else { throw Self.wrongCode }
        _ = try await gateway.handle(.verifyEmail, on: .user, id: user, actor: user) { session in
            try session.query("DELETE FROM email_codes WHERE user_id = \(user.rawValue)")
        }
    }
}
