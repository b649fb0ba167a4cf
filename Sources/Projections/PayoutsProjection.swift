import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// A row of `payouts_view`: a payout and its fate. `table` is its one declaration.
struct PayoutRow: Sendable, Equatable {
    var id = PayoutID.none
    var user = UserID.none
    var amountCents = 0
    var status = PayoutStatus.pending
    var transferID: String?
    var reason: String?
    var createdAt = Date(timeIntervalSince1970: 0)
    var updatedAt = Date(timeIntervalSince1970: 0)
    /// Its request's: the list's order and cursor.
    var position: Int64 = 0

    static let table = ViewTable<PayoutRow>(
        "payouts_view", blank: PayoutRow(),
        [
            ViewColumn("payout_id", "uuid", \.id),
            ViewColumn("user_id", "uuid", \.user),
            ViewColumn("amount_cents", "bigint", \.amountCents),
            ViewColumn("status", \.status),
            ViewColumn("transfer_id", "text", \.transferID),
            ViewColumn("reason", "text", \.reason),
            ViewColumn("created_at", "timestamp with time zone", \.createdAt),
            ViewColumn("updated_at", "timestamp with time zone", \.updatedAt),
            ViewColumn("position", "bigint", \.position),
        ])
}

/// `payouts_view`: each payout (SPEC §12.3) as its user's stream tells it: asked for, then
/// sent or failed. Stated once, as a fold over its rows (`fold`): an append reads the
/// payouts its batch settles by key (in the append's round trip), folds, and writes back
/// what changed; a build from the first event holds every payout, folds the same, and
/// copies them at its end.
public struct PayoutsProjection: ReadingProjection {
    public let name = "payouts"
    public init() {}

    static let events: Set<String> = [PayoutRequested.eventType, PayoutSent.eventType, PayoutFailed.eventType]

    /// The payouts a batch sends or fails, by key.
    public func reads(_ events: [ProjectedEvent]) -> [PostgresQuery] {
        var settled = Set<PayoutID>()
        for event in events where Self.events.contains(event.type) && Aggregate.user.owns(event.streamID) {
            switch try? Aggregate.user.codec.decode(event) {
            case .payoutSent(let sent): settled.insert(sent.payoutID)
            case .payoutFailed(let failed): settled.insert(failed.payoutID)
            default: break
            }
        }
        return settled.isEmpty ? [] : [PayoutRow.table.rows(where: "payout_id", in: settled)]
    }

    public func apply(_ events: [ProjectedEvent], read: [PostgresRows], _ session: inout PostgresSession) throws {
        let before = Dictionary(uniqueKeysWithValues: try read.flatMap { try $0.map(PayoutRow.table.decode) }.map { ($0.id, $0) })
        var rows = before
        var made: [PayoutID] = []
        for event in events where Self.events.contains(event.type) && Aggregate.user.owns(event.streamID) {
            try Self.fold(event, &rows, &made)
        }
        try PayoutRow.table.writeBack(
            made.compactMap { rows[$0] } + before.keys.compactMap { rows[$0] }, before: before, key: \.id, keyColumns: "payout_id",
            insert: Self.insert, &session)
    }

    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: [PayoutID: PayoutRow]()) { rows in
            var made: [PayoutID] = []
            for event in events where Self.events.contains(event.type) && Aggregate.user.owns(event.streamID) {
                try Self.fold(event, &rows, &made)
            }
        }
    }

    /// The payouts as the log left them, in the order they were asked for.
    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        let payouts = memory.with(name, initial: [PayoutID: PayoutRow]()) { rows in
            defer { rows = [:] }
            return PayoutRow.table.copy(rows.values.sorted(by: { $0.position < $1.position }))
        }
        try session.copy(payouts)
    }

    /// `event` made to the payouts: the projection's one statement of what each event does.
    static func fold(_ event: ProjectedEvent, _ rows: inout [PayoutID: PayoutRow], _ made: inout [PayoutID]) throws {
        switch try Aggregate.user.codec.decode(event) {
        case .payoutRequested(let requested):
            // The first request of an id stays.
            guard rows[requested.payoutID] == nil, let user = Aggregate.user.id(of: event.streamID) else { return }
            rows[requested.payoutID] = PayoutRow(
                id: requested.payoutID, user: user, amountCents: requested.amountCents, createdAt: event.recordedAt,
                updatedAt: event.recordedAt, position: event.position)
            made.append(requested.payoutID)
        case .payoutSent(let sent):
            rows[sent.payoutID]?.status = .sent
            rows[sent.payoutID]?.transferID = sent.transferID
            rows[sent.payoutID]?.updatedAt = event.recordedAt
        case .payoutFailed(let failed):
            rows[failed.payoutID]?.status = .failed
            rows[failed.payoutID]?.reason = failed.reason
            rows[failed.payoutID]?.updatedAt = event.recordedAt
        default:
            break
        }
    }

    /// A payout the fold made (its insert keeps one written already, as the first request).
    static let insert = PayoutRow.table.insert("insert payouts") { "\($0)\nON CONFLICT (payout_id) DO NOTHING" }
}
