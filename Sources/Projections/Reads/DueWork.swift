import Foundation
import Marketplace
import Postgres

/// What the jobs find due on a day, from the views: each item with something to do, and the
/// pending bids on it that have waited too long. The item's stream decides what is really
/// due; the views only say where to look (a view a moment behind finds it at the next run).
public struct DueWork: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    /// Items, oldest first, with their stale pending bids (placed at or before `staleBefore`):
    /// those with a pending bid whose first day has begun or that is stale, available ones past
    /// their window, those with a confirmed booking whose last day is before `today`, and those
    /// with a confirmed booking that starts tomorrow and was not reminded of, and those with a
    /// completed booking whose review window is over, and those with a deposit to give back.
    public func items(today: Day, staleBefore: Date) async throws -> [(item: ItemID, staleBids: Set<BidID>)] {
        let day = today.sql
        let rows = try await pool.query(
            """
            SELECT item_id, bid_id FROM bids_view
            WHERE status = 'pending' AND (from_day <= \(day)::date OR created_at <= \(staleBefore))
            UNION ALL
            SELECT item_id, NULL FROM items_view WHERE status = 'available' AND window_until < \(day)::date
            UNION ALL
            SELECT item_id, NULL FROM bookings_view WHERE status = 'confirmed' AND until_day < \(day)::date
            UNION ALL
            SELECT item_id, NULL FROM bookings_view
            WHERE status = 'confirmed' AND NOT reminded AND from_day = \(today.adding(days: 1).sql)::date
            UNION ALL
            SELECT item_id, NULL FROM bookings_view
            WHERE status = 'completed' AND NOT reviews_closed AND completed_on <= \(today.adding(days: -ItemDecider.reviewWindowDays).sql)::date
            UNION ALL
            SELECT item_id, NULL FROM bookings_view
            WHERE status = 'completed' AND deposit_status = 'held' AND claim_cents IS NULL AND dispute_status IS NULL
              AND until_day < \(today.adding(days: -claimWindowDays).sql)::date
            """)
        var order = [ItemID]()
        var stale = [ItemID: Set<BidID>]()
        for row in rows {
            let item = ItemID(try row.decode("item_id", as: UUID.self))
            if stale[item] == nil {
                order.append(item)
                stale[item] = []
            }
            if let bid = try row.decode("bid_id", as: UUID?.self) { stale[item]!.insert(BidID(bid)) }
        }
        // A bid listed for its first day is not stale for that; the decider checks the day itself.
        return order.map { ($0, stale[$0]!) }
    }
}
