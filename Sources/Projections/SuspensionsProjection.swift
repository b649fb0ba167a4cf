import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// A row of `suspensions_view`: a user suspended now, by whom, why and until when. `table` is
/// its one declaration.
struct SuspensionRow: Sendable {
    var user = UserID.none
    var operatorID = UserID.none
    var reason = ""
    /// Nil: until an operator reinstates them.
    var until: Date?
    var suspendedAt = Date(timeIntervalSince1970: 0)
    var position: Int64 = 0

    static let table = ViewTable<SuspensionRow>(
        "suspensions_view", blank: SuspensionRow(),
        [
            ViewColumn("user_id", "uuid", \.user),
            ViewColumn("operator_id", "uuid", \.operatorID),
            ViewColumn("reason", "text", \.reason),
            ViewColumn("until", "timestamp with time zone", \.until),
            ViewColumn("suspended_at", "timestamp with time zone", \.suspendedAt),
            ViewColumn("position", "bigint", \.position),
        ])

    /// A suspension, or a later one of the same user in its place.
    static let upsert = table.insert("suspend") { insert in
        "\(insert)\nON CONFLICT (user_id) DO UPDATE SET "
            + table.columns.dropFirst().map { "\($0.name) = excluded.\($0.name)" }.joined(separator: ", ")
    }
}

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
                let row = SuspensionRow(
                    user: UserID(user), operatorID: suspended.operatorID, reason: suspended.reason, until: suspended.until,
                    suspendedAt: event.recordedAt, position: event.position)
                plan.barrier([SuspensionRow.table.write(SuspensionRow.upsert, [row])])
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
