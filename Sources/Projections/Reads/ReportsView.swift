import Foundation
import Marketplace
import Postgres

/// A report as the API shows it: to its reporter, and to operators.
public struct ReportResource: Codable, Sendable, Hashable {
    public var id: ReportID
    public var reporterId: UserID
    public var subjectType: String
    public var subjectId: UUID
    public var reason: String
    public var text: String?
    /// `open`, or `resolved` by an operator.
    public var status: String
    /// What the operator did (`none`, `taken_down`, `hidden`, `suspended`, `warned`), and why.
    public var action: String?
    public var resolution: String?
    public var resolvedBy: UserID?
    public var createdAt: Date
    public var resolvedAt: Date?
    /// The log position of its filing: the list's cursor.
    public var position: Int64
}

extension ReportResource {
    /// What became of it, not which operator or their notes: a reporter's own view.
    public var asTheReporterSeesIt: ReportResource {
        var report = self
        report.resolvedBy = nil
        report.resolution = nil
        return report
    }
}

/// `reports_view`: a reporter's own reports, and the operators' list by status, newest first,
/// paged by the filing's position.
public struct ReportsView: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    static let columns: PostgresQuery = "SELECT \(unsafeRaw: ReportRow.table.selectList()) FROM reports_view"

    public func report(_ id: ReportID) async throws -> ReportResource? {
        var query = Self.columns
        query.append(" WHERE report_id = \(id.rawValue)")
        return try await pool.query(query).first.map(Self.resource)
    }

    public func reports(of reporter: UserID, before: Int64?, limit: Int) async throws -> (rows: [ReportResource], more: Bool) {
        var query = Self.columns
        query.append(" WHERE reporter_id = \(reporter.rawValue) AND filed_position < \(before ?? Int64.max)")
        return try await page(query, limit: limit)
    }

    public func reports(status: String, before: Int64?, limit: Int) async throws -> (rows: [ReportResource], more: Bool) {
        var query = Self.columns
        query.append(" WHERE status = \(status) AND filed_position < \(before ?? Int64.max)")
        return try await page(query, limit: limit)
    }

    /// Every report `reporter` filed, newest first: their export.
    public func everything(of reporter: UserID) async throws -> [ReportResource] {
        var query = Self.columns
        query.append(" WHERE reporter_id = \(reporter.rawValue) ORDER BY filed_position DESC")
        return try await pool.query(query).map(Self.resource)
    }

    /// Reports `reporter` filed since `since`: the day's limit.
    public func count(by reporter: UserID, since: Date) async throws -> Int {
        try await pool.query(
            "SELECT count(*)::int AS n FROM reports_view WHERE reporter_id = \(reporter.rawValue) AND created_at > \(since)"
        ).single().decode("n", as: Int.self)
    }

    /// Whether `reporter` has an open report on the subject.
    public func isOpen(by reporter: UserID, _ subject: ReportSubject, _ id: UUID) async throws -> Bool {
        try await !pool.query(
            """
            SELECT 1 FROM reports_view
            WHERE reporter_id = \(reporter.rawValue) AND subject_type = \(subject.rawValue) AND subject_id = \(id) AND status = 'open'
            """
        ).isEmpty
    }

    private func page(_ query: PostgresQuery, limit: Int) async throws -> (rows: [ReportResource], more: Bool) {
        var query = query
        query.append(" ORDER BY filed_position DESC LIMIT \(limit + 1)")
        let rows = try await pool.query(query).map(Self.resource)
        return (Array(rows.prefix(limit)), rows.count > limit)
    }

    static func resource(_ row: PostgresRow) throws -> ReportResource {
        let report = try ReportRow.table.decode(row)
        return ReportResource(
            id: report.id, reporterId: report.reporter, subjectType: report.subjectType.rawValue, subjectId: report.subjectID,
            reason: report.reason.rawValue, text: report.text, status: report.status, action: report.action,
            resolution: report.resolution, resolvedBy: report.resolvedBy, createdAt: report.createdAt, resolvedAt: report.resolvedAt,
            position: report.filedPosition)
    }
}

/// Who may act on reports, takedowns and suspensions: users granted it
/// (`lender users grant-operator`).
public struct Operators: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    public func contains(_ user: UserID) async throws -> Bool {
        try await !pool.query("SELECT 1 FROM operators WHERE user_id = \(user.rawValue)").isEmpty
    }
}
