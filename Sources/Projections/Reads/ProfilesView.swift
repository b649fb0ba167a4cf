import Aggregates
import Foundation
import Marketplace
import Postgres

/// Reads of `users_view` and `cards_view` (`UsersProjection`), with what a user posted, bid
/// and lent from the other views: the private profile and the public one.
public struct ProfilesView: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    /// The public profile; `user_not_found` when there is none.
    public func publicProfile(_ id: UserID) async throws -> PublicProfile {
        let rows = try await pool.query(
            """
            SELECT CASE WHEN forgotten_at IS NULL THEN handle ELSE \(Redacted.name) END AS handle, display_name, country,
                   member_since, completed_deals, review_count, review_stars, photo,
                   (SELECT count(*) FROM items_view WHERE owner_id = u.user_id) AS post_count,
                   (SELECT count(*) FROM bookings_view
                    WHERE owner_id = u.user_id AND status = 'cancelled' AND cancelled_by = u.user_id)::int AS owner_cancellations
            FROM users_view u WHERE user_id = \(id.rawValue)
            """)
        guard let row = rows.first else { throw DomainError.userNotFound }
        return PublicProfile(
            id: id, handle: try row.decode("handle"), displayName: try row.decode("display_name"),
            country: try row.decode("country", as: String?.self), memberSince: try row.decode("member_since"),
            postCount: try row.decode("post_count"), completedDeals: try row.decode("completed_deals"),
            rating: Rating.mean(stars: try row.decode("review_stars"), count: try row.decode("review_count")),
            reviewCount: try row.decode("review_count"),
            photos: try row.decode("photo", as: String?.self).map { [PhotoResource(digest: $0)] } ?? [],
            ownerCancellations: try row.decode("owner_cancellations"))
    }

    /// The private profile, from six views in one round trip and one snapshot, so that the
    /// balance and the loans it paid for agree: the first page of each list (`MyList`), with
    /// links to the rest. `blocked` is the user's own stream's to say.
    ///
    /// Planned once for any user, each list in its index's order: the best plan whoever asks.
    /// Left to choose, PostgreSQL planned them anew at every request (60–75 µs of its 330–450):
    /// a user outside a column's most common values is estimated at one row, so a custom plan
    /// looked cheaper than the generic one made for the average (costs 8.4 and 68.7 for the
    /// posts, `EXPLAIN`). And where most users' lists are short, the generic plan would sort
    /// what a bitmap scan finds: every row, for a user with a long list.
    public func privateProfile(_ user: UserID, blocked: Set<UserID>, position: Int64? = nil) async throws -> PrivateProfile {
        let first = MyList.profileLength
        let lists: [MyList] = [.posts, .bids, .bidsReceived, .loans, .approvalsGiven, .approvalsReceived]
        let answers = try await pool.snapshot(
            [
                """
                SELECT handle, display_name, email, country, member_since, default_share_cents, completed_deals, balance_cents,
                       held_cents, email_verified, review_count, review_stars, photo
                FROM users_view WHERE user_id = \(user.rawValue)
                """,
                "SELECT card_id, network, last4, exp_month, exp_year FROM cards_view WHERE user_id = \(user.rawValue) ORDER BY added_at",
            ] + lists.map { $0.statement(of: user, after: nil, limit: first) }, prepared: true, genericIndexPlans: true)
        guard let row = answers[0].first else { throw DomainError.userNotFound }
        let cards = try answers[1].map { try CardResource(row: $0) }
        let posts = try MyList.page(answers[2], limit: first, ItemResource.keyed)
        let bids = try MyList.page(answers[3], limit: first, BidResource.keyed)
        let received = try MyList.page(answers[4], limit: first, BidResource.keyed)
        let loans = try MyList.page(answers[5], limit: first, MyLoan.keyed)
        let given = try MyList.page(answers[6], limit: first, BidResource.keyed)
        let approved = try MyList.page(answers[7], limit: first, BidResource.keyed)
        return PrivateProfile(
            id: user, handle: try row.decode("handle"), displayName: try row.decode("display_name"),
            email: try row.decode("email"), country: try row.decode("country", as: String?.self),
            memberSince: try row.decode("member_since"), balanceCents: try row.decode("balance_cents"),
            availableCents: try row.decode("balance_cents", as: Int.self) - (try row.decode("held_cents", as: Int.self)),
            emailVerified: try row.decode("email_verified"),
            defaultShareCents: try row.decode("default_share_cents", as: Int?.self),
            completedDeals: try row.decode("completed_deals"),
            rating: Rating.mean(stars: try row.decode("review_stars"), count: try row.decode("review_count")),
            reviewCount: try row.decode("review_count"),
            photos: try row.decode("photo", as: String?.self).map { [PhotoResource(digest: $0)] } ?? [], cards: cards, posts: posts.data, bids: bids.data,
            bidsReceived: received.data, approvalsGiven: given.data, approvalsReceived: approved.data, loans: loans.data,
            blocked: blocked.sorted { $0.description < $1.description },
            links: ProfileLinks(
                posts: MyList.posts.link(after: posts), bids: MyList.bids.link(after: bids),
                bidsReceived: MyList.bidsReceived.link(after: received), loans: MyList.loans.link(after: loans),
                approvalsGiven: MyList.approvalsGiven.link(after: given),
                approvalsReceived: MyList.approvalsReceived.link(after: approved)),
            position: position)
    }
}

