import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

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
            guard Aggregate.report.owns(event.streamID),
                let report = Aggregate.report.id(of: event.streamID)?.rawValue
            else { continue }
            let at = event.recordedAt
            // In order, each after the last: one person's open report on a subject is unique
            // across reports (`reports_view_open_once`), which keys by report cannot see; a
            // filing after a resolution batched before it would break it. Reports are few.
            switch try Aggregate.report.codec.decode(event) {
            case .filed(let filed):
                plan.barrier(
                    [
                        """
                        INSERT INTO reports_view (report_id, reporter_id, subject_type, subject_id, reason, text, status,
                                                  created_at, filed_position, position)
                        VALUES (\(report), \(filed.reporterID.rawValue), \(filed.subjectType.rawValue), \(filed.subjectID),
                                \(filed.reason.rawValue), \(filed.text), 'open', \(at), \(event.position), \(event.position))
                        ON CONFLICT (report_id) DO NOTHING
                        """
                    ])
            case .resolved(let resolved):
                plan.barrier(
                    [
                        """
                        UPDATE reports_view SET status = 'resolved', action = \(resolved.action.rawValue),
                               resolution = \(resolved.reason), resolved_by = \(resolved.operatorID.rawValue), resolved_at = \(at),
                               position = \(event.position)
                        WHERE report_id = \(report)
                        """
                    ])
            }
        }
        try plan.run(&session)
    }
}
