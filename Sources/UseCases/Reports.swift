import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres
import Projections

/// Reports (SPEC §12.5): anyone signed in reports what they can see; operators resolve them.
/// A report is a stream of its own; its filing and its resolution are events whose actors
/// are the reporter and the operator.
public struct Reports: Sendable {
    let gateway: CommandGateway
    let view: ReportsView
    let operators: Operators
    var pool: PostgresPool { gateway.store.pool }

    public init(gateway: CommandGateway) {
        self.gateway = gateway
        self.view = ReportsView(gateway.store.pool)
        self.operators = Operators(gateway.store.pool)
    }

    /// Files a report: 404 `subject_not_found` for a subject that does not exist or that the
    /// reporter cannot see (a message of a conversation not theirs), 409 `already_reported`
    /// while their last report on it is open, 429 `too_many_reports` past `ReportDecider.perDay`.
    public func file(
        _ subject: ReportSubject, _ subjectID: UUID, reason: ReportReason, text: String?, by reporter: UserID, now: Date
    ) async throws -> ReportResource {
        guard try await exists(subject, subjectID, seenBy: reporter) else {
            throw DomainError(.notFound, "subject_not_found", "No such \(subject.rawValue) that you can see.")
        }
        if try await view.count(by: reporter, since: now.addingTimeInterval(-86_400)) >= ReportDecider.perDay {
            throw DomainError(.tooOften, "too_many_reports", "At most \(ReportDecider.perDay) reports a day.")
        }
        if try await view.isOpen(by: reporter, subject, subjectID) { throw Self.alreadyReported }
        let id = ReportID()
        do {
            _ = try await gateway.handle(
                .file(reportID: id, subjectType: subject, subjectID: subjectID, reason: reason, text: text), on: .report, id: id,
                actor: reporter)
        } catch let error as PostgresError where error.isUniqueViolation && error.constraint == "reports_view_open_once" {
            // Two at once: the view's index lets one open report a person a subject.
            throw Self.alreadyReported
        }
        guard let report = try await view.report(id) else { throw DomainError.reportNotFound }
        return report
    }

    /// Resolves a report, by an operator (403 `not_operator` for anyone else).
    public func resolve(_ id: ReportID, action: ReportAction, reason: String, by actor: UserID) async throws -> ReportResource {
        try await requireOperator(actor)
        _ = try await gateway.handle(.resolve(action: action, reason: reason), on: .report, id: id, actor: actor)
        guard let report = try await view.report(id) else { throw DomainError.reportNotFound }
        return report
    }

    public func requireOperator(_ user: UserID) async throws {
        guard try await operators.contains(user) else { throw DomainError.notOperator }
    }

    static let alreadyReported = DomainError(
        .conflict, "already_reported", "You have an open report on this already; an operator will look at it.")

    /// Whether the subject exists, and a message is one of the reporter's conversations.
    private func exists(_ subject: ReportSubject, _ id: UUID, seenBy reporter: UserID) async throws -> Bool {
        let query: PostgresQuery
        switch subject {
        case .item: query = "SELECT 1 FROM items_view WHERE item_id = \(id)"
        case .loan: query = "SELECT 1 FROM loans_view WHERE loan_id = \(id)"
        case .user: query = "SELECT 1 FROM users_view WHERE user_id = \(id)"
        case .review:
            // A held review is its author's alone to see.
            query = "SELECT 1 FROM reviews_view WHERE review_id = \(id) AND (published OR author_id = \(reporter.rawValue))"
        case .message:
            query = """
                SELECT 1 FROM messages_view
                WHERE message_id = \(id) AND (author_id = \(reporter.rawValue) OR recipient_id = \(reporter.rawValue))
                """
        }
        return try await !pool.query(query).isEmpty
    }
}
