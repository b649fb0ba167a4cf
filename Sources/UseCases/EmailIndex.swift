import Crypto
import EventStore
import Foundation
import Postgres

/// One account an e-mail address, without keeping the address (issue 18): a keyed digest,
/// HMAC-SHA-256 of the lower-cased address with the data key named `blind-index`, which the
/// master key wraps like any other. Equal addresses meet; a leaked table names none.
public struct EmailIndex: Sendable {
    public let keys: DataKeys
    static let subject = "blind-index"

    public init(keys: DataKeys) { self.keys = keys }

    public func digest(_ email: String) async throws -> Data {
        let key = try await keys.sealingKey(for: Self.subject)
        return Data(HMAC<SHA256>.authenticationCode(for: Data(email.lowercased().utf8), using: key))
    }

    /// Moves the addresses `email_claims` (migration 0013) held in clear into the index; run
    /// at start, before registrations. Returns how many were moved.
    @discardableResult
    public func moveClaims(_ pool: PostgresPool) async throws -> Int {
        let rows = try await pool.query("SELECT email, user_id FROM email_claims")
        var moved = 0
        for row in rows {
            let email: String = try row.decode("email")
            let user: UUID = try row.decode("user_id")
            try await pool.query(
                """
                WITH claim AS (DELETE FROM email_claims WHERE email = \(email) RETURNING user_id)
                INSERT INTO email_index (digest, user_id) SELECT \(try await digest(email)), \(user) FROM claim
                ON CONFLICT (digest) DO NOTHING
                """)
            moved += 1
        }
        return moved
    }
}