/// `GET /v1/users/{id}`.
public struct PublicProfile: Codable, Sendable {
    public var id: UserID
    public var handle: String
    public var displayName: String
    public var country: String?
    public var memberSince: Date
    public var postCount: Int
    public var completedDeals: Int
    /// The mean of the stars of the reviews about them, to one decimal; nil before the first.
    public var rating: Double?
    public var reviewCount: Int
    /// The profile photo, if there is one: a list, like an item's and a loan's.
    public var photos: [PhotoResource]
    /// Bookings they cancelled as the owner (SPEC §12.2): a renter's warning.
    public var ownerCancellations: Int
}

/// `GET /v1/me`, and the answer of every command on it (`PATCH /v1/me`, blocks): one resource.
public struct PrivateProfile: Codable, Sendable {
    public var id: UserID
    public var handle: String
    public var displayName: String
    public var email: String
    public var country: String?
    public var memberSince: Date
    /// Folded from the user's stream: deposits, credits and refunds, less checkouts paid from it.
    public var balanceCents: Int
    /// The balance less what is held for rental bids: what can be spent.
    public var availableCents: Int
    /// The address they registered with is proved theirs (SPEC §12.4).
    public var emailVerified: Bool
    public var defaultShareCents: Int?
    public var completedDeals: Int
    public var rating: Double?
    public var reviewCount: Int
    public var photos: [PhotoResource]
    public var cards: [CardResource]
    /// The newest 20 of each list; `links` says where the rest are.
    public var posts: [ItemResource]
    public var bids: [BidResource]
    public var bidsReceived: [BidResource]
    /// Bids on my items that I approved.
    public var approvalsGiven: [BidResource]
    /// My bids that owners approved.
    public var approvalsReceived: [BidResource]
    /// The loans I lent to: my shares, what was repaid to me, the loan's status.
    public var loans: [MyLoan]
    /// Whom I blocked: from my own stream.
    public var blocked: [UserID]
    /// The next page of each list above, when it holds more than its first 20.
    public var links: ProfileLinks
    /// The log position of the command that answered with it, if one did.
    public var position: Int64?
}

public struct MyLoan: Codable, Sendable {
    public var loanId: LoanID
    public var title: String
    public var amountCents: Int
    public var repaidCents: Int
    public var status: String
    /// The loan's country, first photo and borrower: what a row of "my loans" draws.
    public var country: String
    public var photo: PhotoResource?
    public var borrowerHandle: String
}

/// A card as clients see it: never more than the last four digits.
public struct CardResource: Codable, Sendable {
    public var id: CardID
    public var network: String
    public var last4: String
    public var expMonth: Int
    public var expYear: Int
    public var redacted: String
    public var position: Int64?

    public init(_ card: CardOnFile, position: Int64?) {
        self.id = card.cardID
        self.network = card.network.rawValue
        self.last4 = card.last4
        self.expMonth = card.expMonth
        self.expYear = card.expYear
        self.redacted = card.redacted
        self.position = position
    }

    init(row: PostgresRow) throws {
        id = CardID(try row.decode("card_id", as: UUID.self))
        network = try row.decode("network")
        last4 = try row.decode("last4")
        expMonth = try row.decode("exp_month")
        expYear = try row.decode("exp_year")
        redacted = CardRules.redacted(last4: last4)
    }
}

/// A loan the user borrowed, as their export lists it.
public struct BorrowedLoan: Codable, Sendable {
    public var loanId: LoanID
    public var title: String
    public var amountCents: Int
    public var fundedCents: Int
    public var repaidCents: Int
    public var status: String
    public var place: String
    public var createdAt: Date
}

extension ProfilesView {
    /// Every page of a list, for an export: the lists are the user's own, so bounded by
    /// what one person did.
    public func all<Element>(_ page: (Cursor?) async throws -> Page<Element>) async throws -> [Element] {
        var elements = [Element]()
        var cursor: Cursor?
        repeat {
            let next = try await page(cursor)
            elements += next.data
            cursor = try Cursor(query: next.nextCursor)
        } while cursor != nil
        return elements
    }

    public func borrowedLoans(of user: UserID) async throws -> [BorrowedLoan] {
        try await pool.query(
            """
            SELECT loan_id, title, amount_cents, funded_cents, repaid_cents, status, place, created_at
            FROM loans_view WHERE borrower_id = \(user.rawValue) ORDER BY created_at, loan_id
            """
        ).map { row in
            BorrowedLoan(
                loanId: LoanID(try row.decode("loan_id", as: UUID.self)), title: try row.decode("title"),
                amountCents: try row.decode("amount_cents"), fundedCents: try row.decode("funded_cents"),
                repaidCents: try row.decode("repaid_cents"), status: try row.decode("status"), place: try row.decode("place"),
                createdAt: try row.decode("created_at"))
        }
    }
}

/// A mean of stars as clients show it: one decimal, none without a review.
enum Rating {
    static func mean(stars: Int, count: Int) -> Double? {
        count == 0 ? nil : (Double(stars) / Double(count) * 10).rounded() / 10
    }
}

/// A stored photo: its digest, and where its bytes are served (`?size=200|800|full`).
public struct PhotoResource: Codable, Sendable, Hashable {
    public var digest: String
    public var url: String

    public init(digest: String) {
        self.digest = digest
        self.url = "/v1/media/\(digest)"
    }
}
