import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// A row of `reports_view`: a report and how it was resolved. `table` is its one declaration.
struct ReportRow: Sendable, Equatable {
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

    static let insert = table.insert("insert reports") { "\($0)\nON CONFLICT (report_id) DO NOTHING" }
}

/// `reports_view`: each report (SPEC §12.5) as its stream tells it, filed then resolved; a
/// forgotten reporter's words removed. Stated once, as a fold over its rows
/// (`Reports.fold`): an append reads the reports its batch resolves and a forgotten
/// reporter's, folds, and writes back what changed; a build holds every report, folds the
/// same, and copies them at its end.
///
/// One person's open report on a subject is unique across reports (`reports_view_open_once`):
/// the fold refuses a filing while one is open as the index would (a batch that resolves
/// the first after the second's filing must not let it in, or the log would hold two open at
/// once), so an append reads its filers' reports too. Its write-back updates before it
/// inserts, so a report resolved is written before another on its subject is filed.
public struct ReportsProjection: ReadingProjection {
    public let name = "reports"
    public init() {}

    public func reads(_ events: [ProjectedEvent]) -> [PostgresQuery] {
        var resolved = Set<ReportID>(), reporters = Set<UserID>()
        for event in events {
            if event.type == UserForgotten.eventType, Aggregate.user.owns(event.streamID),
                case .forgotten(let forgotten) = try? Aggregate.user.codec.decode(event)
            {
                reporters.insert(forgotten.userID)
            } else if event.type == ReportResolved.eventType, let report = Aggregate.report.id(of: event.streamID) {
                resolved.insert(report)
            } else if event.type == ReportFiled.eventType, Aggregate.report.owns(event.streamID),
                case .filed(let filed) = try? Aggregate.report.codec.decode(event)
            {
                reporters.insert(filed.reporterID)
            }
        }
        return (resolved.isEmpty ? [] : [ReportRow.table.rows(where: "report_id", in: resolved)])
            + (reporters.isEmpty ? [] : [ReportRow.table.rows(where: "reporter_id", in: reporters)])
    }

    public func apply(_ events: [ProjectedEvent], read: [PostgresRows], _ session: inout PostgresSession) throws {
        var before: [ReportID: ReportRow] = [:]
        for row in try read.flatMap({ try $0.map(ReportRow.table.decode) }) { before[row.id] = row }
        var reports = Reports()
        for row in before.values { reports.hold(row) }
        for event in events { try reports.fold(event) }
        try ReportRow.table.writeBack(
            reports.rows.values, before: before, key: \.id, keyColumns: "report_id", insert: ReportRow.insert, &session)
    }

    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Reports()) { reports in
            for event in events { try reports.fold(event) }
        }
    }

    /// The reports as the log left them, in the order they were filed.
    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        let copy = memory.with(name, initial: Reports()) { reports in
            defer { reports = Reports() }
            return ReportRow.table.copy(reports.rows.values.sorted { $0.filedPosition < $1.filedPosition })
        }
        try session.copy(copy)
    }

    /// The reports the fold holds.
    struct Reports: Sendable {
        var rows: [ReportID: ReportRow] = [:]
        /// Each reporter's reports, for their forgetting; the open ones by what they are about.
        var byReporter: [UserID: [ReportID]] = [:]
        var open: [OpenKey: ReportID] = [:]

        struct OpenKey: Hashable {
            var reporter: UserID
            var subjectType: ReportSubject
            var subjectID: UUID
            init(_ row: ReportRow) { (reporter, subjectType, subjectID) = (row.reporter, row.subjectType, row.subjectID) }
        }

        /// A report read or filed.
        mutating func hold(_ row: ReportRow) {
            rows[row.id] = row
            byReporter[row.reporter, default: []].append(row.id)
            if row.status == "open" { open[OpenKey(row)] = row.id }
        }

        /// `event` made to the reports: the projection's one statement of what each event does.
        mutating func fold(_ event: ProjectedEvent) throws {
            if event.type == UserForgotten.eventType, Aggregate.user.owns(event.streamID) {
                guard case .forgotten(let forgotten) = try Aggregate.user.codec.decode(event) else { return }
                for id in byReporter[forgotten.userID] ?? [] where rows[id]?.text != nil { rows[id]?.text = Redacted.text }
                return
            }
            guard let report = Aggregate.report.id(of: event.streamID) else { return }
            switch try Aggregate.report.codec.decode(event) {
            case .filed(let filed):
                // The first filing of an id stays.
                guard rows[report] == nil else { return }
                let row = ReportRow(
                    id: report, reporter: filed.reporterID, subjectType: filed.subjectType, subjectID: filed.subjectID,
                    reason: filed.reason, text: filed.text, createdAt: event.recordedAt, filedPosition: event.position,
                    position: event.position)
                guard open[OpenKey(row)] == nil else {
                    throw PostgresError(
                        .server, message: "\(filed.reporterID) has an open report on this \(filed.subjectType.rawValue) already",
                        sqlState: SQLState.uniqueViolation, constraint: "reports_view_open_once", table: ReportRow.table.name)
                }
                hold(row)
            case .resolved(let resolved):
                guard var row = rows[report] else { return }
                if row.status == "open" { open[OpenKey(row)] = nil }
                (row.status, row.action, row.resolution) = ("resolved", resolved.action.rawValue, resolved.reason)
                (row.resolvedBy, row.resolvedAt, row.position) = (resolved.operatorID, event.recordedAt, event.position)
                rows[report] = row
            }
        }
    }
}
