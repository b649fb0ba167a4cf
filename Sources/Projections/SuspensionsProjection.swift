import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// `suspensions_view`: who is suspended now (SPEC §12.5), and until when. Stated once: the
/// appends and a rebuild run the same statements, one per event in log order (a suspension
/// and its end on one user are keyed alike; suspensions are few).
public struct SuspensionsProjection: InlineProjection {
    public let name = "suspensions"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        var plan = WritePlan()
        for event in events where Aggregate.user.owns(event.streamID) {
            guard event.type == UserSuspended.eventType || event.type == UserReinstated.eventType
                || event.type == UserForgotten.eventType,
                let user = Aggregate.user.id(of: event.streamID)?.rawValue
            else { continue }
            switch try Aggregate.user.codec.decode(event) {
            case .suspended(let suspended):
                plan.barrier([
                    """
                    INSERT INTO suspensions_view (user_id, operator_id, reason, until, suspended_at, position)
                    VALUES (\(user), \(suspended.operatorID.rawValue), \(suspended.reason), \(suspended.until),
                            \(event.recordedAt), \(event.position))
                    ON CONFLICT (user_id) DO UPDATE
                    SET operator_id = excluded.operator_id, reason = excluded.reason, until = excluded.until,
                        suspended_at = excluded.suspended_at, position = excluded.position
                    """
                ])
            case .reinstated, .forgotten:
                // A forgotten user's suspension goes with them (its reason may name them).
                plan.barrier(["DELETE FROM suspensions_view WHERE user_id = \(user)"])
            default:
                break
            }
        }
        try plan.run(&session)
    }
}
