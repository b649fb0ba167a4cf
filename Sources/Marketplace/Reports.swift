import Foundation

public enum ReportTag {}
public typealias ReportID = Identifier<ReportTag>

/// What a report is about (SPEC §12.5).
public enum ReportSubject: String, Codable, Hashable, Sendable, CaseIterable {
    case item, loan, user, review, message
}

/// Why a person reports it.
public enum ReportReason: String, Codable, Hashable, Sendable, CaseIterable {
    case scam, prohibited, offensive, spam
    case fakeReview = "fake_review"
    case other
}

/// What an operator did about a report: nothing, or which act (each act is its own command
/// on its subject's stream; the resolution says which was taken).
public enum ReportAction: String, Codable, Hashable, Sendable, CaseIterable {
    case none
    case takenDown = "taken_down"
    case hidden
    case suspended
    case warned
}

/// A person reports an item, a loan, a user, a review or a message. Its stream is its own
/// (`report-{id}`); the reporter's words are sealed with their key.
public struct ReportFiled: EventBody, Hashable {
    public static let eventType = "ReportFiled"
    public var reportID: ReportID
    public var reporterID: UserID
    public var subjectType: ReportSubject
    public var subjectID: UUID
    public var reason: ReportReason
    /// Personal: sealed with the reporter's key.
    public var text: String?

    public init(
        reportID: ReportID, reporterID: UserID, subjectType: ReportSubject, subjectID: UUID, reason: ReportReason, text: String?
    ) {
        self.reportID = reportID
        self.reporterID = reporterID
        self.subjectType = subjectType
        self.subjectID = subjectID
        self.reason = reason
        self.text = text
    }
}

/// An operator resolved a report: the action taken and why, in the operator's words. The
/// event's actor is the operator, and so is `operatorID`, for the views.
public struct ReportResolved: EventBody, Hashable {
    public static let eventType = "ReportResolved"
    public var operatorID: UserID
    public var action: ReportAction
    public var reason: String

    public init(operatorID: UserID, action: ReportAction, reason: String) {
        self.operatorID = operatorID
        self.action = action
        self.reason = reason
    }
}

public enum ReportEvent: Sendable, Hashable {
    case filed(ReportFiled)
    case resolved(ReportResolved)
}

public enum ReportCommand: Sendable, Hashable {
    /// The reporter is the actor. Whether the subject exists, and the reporter may see it, is
    /// the use case's to check (it reads other streams' views); the decider holds the report.
    case file(reportID: ReportID, subjectType: ReportSubject, subjectID: UUID, reason: ReportReason, text: String?)
    /// By an operator (the use case checks the role).
    case resolve(action: ReportAction, reason: String)
}

public struct ReportState: Sendable, Hashable {
    public var filed: ReportFiled?
    public var resolved: ReportResolved?
}

/// An operator's act needs a reason, kept with it (SPEC §12.5: 422 without one).
public enum OperatorReason {
    public static let length = 1...500

    public static func problems(_ reason: String?) -> [FieldError] {
        guard let reason, reason.trimmingWhiteSpace().isWithin(length) else {
            return [FieldError(field: "reason", code: "reason_required", message: "why, in 1 to 500 characters")]
        }
        return []
    }
}

public enum ReportDecider {
    public static let initial = ReportState()
    public static let maxTextLength = 2000
    /// Reports one person may file in a day (429 `too_many_reports` past it).
    public static let perDay = 20

    public static func decide(_ command: ReportCommand, _ state: ReportState, actor: UserID) throws -> [ReportEvent] {
        switch command {
        case .file(let reportID, let subjectType, let subjectID, let reason, let text):
            guard state.filed == nil else { throw DomainError(.conflict, "report_exists", "This report was filed already.") }
            var validation = Validation()
            if let text {
                validation.check(text.isWithin(0...maxTextLength), "text", "too_long", "at most \(maxTextLength) characters")
            }
            try validation.throwIfInvalid()
            let words = text.map { $0.trimmingWhiteSpace() }.flatMap { $0.isEmpty ? nil : $0 }
            return [
                .filed(
                    ReportFiled(
                        reportID: reportID, reporterID: actor, subjectType: subjectType, subjectID: subjectID, reason: reason,
                        text: words))
            ]
        case .resolve(let action, let reason):
            guard state.filed != nil else { throw DomainError.reportNotFound }
            let problems = OperatorReason.problems(reason)
            if !problems.isEmpty { throw DomainError.invalid(problems) }
            guard state.resolved == nil else {
                throw DomainError(.conflict, "report_resolved", "This report is resolved already.")
            }
            return [.resolved(ReportResolved(operatorID: actor, action: action, reason: reason.trimmingWhiteSpace()))]
        }
    }

    public static func evolve(_ state: ReportState, _ event: ReportEvent) -> ReportState {
        var state = state
        switch event {
        case .filed(let filed): state.filed = filed
        case .resolved(let resolved): state.resolved = resolved
        }
        return state
    }
}

extension DomainError {
    public static let reportNotFound = DomainError(.notFound, "report_not_found", "No such report.")
    public static let notOperator = DomainError(.forbidden, "not_operator", "Only an operator may do this.")
}
