import Foundation
import EventStore
import Hummingbird
import Marketplace
import Projections
import UseCases

/// The signed-in user's profile and commands on it: `GET/PATCH /v1/me`, `POST /v1/me/blocks`,
/// `DELETE /v1/me/blocks/{userId}`; the lists the profile begins (`GET /v1/me/posts` …); and
/// `GET /v1/users/{id}`, the public profile.
struct ProfilesController: Sendable {
    let profiles: Profiles
    /// Answers after a command: from the primary, where the command's views committed with its events.
    let primary: ProfilesView
    /// Reads that may lag a moment behind (a replica), unless `X-Min-Position` says how far not.
    let reads: Replicated<ProfilesView>
    /// Reviews and messages, for the export.
    let conversations: ConversationsView
    /// Devices and notification settings, for the export.
    let notifications: NotificationsController
    /// Saved searches, for the export: what they look for is theirs too.
    let savedSearches: SavedSearches
    /// Reports they filed, for the export, as their own list shows them.
    let reports: ReportsView

    struct ProfileBody: Decodable {
        var displayName: String?
        var country: String?
        var defaultShareCents: Int?
    }

    struct BlockBody: Decodable {
        var userId: String?
    }

    @Sendable func me(_ request: Request, context: UserContext) async throws -> PrivateProfile {
        try await reads.on(context).privateProfile(context.user, blocked: try await profiles.blocked(by: context.user))
    }

    @Sendable func posts(_ request: Request, context: UserContext) async throws -> Page<ItemResource> {
        let page = try HistoryPage(request, statuses: false)
        return try await reads.on(context).posts(of: context.user, after: page.cursor, limit: page.limit)
    }

    @Sendable func bids(_ request: Request, context: UserContext) async throws -> Page<BidResource> {
        let page = try HistoryPage(request, statuses: true)
        return try await reads.on(context).bids(.bids, of: context.user, status: page.status, after: page.cursor, limit: page.limit)
    }

    @Sendable func bidsReceived(_ request: Request, context: UserContext) async throws -> Page<BidResource> {
        let page = try HistoryPage(request, statuses: true)
        return try await reads.on(context).bids(.bidsReceived, of: context.user, status: page.status, after: page.cursor, limit: page.limit)
    }

    @Sendable func loans(_ request: Request, context: UserContext) async throws -> Page<MyLoan> {
        let page = try HistoryPage(request, statuses: false)
        return try await reads.on(context).loans(of: context.user, after: page.cursor, limit: page.limit)
    }

    /// Everything held about the caller (SPEC §11.3): the profile with its cards and photo, every
    /// post, bid and loan, every movement of their money with its log position, and the reviews
    /// and messages they wrote or were the subject of.
    /// Everything of the user's, as a file to keep (`Content-Disposition: attachment`).
    @Sendable func export(_ request: Request, context: UserContext) async throws -> EditedResponse<PersonalExport> {
        let me = context.user
        let reads = primary
        let written = try await conversations.everything(of: me)
        let export = PersonalExport(
            exportedAt: Date(), profile: try await reads.privateProfile(me, blocked: try await profiles.blocked(by: me)),
            posts: try await reads.all { try await reads.posts(of: me, after: $0, limit: 100) },
            bids: try await reads.all { try await reads.bids(.bids, of: me, status: nil, after: $0, limit: 100) },
            loansLent: try await reads.all { try await reads.loans(of: me, after: $0, limit: 100) },
            loansBorrowed: try await reads.borrowedLoans(of: me), balanceHistory: try await profiles.balanceHistory(of: me),
            reviews: written.reviews, messages: written.messages,
            devices: try await notifications.devices.of(me).map(NotificationsController.DeviceResource.init),
            notificationSettings: NotificationsController.Settings(channels: try await notifications.settings.of(me)),
            savedSearches: try await savedSearches.list(me),
            reports: try await reports.everything(of: me).map(\.asTheReporterSeesIt))
        let day = Day(export.exportedAt).description
        return EditedResponse(
            headers: [.contentDisposition: "attachment; filename=\"lender-\(export.profile.handle)-\(day).json\""], response: export)
    }

    @Sendable func user(_ request: Request, context: UserContext) async throws -> PublicProfile {
        try await reads.on(context).publicProfile(UserID(try context.parameters.requireUUID("userID")))
    }

    @Sendable func updateProfile(_ request: Request, context: UserContext) async throws -> PrivateProfile {
        let body = try await request.decodeBody(ProfileBody.self, context: context)
        let command = UserCommand.updateProfile(
            displayName: body.displayName, country: body.country, defaultShareCents: body.defaultShareCents)
        return try await answer(try await profiles.handle(command, for: context.user), context)
    }

    @Sendable func block(_ request: Request, context: UserContext) async throws -> PrivateProfile {
        let body = try await request.decodeBody(BlockBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("userId", body.userId))
        try fields.throwIfAny()
        guard let other = body.userId.flatMap(UserID.init) else {
            throw DomainError.invalid([FieldError(field: "userId", code: "invalid_id", message: "a user id")])
        }
        return try await answer(try await profiles.block(other, by: context.user), context)
    }

    @Sendable func unblock(_ request: Request, context: UserContext) async throws -> PrivateProfile {
        let other = UserID(try context.parameters.requireUUID("userID"))
        return try await answer(try await profiles.handle(.unblock(other), for: context.user), context)
    }

    /// The profile as the command left it: the same resource as `GET /v1/me`.
    func answer(_ handled: (blocked: Set<UserID>, append: AppendResult?), _ context: UserContext) async throws -> PrivateProfile {
        try await primary.privateProfile(context.user, blocked: handled.blocked, position: handled.append?.lastPosition)
    }
}

/// `GET /v1/me/export`.
struct PersonalExport: ResponseEncodable {
    var exportedAt: Date
    var profile: PrivateProfile
    var posts: [ItemResource]
    var bids: [BidResource]
    var loansLent: [MyLoan]
    var loansBorrowed: [BorrowedLoan]
    var balanceHistory: [BalanceEntry]
    /// Reviews they wrote and reviews about them.
    var reviews: [ReviewResource]
    /// Messages they wrote or were sent, on bids.
    var messages: [MessageResource]
    /// The devices their pushes go to, and what they chose to hear of, and how.
    var devices: [NotificationsController.DeviceResource]
    var notificationSettings: NotificationsController.Settings
    var savedSearches: [SavedSearchResource]
    /// Reports they filed, with what became of them.
    var reports: [ReportResource]
}

/// A page of one of the user's own lists: `limit`, `cursor`, and for bids `status`; every bad
/// one named in a single 422.
struct HistoryPage {
    var limit = 20
    var cursor: Cursor?
    var status: BidStatus?

    init(_ request: Request, statuses: Bool) throws {
        var problems: [FieldError] = []
        do { limit = try request.pageLimit() } catch { problems.append(FieldError(field: "limit", code: "out_of_range", message: "a number from 1 to 100")) }
        do { cursor = try Cursor(query: request.uri.queryParameters["cursor"].map(String.init)) } catch {
            problems.append(FieldError(field: "cursor", code: "invalid_cursor", message: "not a cursor this server gave"))
        }
        if statuses, let text = request.uri.queryParameters["status"].map(String.init) {
            status = BidStatus(rawValue: text)
            if status == nil {
                problems.append(FieldError(field: "status", code: "invalid_status", message: "pending, approved, rejected or withdrawn"))
            }
        }
        if !problems.isEmpty { throw DomainError.invalid(problems) }
    }
}
