import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// `payouts_view`: each payout (SPEC §12.3) as its user's stream tells it: asked for, then
/// sent or failed. Stated once: the appends and a rebuild run the same statements.
public struct PayoutsProjection: InlineProjection {
    public let name = "payouts"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        var plan = WritePlan()
        for event in events where Aggregate.user.owns(event.streamID) {
            switch event.type {
            case PayoutRequested.eventType, PayoutSent.eventType, PayoutFailed.eventType: break
            default: continue
            }
            guard let user = Aggregate.user.id(of: event.streamID)?.rawValue else { continue }
            let at = event.recordedAt
            switch try Aggregate.user.codec.decode(event) {
            case .payoutRequested(let requested):
                plan.add(
                    [
                        """
                        INSERT INTO payouts_view (payout_id, user_id, amount_cents, status, created_at, updated_at, position)
                        VALUES (\(requested.payoutID.rawValue), \(user), \(requested.amountCents), 'pending', \(at), \(at),
                                \(event.position))
                        ON CONFLICT (payout_id) DO NOTHING
                        """
                    ], writes: [WritePlan.Row(.user, user)])
            case .payoutSent(let sent):
                plan.add(
                    [
                        """
                        UPDATE payouts_view SET status = 'sent', transfer_id = \(sent.transferID), updated_at = \(at)
                        WHERE payout_id = \(sent.payoutID.rawValue)
                        """
                    ], writes: [WritePlan.Row(.user, user)])
            case .payoutFailed(let failed):
                plan.add(
                    [
                        """
                        UPDATE payouts_view SET status = 'failed', reason = \(failed.reason), updated_at = \(at)
                        WHERE payout_id = \(failed.payoutID.rawValue)
                        """
                    ], writes: [WritePlan.Row(.user, user)])
            default:
                break
            }
        }
        try plan.run(&session)
    }
}
