import Foundation
import HTTPTypes
import Hummingbird
import Marketplace
import Projections
import UUIDs
import UseCases

/// Trust and safety (SPEC §12.5): `POST /v1/reports`, `GET /v1/me/reports`, and the
/// operators' `GET /v1/admin/reports`, `POST /v1/admin/reports/{id}/resolve`,
/// `POST /v1/admin/items/{id}/takedown`.
struct SafetyController: Sendable {
    let reports: Reports
    let view: ReportsView
    let moderation: Moderation
    let items: ItemsView
    let loans: LoansView
    let bookings: BookingsView
    let conversations: ConversationsView
    let today: @Sendable () -> Day

    struct ReasonBody: Decodable {
        var reason: String?
    }

    struct FileBody: Decodable {
        var subjectType: String?
        var subjectId: String?
        var reason: String?
        var text: String?
    }

    struct ResolveBody: Decodable {
        var action: String?
        var reason: String?
    }

    struct ResolutionBody: Decodable {
        var renterCents: Int?
        var ownerCents: Int?
        var reason: String?
    }

    struct SuspendBody: Decodable {
        var reason: String?
        var until: String?
    }

    /// A user's standing after an operator's act: suspended (until when, why) or not.
    struct SuspensionResource: ResponseEncodable {
        var userId: UserID
        var suspended: Bool
        var until: Date?
        var reason: String?
        /// The log position of the act's event.
        var position: Int64
    }

    @Sendable func file(_ request: Request, context: UserContext) async throws -> EditedResponse<ReportResource> {
        let body = try await request.decodeBody(FileBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("subjectType", body.subjectType), ("subjectId", body.subjectId), ("reason", body.reason))
        let parsedSubject = Self.choice(body.subjectType, ReportSubject.self, "subjectType", &fields)
        let parsedReason = Self.choice(body.reason, ReportReason.self, "reason", &fields)
        let parsedSubjectID = body.subjectId.flatMap { text -> UUID? in
            guard let id = UUID(text: text) else {
                fields.problems.append(FieldError(field: "subjectId", code: "invalid_id", message: "a UUID"))
                return nil
            }
            return id
        }
        fields.longest(body.text, ReportDecider.maxTextLength, "text")
        let (subject, subjectID, reason) = try fields.checked(parsedSubject, parsedSubjectID, parsedReason)
        let report = try await reports.file(
            subject, subjectID, reason: reason, text: body.text, by: context.user, now: Date())
        return EditedResponse(status: .created, response: report)
    }

    @Sendable func mine(_ request: Request, context: UserContext) async throws -> Page<ReportResource> {
        let limit = try request.pageLimit()
        let (rows, more) = try await view.reports(of: context.user, before: try request.positionCursor(), limit: limit)
        return Page(data: rows.map(\.asTheReporterSeesIt), nextCursor: more ? rows.last.map { String($0.position) } : nil)
    }

    @Sendable func list(_ request: Request, context: UserContext) async throws -> Page<ReportResource> {
        let status = request.uri.queryParameters["status"].map(String.init) ?? "open"
        guard ["open", "resolved"].contains(status) else {
            throw DomainError.invalid([FieldError(field: "status", code: "invalid_status", message: "open or resolved")])
        }
        let limit = try request.pageLimit()
        let (rows, more) = try await view.reports(status: status, before: try request.positionCursor(), limit: limit)
        return Page(data: rows, nextCursor: more ? rows.last.map { String($0.position) } : nil)
    }

    @Sendable func resolve(_ request: Request, context: UserContext) async throws -> ReportResource {
        let id = ReportID(try context.parameters.requireUUID("reportID"))
        let body = try await request.decodeBody(ResolveBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("action", body.action))
        let parsedAction = Self.choice(body.action, ReportAction.self, "action", &fields)
        fields.problems += OperatorReason.problems(body.reason)
        let (action, reason) = try fields.checked(parsedAction, body.reason)
        return try await reports.resolve(id, action: action, reason: reason, by: context.user)
    }

    @Sendable func takeDown(_ request: Request, context: UserContext) async throws -> ItemResource {
        let item = ItemID(try context.parameters.requireUUID("itemID"))
        let append = try await moderation.takeDown(item, reason: try await Self.reason(request, context), by: context.user, today: today())
        return try await items.item(item, position: append?.lastPosition)
    }

    @Sendable func takeDownLoan(_ request: Request, context: UserContext) async throws -> LoanResource {
        let loan = LoanID(try context.parameters.requireUUID("loanID"))
        let append = try await moderation.takeDown(loan, reason: try await Self.reason(request, context), by: context.user)
        return try await loans.loan(loan, position: append?.lastPosition)
    }

    @Sendable func hideMessage(_ request: Request, context: UserContext) async throws -> MessageResource {
        let message = MessageID(try context.parameters.requireUUID("messageID"))
        _ = try await moderation.hideMessage(message, reason: try await Self.reason(request, context), by: context.user)
        guard let hidden = try await conversations.message(message) else { throw DomainError.messageNotFound }
        return hidden
    }

