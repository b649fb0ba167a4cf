import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// A row of `suspensions_view`: a user suspended now, by whom, why and until when. `table` is
/// its one declaration.
struct SuspensionRow: Sendable, Equatable {
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

/// `suspensions_view`: who is suspended now (SPEC §12.5), and until when. Stated once, as a
/// fold over its rows (`fold`): an append reads the suspensions of the users its batch
/// suspends, reinstates or forgets, folds, and writes back what changed (deleting what it
/// ended); a build holds every suspension, folds the same, and copies them at its end.
public struct SuspensionsProjection: ReadingProjection {
    public let name = "suspensions"
    public init() {}

    static let events: Set<String> = [UserSuspended.eventType, UserReinstated.eventType, UserForgotten.eventType]

    public func reads(_ events: [ProjectedEvent]) -> [PostgresQuery] {
        let users = Set(
            events.lazy.filter { Self.events.contains($0.type) }.compactMap { Aggregate.user.id(of: $0.streamID) })
        return users.isEmpty ? [] : [SuspensionRow.table.rows(where: "user_id", in: users)]
    }

    public func apply(_ events: [ProjectedEvent], read: [PostgresRows], _ session: inout PostgresSession) throws {
        var before: [UserID: SuspensionRow] = [:]
        for row in try read.flatMap({ try $0.map(SuspensionRow.table.decode) }) { before[row.user] = row }
        var rows = before
        for event in events where Self.events.contains(event.type) { try Self.fold(event, &rows) }
        try SuspensionRow.table.delete(before.values.filter { rows[$0.user] == nil }, key: "user_id", session: &session)
        try SuspensionRow.table.writeBack(
            rows.values, before: before, key: \.user, keyColumns: "user_id", insert: SuspensionRow.upsert, &session)
    }

    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: [UserID: SuspensionRow]()) { rows in
            for event in events where Self.events.contains(event.type) { try Self.fold(event, &rows) }
        }
    }

    /// Who the log left suspended.
    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        let copy = memory.with(name, initial: [UserID: SuspensionRow]()) { rows in
            defer { rows = [:] }
            return SuspensionRow.table.copy(rows.values.sorted { $0.position < $1.position })
        }
        try session.copy(copy)
    }

    /// `event` made to the suspensions: the projection's one statement of what each event does.
    static func fold(_ event: ProjectedEvent, _ rows: inout [UserID: SuspensionRow]) throws {
        guard let user = Aggregate.user.id(of: event.streamID) else { return }
        switch try Aggregate.user.codec.decode(event) {
        case .suspended(let suspended):
            // A later suspension in the place of one still running.
            rows[user] = SuspensionRow(
                user: user, operatorID: suspended.operatorID, reason: suspended.reason, until: suspended.until,
                suspendedAt: event.recordedAt, position: event.position)
        case .reinstated, .forgotten:
            // A forgotten user's suspension goes with them (its reason may name them).
            rows[user] = nil
        default:
            break
        }
    }
}
