import Marketplace
import Postgres

/// Who may read the whole log: users an operator made auditors (`lender users grant-auditor`).
public struct Auditors: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    public func contains(_ user: UserID) async throws -> Bool {
        try await !pool.query("SELECT 1 FROM auditors WHERE user_id = \(user.rawValue)").isEmpty
    }
}
