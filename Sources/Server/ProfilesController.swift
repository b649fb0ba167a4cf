import EventStore
import Foundation
import Hummingbird
import Marketplace
import Postgres

/// `GET /v1/me` (the private profile) and `GET /v1/users/{id}` (the public one), from the views.
struct ProfilesController<Context: AuthenticatedRequestContext>: Sendable {
    let pool: PostgresPool
    /// For the blocked users, which are the user's own stream's to say.
    let gateway: CommandGateway

    struct PublicProfile: ResponseEncodable {
        var id: UserID
        var handle: String
        var displayName: String
        var country: String?
        var memberSince: Date
        var postCount: Int
        var completedDeals: Int
    }

    func addRoutes(to router: Router<Context>, authentication: AuthenticationMiddleware<Context>) {
        router.group("/v1/me").add(middleware: authentication).get(use: me)
        router.group("/v1/users").add(middleware: authentication).get(":userID", use: user)
    }

    @Sendable func me(_ request: Request, context: Context) async throws -> PrivateProfile {
        let me = try context.requireIdentity()
        let (state, _) = try await gateway.load(StreamID("user", me), .user)
        return try await PrivateProfile.read(me, from: pool, blocked: state.blocked, position: nil)
    }

    @Sendable func user(_ request: Request, context: Context) async throws -> PublicProfile {
        let id = try context.parameters.requireUUID("userID")
        let rows = try await pool.query(
            """
            SELECT handle, display_name, country, member_since, completed_deals,
                   (SELECT count(*) FROM items_view WHERE owner_id = u.user_id) AS post_count
            FROM users_view u WHERE user_id = \(id)
            """)
        guard let row = rows.first else { throw Problem(DomainError(.notFound, "user_not_found", "No such user.")) }
        return PublicProfile(
            id: UserID(id), handle: try row.decode("handle"), displayName: try row.decode("display_name"),
            country: try row.decode("country", as: String?.self), memberSince: try row.decode("member_since"),
            postCount: try row.decode("post_count"), completedDeals: try row.decode("completed_deals"))
    }
}

/// `GET /v1/me`, and the answer of every command on it (`PATCH /v1/me`, blocks): one resource.
struct PrivateProfile: ResponseEncodable {
    var id: UserID
    var handle: String
    var displayName: String
    var email: String
    var country: String?
    var memberSince: Date
    /// Folded from the user's stream: deposits, credits and refunds, less checkouts paid from it.
    var balanceCents: Int
    var defaultShareCents: Int?
    var completedDeals: Int
    var cards: [CardResource]
    var posts: [ItemResource]
    var bids: [BidResource]
    var bidsReceived: [BidResource]
    /// Bids on my items that I approved.
    var approvalsGiven: [BidResource]
    /// My bids that owners approved.
    var approvalsReceived: [BidResource]
    /// The loans I lent to: my shares, what was repaid to me, the loan's status.
    var loans: [MyLoan]
    /// Whom I blocked: from my own stream.
    var blocked: [UserID]
    /// The log position of the command that answered with it, if one did.
    var position: Int64?
}

struct MyLoan: Codable {
    var loanId: LoanID
    var title: String
    var amountCents: Int
    var repaidCents: Int
    var status: String
}

extension PrivateProfile {
    /// The profile from the views, in one snapshot: the balance and the loans it paid for agree.
    static func read(_ user: UserID, from pool: PostgresPool, blocked: Set<UserID>, position: Int64?) async throws -> PrivateProfile {
        let me = user.rawValue
        // Six views, one round trip, one snapshot: the balance and the loans it paid for agree.
        let answers = try await pool.snapshot([
            """
            SELECT handle, display_name, email, country, member_since, default_share_cents, completed_deals, balance_cents
            FROM users_view WHERE user_id = \(me)
            """,
            """
            SELECT \(unsafeRaw: ItemResource.columns), NULL::float8 AS distance_km FROM items_view
            WHERE owner_id = \(me) ORDER BY created_at DESC, item_id DESC LIMIT 200
            """,
            "SELECT \(unsafeRaw: BidResource.columns) FROM bids_view WHERE bidder_id = \(me) ORDER BY created_at DESC LIMIT 200",
            """
            SELECT \(unsafeRaw: BidResource.columns) FROM bids_view
            WHERE item_id IN (SELECT item_id FROM items_view WHERE owner_id = \(me))
            ORDER BY created_at DESC LIMIT 200
            """,
            "SELECT card_id, network, last4, exp_month, exp_year FROM cards_view WHERE user_id = \(me) ORDER BY added_at",
            """
            SELECT s.loan_id, l.title, s.amount_cents, s.repaid_cents, l.status
            FROM loan_shares_view s JOIN loans_view l USING (loan_id)
            WHERE s.lender_id = \(me) ORDER BY s.first_bought_at DESC LIMIT 200
            """,
        ])
        guard let user = answers[0].first else { throw Problem(DomainError(.notFound, "user_not_found", "No such user.")) }
        let posts = try answers[1].map { try ItemResource($0, position: nil) }
        let bids = try answers[2].map { try BidResource($0, position: nil) }
        let received = try answers[3].map { try BidResource($0, position: nil) }
        let cards = try answers[4].map { try CardResource(row: $0) }
        let loans = try answers[5].map { row in
            MyLoan(
                loanId: LoanID(try row.decode("loan_id", as: UUID.self)), title: try row.decode("title"),
                amountCents: try row.decode("amount_cents"), repaidCents: try row.decode("repaid_cents"),
                status: try row.decode("status"))
        }
        return PrivateProfile(
            id: UserID(me), handle: try user.decode("handle"), displayName: try user.decode("display_name"),
            email: try user.decode("email"), country: try user.decode("country", as: String?.self),
            memberSince: try user.decode("member_since"), balanceCents: try user.decode("balance_cents"),
            defaultShareCents: try user.decode("default_share_cents", as: Int?.self),
            completedDeals: try user.decode("completed_deals"), cards: cards, posts: posts, bids: bids,
            bidsReceived: received, approvalsGiven: received.filter { $0.status == BidStatus.approved.rawValue },
            approvalsReceived: bids.filter { $0.status == BidStatus.approved.rawValue }, loans: loans,
            blocked: blocked.sorted { $0.description < $1.description }, position: position)
    }
}
