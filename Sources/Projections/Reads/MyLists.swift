import Aggregates
import Foundation
import Marketplace
import Postgres

/// The lists a user's history grows: their posts, their bids, the bids on their items, the
/// loans they lent to. Newest first in keyset pages on an index that starts with the user
/// (migration 0015), so a page costs the same after 20 posts as after 20,000. `GET /v1/me`
/// shows the first page of each, with a link to the next.
public enum MyList: String, CaseIterable, Sendable {
    case posts, bids, bidsReceived, loans, approvalsGiven, approvalsReceived

    /// Where the rest of the list is read: the path of its route and its fixed query.
    var path: String {
        switch self {
        case .posts: "/v1/me/posts"
        case .bids: "/v1/me/bids"
        case .bidsReceived: "/v1/me/bids/received"
        case .loans: "/v1/me/loans"
        case .approvalsGiven: "/v1/me/bids/received?status=approved"
        case .approvalsReceived: "/v1/me/bids?status=approved"
        }
    }

    /// How many of each `GET /v1/me` shows.
    public static let profileLength = 20

    /// The statement of a page: one row more than `limit`, to tell whether there is another.
    func statement(of user: UserID, status: BidStatus? = nil, after cursor: Cursor?, limit: Int) -> PostgresQuery {
        let me = user.rawValue
        var statement: PostgresQuery
        // The keyset's columns, and the order newest first.
        let key: (columns: String, order: String)
        switch self {
        case .posts:
            statement = "SELECT \(unsafeRaw: ItemResource.columns), NULL::float8 AS distance_km FROM items_view WHERE owner_id = \(me)"
            key = ("created_at, item_id", "created_at DESC, item_id DESC")
        case .bids, .bidsReceived, .approvalsGiven, .approvalsReceived:
            let whose = self == .bids || self == .approvalsReceived ? "bidder_id" : "owner_id"
            statement = "SELECT \(unsafeRaw: BidResource.columns) FROM \(unsafeRaw: BidResource.source) WHERE \(unsafeRaw: whose) = \(me)"
            let status = self == .approvalsGiven || self == .approvalsReceived ? .approved : status
            if let status { statement.append(" AND status = \(status.rawValue)") }
            key = ("created_at, bid_id", "created_at DESC, bid_id DESC")
        case .loans:
            statement = """
                SELECT s.loan_id, l.title, s.amount_cents, s.repaid_cents, l.status, s.first_bought_at, l.country_code,
                       l.photos[1] AS photo,
                       CASE WHEN u.forgotten_at IS NULL THEN coalesce(u.handle, '') ELSE \(Redacted.name) END AS borrower_handle
                FROM loan_shares_view s JOIN loans_view l USING (loan_id) LEFT JOIN users_view u ON u.user_id = l.borrower_id
                WHERE s.lender_id = \(me)
                """
            key = ("s.first_bought_at, s.loan_id", "s.first_bought_at DESC, s.loan_id DESC")
        }
        if let cursor { statement.append(" AND (\(unsafeRaw: key.columns)) < (\(cursor.at), \(cursor.id))") }
        statement.append(" ORDER BY \(unsafeRaw: key.order) LIMIT \(literal: PageSize.rowsRead(limit))")
        return statement
    }

    /// The rows of `statement` as a page of resources, with the cursor after the last one
    /// kept, or nil when there were no more.
    static func page<Resource>(
        _ rows: PostgresRows, limit: Int, _ make: (PostgresRow) throws -> (Resource, at: Date, id: UUID)
    ) throws -> Page<Resource> {
        let kept = try rows.prefix(limit).map(make)
        guard rows.count > limit, let last = kept.last else { return Page(data: kept.map(\.0), nextCursor: nil) }
        return Page(data: kept.map(\.0), nextCursor: Cursor(at: last.at, id: last.id).encoded)
    }

    /// The link to the page after the first, when the first did not hold them all.
    func link(after page: Page<some Encodable & Sendable>) -> String? {
        page.nextCursor.map { path + (path.contains("?") ? "&" : "?") + "cursor=\($0)" }
    }
}

extension ItemResource {
    static func keyed(_ row: PostgresRow) throws -> (ItemResource, at: Date, id: UUID) {
        let item = try ItemResource(row, position: nil)
        return (item, item.createdAt, item.id.rawValue)
    }
}

extension BidResource {
    static func keyed(_ row: PostgresRow) throws -> (BidResource, at: Date, id: UUID) {
        let bid = try BidResource(row, position: nil)
        return (bid, bid.createdAt, bid.id.rawValue)
    }
}

extension MyLoan {
    static func keyed(_ row: PostgresRow) throws -> (MyLoan, at: Date, id: UUID) {
        let id = try row.decode("loan_id", as: UUID.self)
        let loan = MyLoan(
            loanId: LoanID(id), title: try row.decode("title"), amountCents: try row.decode("amount_cents"),
            repaidCents: try row.decode("repaid_cents"), status: try row.decode("status"), country: try row.decode("country_code"),
            photo: try row.decode("photo", as: String?.self).map(PhotoResource.init), borrowerHandle: try row.decode("borrower_handle"))
        return (loan, try row.decode("first_bought_at"), id)
    }
}

extension ProfilesView {
    public func posts(of user: UserID, after cursor: Cursor?, limit: Int) async throws -> Page<ItemResource> {
        let rows = try await pool.query(MyList.posts.statement(of: user, after: cursor, limit: limit))
        return try MyList.page(rows, limit: limit, ItemResource.keyed)
    }

    /// The user's bids (`.bids`) or the bids on their items (`.bidsReceived`), of one status if given.
    public func bids(
        _ list: MyList, of user: UserID, status: BidStatus?, after cursor: Cursor?, limit: Int
    ) async throws -> Page<BidResource> {
        let rows = try await pool.query(list.statement(of: user, status: status, after: cursor, limit: limit))
        return try MyList.page(rows, limit: limit, BidResource.keyed)
    }

    public func loans(of user: UserID, after cursor: Cursor?, limit: Int) async throws -> Page<MyLoan> {
        let rows = try await pool.query(MyList.loans.statement(of: user, after: cursor, limit: limit))
        return try MyList.page(rows, limit: limit, MyLoan.keyed)
    }
}

/// Where each list of `GET /v1/me` goes on: the next page's path, or null when it showed all.
public struct ProfileLinks: Codable, Sendable {
    public var posts: String?
    public var bids: String?
    public var bidsReceived: String?
    public var loans: String?
    public var approvalsGiven: String?
    public var approvalsReceived: String?
}
