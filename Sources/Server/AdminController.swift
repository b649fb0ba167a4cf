import Foundation
import Hummingbird
import Marketplace
import Projections
import UUIDs
import UseCases

/// What an operator reads of users and bookings (SPEC §12.6), for the JSON API and the desk
/// alike: one statement of each read.
struct AdminReads: Sendable {
    let view: AdminView
    let reports: ReportsView
    let accounts: Accounts

    /// `q`: a handle or its start, or an e-mail address (matched by its blind index).
    func users(matching q: String) async throws -> [AdminUserSummary] {
        let text = q.trimmingWhiteSpace()
        let digest = text.contains("@") ? try await accounts.emailIndex().digest(text) : nil
        return try await view.users(matching: text, emailDigest: digest)
    }

    func user(_ id: UserID) async throws -> AdminUser {
        guard let summary = try await view.summary(id) else { throw DomainError.userNotFound }
        async let postings = view.postings(of: id)
        async let bookings = view.bookings(status: nil, user: id, after: nil, limit: AdminView.sectionLength)
        async let history = BalanceHistory.entries(
            of: id, in: accounts.gateway.store, before: nil, limit: AdminView.sectionLength)
        async let filed = reports.reports(of: id, before: nil, limit: AdminView.sectionLength)
        async let about = view.reports(about: id)
        async let sanctions = AdminView.sanctions(of: id, in: accounts.gateway.store)
        return AdminUser(
            user: summary, postings: try await postings, bookings: try await bookings.rows,
            balanceHistory: try await history.entries, reportsFiled: try await filed.rows, reportsAbout: try await about,
            sanctions: try await sanctions)
    }

    static let bookingStatuses = ["confirmed", "completed", "cancelled", "disputed"]
}

/// `GET /v1/admin/users?q=`, `GET /v1/admin/users/{id}`, `GET /v1/admin/bookings?status=&userId=`
/// and `POST /v1/admin/users/{id}/verify-identity {reason}`: operators only (the router's
/// `OperatorsOnly`).
struct AdminController: Sendable {
    let reads: AdminReads
    let moderation: Moderation

    @Sendable func users(_ request: Request, context: UserContext) async throws -> Page<AdminUserSummary> {
        let q = request.uri.queryParameters["q"].map(String.init)?.trimmingWhiteSpace() ?? ""
        guard (1...254).contains(q.count) else {
            throw DomainError.invalid([FieldError(field: "q", code: "invalid_query", message: "a handle or an e-mail, 1 to 254 characters")])
        }
        return Page(data: try await reads.users(matching: q), nextCursor: nil)
    }

    @Sendable func user(_ request: Request, context: UserContext) async throws -> AdminUser {
        try await reads.user(UserID(try context.parameters.requireUUID("userID")))
    }

    @Sendable func bookings(_ request: Request, context: UserContext) async throws -> Page<BookingResource> {
        var problems = [FieldError]()
        let status = request.uri.queryParameters["status"].map(String.init)
        if let status, !AdminReads.bookingStatuses.contains(status) {
            problems.append(
                FieldError(field: "status", code: "invalid_status", message: "one of " + AdminReads.bookingStatuses.joined(separator: ", ")))
        }
        let userText = request.uri.queryParameters["userId"].map(String.init)
        let user = userText.flatMap { UUID(text: $0) }.map(UserID.init)
        if userText != nil, user == nil {
            problems.append(FieldError(field: "userId", code: "invalid_id", message: "a UUID"))
        }
        if !problems.isEmpty { throw DomainError.invalid(problems) }
        let limit = try request.pageLimit()
        let after = try Cursor(query: request.uri.queryParameters["cursor"].map(String.init))
        let (rows, next) = try await reads.view.bookings(status: status, user: user, after: after, limit: limit)
        return Page(data: rows, nextCursor: next)
    }

    /// 200 with the user as operators see them; verifying again changes nothing.
    @Sendable func verifyIdentity(_ request: Request, context: UserContext) async throws -> AdminUserSummary {
        let user = UserID(try context.parameters.requireUUID("userID"))
        let reason = try await SafetyController.reason(request, context)
        _ = try await moderation.verifyIdentity(user, reason: reason, by: context.user)
        guard let summary = try await reads.view.summary(user) else { throw DomainError.userNotFound }
        return summary
    }
}

extension AdminUserSummary: ResponseEncodable {}
extension AdminUser: ResponseEncodable {}