    /// `POST /v1/admin/reviews/{id}/hide`: 204, the review gone from every list.
    @Sendable func hideReview(_ request: Request, context: UserContext) async throws -> HTTPResponse.Status {
        let review = try context.parameters.requireUUID("reviewID")
        _ = try await moderation.hideReview(review, reason: try await Self.reason(request, context), by: context.user)
        return .noContent
    }

    /// `POST /v1/admin/users/{id}/suspend {reason, until?}`: `until` a time to come (422
    /// `invalid_until` otherwise); none suspends until reinstated.
    @Sendable func suspend(_ request: Request, context: UserContext) async throws -> SuspensionResource {
        let user = UserID(try context.parameters.requireUUID("userID"))
        let body = try await request.decodeBody(SuspendBody.self, context: context)
        var fields = FieldCheck()
        fields.problems += OperatorReason.problems(body.reason)
        let until = fields.timestamp(body.until, "until")
        let reason = try fields.checked(body.reason)
        let position = try await moderation.suspend(user, reason: reason, until: until, by: context.user, now: Date())
        return SuspensionResource(
            userId: user, suspended: true, until: until, reason: reason.trimmingWhiteSpace(), position: position)
    }

    /// `POST /v1/admin/users/{id}/reinstate {reason}`: 409 `not_suspended` for anyone else.
    @Sendable func reinstate(_ request: Request, context: UserContext) async throws -> SuspensionResource {
        let user = UserID(try context.parameters.requireUUID("userID"))
        let reason = try await Self.reason(request, context)
        let position = try await moderation.reinstate(user, reason: reason, by: context.user, now: Date())
        return SuspensionResource(userId: user, suspended: false, until: nil, reason: nil, position: position)
    }

    /// `POST /v1/admin/bookings/{id}/resolve {renterCents, ownerCents, reason}`: a dispute's
    /// or a claim's end, dividing exactly what the booking holds.
    @Sendable func resolveBooking(_ request: Request, context: UserContext) async throws -> BookingResource {
        let booking = BookingID(try context.parameters.requireUUID("bookingID"))
        let body = try await request.decodeBody(ResolutionBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("renterCents", body.renterCents), ("ownerCents", body.ownerCents))
        fields.problems += OperatorReason.problems(body.reason)
        let (renterCents, ownerCents, reason) = try fields.checked(body.renterCents, body.ownerCents, body.reason)
        let append = try await moderation.resolve(
            booking, renterCents: renterCents, ownerCents: ownerCents, reason: reason, by: context.user, today: today())
        return try await bookings.booking(booking, position: append?.lastPosition)
    }

    /// `POST /v1/admin/bookings/{id}/cancel {reason}`: as if by its owner, in the operator's name.
    @Sendable func cancelBooking(_ request: Request, context: UserContext) async throws -> BookingResource {
        let booking = BookingID(try context.parameters.requireUUID("bookingID"))
        let reason = try await Self.reason(request, context)
        let append = try await moderation.cancel(booking, reason: reason, by: context.user, today: today())
        return try await bookings.booking(booking, position: append?.lastPosition)
    }

    /// An operator act's `{reason}` body: 422 `reason_required` without one.
    static func reason(_ request: Request, _ context: UserContext) async throws -> String {
        let body = try await request.decodeBody(ReasonBody.self, context: context)
        var fields = FieldCheck()
        fields.problems += OperatorReason.problems(body.reason)
        return try fields.checked(body.reason)
    }

    /// One of an enumeration's raw values, or a problem naming them all.
    static func choice<Choice: RawRepresentable & CaseIterable>(
        _ text: String?, _ type: Choice.Type, _ field: String, _ fields: inout FieldCheck
    ) -> Choice? where Choice.RawValue == String {
        guard let text else { return nil }
        guard let value = Choice(rawValue: text) else {
            fields.problems.append(
                FieldError(
                    field: field, code: "invalid_\(field.snakeCased)",
                    message: "one of " + Choice.allCases.map(\.rawValue).joined(separator: ", ")))
            return nil
        }
        return value
    }
}

extension ReportResource: ResponseEncodable {}

/// The operators' routes (`/v1/admin/...`): 403 `not_operator` for anyone else, before the
/// request is read, so a stranger learns nothing from how a body or an id is refused. The
/// use cases check the role again, so the rule holds for any caller.
struct OperatorsOnly: RouterMiddleware {
    let operators: Operators

    func handle(_ request: Request, context: UserContext, next: (Request, UserContext) async throws -> Response) async throws
        -> Response
    {
        guard try await operators.contains(context.user) else { throw DomainError.notOperator }
        return try await next(request, context)
    }
}

extension String {
    /// `subjectType` as `subject_type`: a field's name in an error code.
    fileprivate var snakeCased: String {
        unicodeScalars.reduce(into: "") { text, scalar in
            if CharacterSet.uppercaseLetters.contains(scalar) { text += "_" + String(scalar).lowercased() } else { text.unicodeScalars.append(scalar) }
        }
    }
}
