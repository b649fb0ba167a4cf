import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// A row of `reports_view`: a report and how it was resolved. `table` is its one declaration.
struct ReportRow: Sendable {
    var id = ReportID.none
    var reporter = UserID.none
    var subjectType = ReportSubject.item
    var subjectID = UUID.none
    var reason = ReportReason.other
    var text: String?
    /// `open`, or `resolved` by an operator.
    var status = "open"
    var action: String?
    var resolution: String?
    var resolvedBy: UserID?
    var createdAt = Date(timeIntervalSince1970: 0)
    var resolvedAt: Date?
    /// The filing's log position (a list's order and cursor), and the last change's.
    var filedPosition: Int64 = 0
    var position: Int64 = 0

    static let table = ViewTable<ReportRow>(
        "reports_view", blank: ReportRow(),
        [
            ViewColumn("report_id", "uuid", \.id),
            ViewColumn("reporter_id", "uuid", \.reporter),
            ViewColumn("subject_type", \.subjectType),
            ViewColumn("subject_id", "uuid", \.subjectID),
            ViewColumn("reason", \.reason),
            ViewColumn("text", "text", \.text),
            ViewColumn("status", "text", \.status),
            ViewColumn("action", "text", \.action),
            ViewColumn("resolution", "text", \.resolution),
            ViewColumn("resolved_by", "uuid", \.resolvedBy),
            ViewColumn("created_at", "timestamp with time zone", \.createdAt),
            ViewColumn("resolved_at", "timestamp with time zone", \.resolvedAt),
            ViewColumn("filed_position", "bigint", \.filedPosition),
            ViewColumn("position", "bigint", \.position),
        ])

    /// The columns a resolution sets.
    static let resolve = table.update(
        table.indices("status", "action", "resolution", "resolved_by", "resolved_at", "position"), key: ["report_id"])
    static let insert = table.insert("insert reports") { "\($0)\nON CONFLICT (report_id) DO NOTHING" }
}

/// `reports_view`: each report (SPEC §12.5) as its stream tells it, filed then resolved; a
/// forgotten reporter's words removed. Stated once: the appends and a rebuild run the same
/// statements.
public struct ReportsProjection: InlineProjection {
    public let name = "reports"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        var plan = WritePlan()
        for event in events {
            if event.type == UserForgotten.eventType, case .forgotten(let forgotten) = try Aggregate.user.codec.decode(event) {
                plan.barrier([
                    """
                    UPDATE reports_view SET text = \(Redacted.text)
                    WHERE reporter_id = \(forgotten.userID.rawValue) AND text IS NOT NULL
                    """
                ])
                continue
            }
            guard Aggregate.report.owns(event.streamID), let report = Aggregate.report.id(of: event.streamID) else { continue }
            var row = ReportRow()
            (row.id, row.position) = (report, event.position)
            // In order, each after the last: one person's open report on a subject is unique
            // across reports (`reports_view_open_once`), which keys by report cannot see; a
            // filing after a resolution batched before it would break it. Reports are few.
            switch try Aggregate.report.codec.decode(event) {
            case .filed(let filed):
                (row.reporter, row.subjectType, row.subjectID, row.reason, row.text) =
                    (filed.reporterID, filed.subjectType, filed.subjectID, filed.reason, filed.text)
                (row.createdAt, row.filedPosition) = (event.recordedAt, event.position)
                plan.barrier([ReportRow.table.write(ReportRow.insert, [row])])
            case .resolved(let resolved):
                (row.status, row.action, row.resolution) = ("resolved", resolved.action.rawValue, resolved.reason)
                (row.resolvedBy, row.resolvedAt) = (resolved.operatorID, event.recordedAt)
                plan.barrier([ReportRow.table.write(ReportRow.resolve, [row])])
            }
        }
        try plan.run(&session)
    }
}
