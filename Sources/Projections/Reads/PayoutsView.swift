import Foundation
import Marketplace
import Postgres

/// A payout as the API shows it.
public struct PayoutResource: Codable, Sendable, Hashable {
    public var id: PayoutID
    public var amountCents: Int
    /// `pending` (on its way to the bank), `sent` or `failed` (the amount back in the balance).
    public var status: String
    public var createdAt: Date
    /// The log position of its request: the list's cursor (in lists only).
    public var position: Int64?

    public init(id: PayoutID, amountCents: Int, status: String, createdAt: Date, position: Int64?) {
        self.id = id
        self.amountCents = amountCents
        self.status = status
        self.createdAt = createdAt
        self.position = position
    }
}

/// `payouts_view`, for `GET /v1/me/payouts`: newest first, paged by position.
public struct PayoutsView: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    public func payouts(of user: UserID, before: Int64?, limit: Int) async throws -> (rows: [PayoutResource], more: Bool) {
        let rows = try await pool.query(
            """
            SELECT \(unsafeRaw: PayoutRow.table.selectList()) FROM payouts_view
            WHERE user_id = \(user.rawValue) AND position < \(before ?? Int64.max)
            ORDER BY position DESC LIMIT \(limit + 1)
            """
        ).map { row in
            let payout = try PayoutRow.table.decode(row)
            return PayoutResource(
                id: payout.id, amountCents: payout.amountCents, status: payout.status.rawValue, createdAt: payout.createdAt,
                position: payout.position)
        }
        return (Array(rows.prefix(limit)), rows.count > limit)
    }
}
