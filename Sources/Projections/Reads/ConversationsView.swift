import Aggregates
import Foundation
import Marketplace
import Postgres

/// Reads of `reviews_view`, `messages_view` and `feed_view`: what people wrote about each
/// other, to each other, and what concerns each of them.
public struct ConversationsView: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    /// Reviews about a user (by either side), newest first.
    public func reviews(about user: UserID, limit: Int, after: Cursor?) async throws -> Page<ReviewResource> {
        let page = try await reviews(where: "r.subject_id = \(user.rawValue)", limit: limit, after: after)
        if page.data.isEmpty, after == nil,
            try await pool.query("SELECT 1 FROM users_view WHERE user_id = \(user.rawValue)", prepared: true).isEmpty
        {
            throw DomainError.userNotFound
        }
        return page
    }

    /// An item's reviews: its renters', which rate it. Newest first.
    public func reviews(ofItem item: ItemID, limit: Int, after: Cursor?) async throws -> Page<ReviewResource> {
        try await reviews(where: "r.item_id = \(item.rawValue) AND r.role = 'bidder'", limit: limit, after: after)
    }

    private func reviews(where condition: PostgresQuery, limit: Int, after: Cursor?) async throws -> Page<ReviewResource> {
        // A booking's review is shown once published (SPEC §12.1).
        var statement: PostgresQuery = "SELECT \(unsafeRaw: ReviewResource.selection) WHERE r.published AND NOT r.hidden AND"
        statement.append(" ")
        statement.append(condition)
        if let after { statement.append(" AND (r.created_at, r.bid_id) < (\(after.at), \(after.id))") }
        statement.append(" ORDER BY r.created_at DESC, r.bid_id DESC LIMIT \(literal: PageSize.rowsRead(limit))")
        let rows = try await pool.query(statement, prepared: true)
        let reviews = try rows.prefix(limit).map(ReviewResource.init)
        let next = rows.count > limit ? reviews.last.map { Cursor(at: $0.createdAt, id: $0.bidId.rawValue).encoded } : nil
        return Page(data: reviews, nextCursor: next)
    }

    /// The messages on a bid, newest first; `before` a message's position pages back.
    public func messages(onBid bid: BidID, limit: Int, before: Int64?) async throws -> Page<MessageResource> {
        var statement: PostgresQuery = "SELECT \(unsafeRaw: MessageResource.selection) WHERE m.bid_id = \(bid.rawValue)"
        if let before { statement.append(" AND m.position < \(before)") }
        statement.append(" ORDER BY m.position DESC LIMIT \(literal: PageSize.rowsRead(limit))")
        let rows = try await pool.query(statement, prepared: true)
        let messages = try rows.prefix(limit).map(MessageResource.init)
        return Page(data: messages, nextCursor: rows.count > limit ? messages.last.map { String($0.position) } : nil)
    }

    /// A user's notices after `after`, oldest first: a feed read to catch up.
    public func feed(of user: UserID, after: Int64, limit: Int) async throws -> Page<Notice> {
        let notices = try await notices(where: "f.user_id = \(user.rawValue) AND f.position > \(after)", limit: limit)
        return Page(data: notices.map(\.notice), nextCursor: notices.count == limit ? notices.last.map { String($0.notice.position) } : nil)
    }

    /// A user's notices before `before` (all of them without it), newest first: an inbox's
    /// pages. The next page's position is the last one's.
    public func feed(of user: UserID, before: Int64?, limit: Int) async throws -> (notices: [Notice], more: Bool) {
        var condition: PostgresQuery = "f.user_id = \(user.rawValue)"
        if let before { condition.append(" AND f.position < \(before)") }
        let notices = try await notices(where: condition, limit: limit + 1, newestFirst: true)
        return (notices.prefix(limit).map(\.notice), notices.count > limit)
    }

    /// Every user's notices after `after` (a position, and a user within it: one event may
    /// concern many users, and a page may end among them), oldest first: what the live feeds
    /// send next.
    public func notices(after: (position: Int64, user: UUID), limit: Int) async throws -> [(user: UserID, notice: Notice)] {
        try await notices(where: "(f.position, f.user_id) > (\(after.position), \(after.user))", limit: limit)
    }

    /// The last position that has a notice: where a live feed starts.
    public func lastNoticePosition() async throws -> Int64 {
        try await pool.query("SELECT coalesce(max(position), 0) AS last FROM feed_view").first?.decode("last") ?? 0
    }

    private func notices(
        where condition: PostgresQuery, limit: Int, newestFirst: Bool = false
    ) async throws -> [(user: UserID, notice: Notice)] {
        var statement: PostgresQuery = """
            SELECT \(unsafeRaw: FeedProjection.Notice.table.selectList("f")), coalesce(i.title, l.title) AS title,
                   CASE WHEN u.forgotten_at IS NULL THEN u.handle ELSE \(Redacted.name) END AS from_handle
            FROM feed_view f
            LEFT JOIN users_view u ON u.user_id = f.from_user_id
            LEFT JOIN items_view i ON i.item_id = f.item_id
            LEFT JOIN loans_view l ON l.loan_id = f.loan_id
            WHERE
            """
        statement.append(" ")
        statement.append(condition)
        statement.append(
            newestFirst
                ? " ORDER BY f.position DESC, f.user_id LIMIT \(literal: limit)" : " ORDER BY f.position, f.user_id LIMIT \(literal: limit)")
        return try await pool.query(statement, prepared: true).map { row in
            let notice = try FeedProjection.Notice.table.decode(row)
            return (notice.user, try Notice(notice, row))
        }
    }
}

/// A review as clients read it.
public struct ReviewResource: Codable, Sendable {
    /// Made from the deal and the side (`reviews_view.review_id`): what a report names.
    public var id: UUID
    public var itemId: ItemID
    /// The deal's approved bid.
    public var bidId: BidID
    public var authorId: UserID
    public var authorHandle: String
    public var subjectId: UserID
    /// `owner`: the item's owner about the renter; `bidder`: the renter about the item and its owner.
    public var role: String
    public var stars: Int
    public var text: String
    public var createdAt: Date
    /// False while a booking's review is held: shown to its author only, until the other party
    /// reviews too or the review window closes.
    public var published: Bool

    /// What `init` reads, from `reviews_view r` (its declared columns first) with its author's
    /// handle (`former user` once forgotten).
    static let selection = """
        \(ReviewRow.table.selectList("r")), r.review_id,
        CASE WHEN u.forgotten_at IS NULL THEN coalesce(u.handle, '') ELSE '\(Redacted.name)' END AS author_handle
        FROM reviews_view r LEFT JOIN users_view u ON u.user_id = r.author_id
        """

    init(_ row: PostgresRow) throws {
        let review = try ReviewRow.table.decode(row)
        id = try row.decode("review_id")
        (itemId, bidId, authorId, subjectId) = (review.item, review.bid, review.author, review.subject)
        authorHandle = try row.decode("author_handle")
        (role, stars, text, createdAt, published) = (review.role.rawValue, review.stars, review.text, review.createdAt, review.published)
    }
}

/// A message on a bid as its two parties read it.
public struct MessageResource: Codable, Sendable {
    public var id: MessageID
    public var bidId: BidID
    public var authorId: UserID
    public var authorHandle: String
    public var text: String
    public var createdAt: Date
    /// Its log position: the order of a conversation, and its cursor.
    public var position: Int64

    /// What `init` reads, from `messages_view m` (its declared columns first) with its author's
    /// handle (`former user` once forgotten).
    static let selection = """
        \(MessageRow.table.selectList("m")),
        CASE WHEN u.forgotten_at IS NULL THEN coalesce(u.handle, '') ELSE '\(Redacted.name)' END AS author_handle
        FROM messages_view m LEFT JOIN users_view u ON u.user_id = m.author_id
        """

    init(_ row: PostgresRow) throws {
        let message = try MessageRow.table.decode(row)
        (id, bidId, authorId, text, createdAt, position) =
            (message.id, message.bid, message.author, message.text, message.createdAt, message.position)
        authorHandle = try row.decode("author_handle")
    }
}

/// One thing that concerned a user, at the log position of the event it came from.
public struct Notice: Codable, Sendable, Hashable {
    public var position: Int64
    public var kind: String
    public var createdAt: Date
    public var itemId: ItemID?
    public var bidId: BidID?
    public var loanId: LoanID?
    public var messageId: MessageID?
    /// Who did it: the bidder, the owner, the author of a message or review.
    public var fromUserId: UserID?
    public var fromHandle: String?
    /// The item's or loan's title.
    public var title: String?
    /// A bid's daily price, or the amount credited.
    public var amountCents: Int?
    public var stars: Int?

    /// `feed_view`'s row, with the title and handle `row` joined to it.
    init(_ notice: FeedProjection.Notice, _ row: PostgresRow) throws {
        (position, kind, createdAt) = (notice.position, notice.kind.rawValue, notice.createdAt)
        (itemId, bidId, loanId, messageId, fromUserId) = (notice.item, notice.bid, notice.loan, notice.message, notice.from)
        (amountCents, stars) = (notice.amountCents, notice.stars)
        fromHandle = try row.decode("from_handle", as: String?.self)
        title = try row.decode("title", as: String?.self)
    }
}

extension ConversationsView {
    /// The newest review `author` wrote on the item: what writing one answers.
    /// A booking's review as its author wrote it, published or held.
    public func review(ofBooking booking: BookingID, by author: UserID) async throws -> ReviewResource? {
        let rows = try await pool.query(
            "SELECT \(unsafeRaw: ReviewResource.selection) WHERE r.bid_id = \(booking.rawValue) AND r.author_id = \(author.rawValue)",
            prepared: true)
        return try rows.first.map(ReviewResource.init)
    }

    public func review(onItem item: ItemID, by author: UserID) async throws -> ReviewResource? {
        try await reviews(where: "r.item_id = \(item.rawValue) AND r.author_id = \(author.rawValue)", limit: 1, after: nil)
            .data.first
    }

    public func message(_ id: MessageID) async throws -> MessageResource? {
        let rows = try await pool.query(
            """
            SELECT \(unsafeRaw: MessageResource.selection)
            WHERE m.message_id = \(id.rawValue)
            """, prepared: true)
        return try rows.first.map(MessageResource.init)
    }
}

extension ConversationsView {
    /// For a person's export: every review they wrote and every one about them, and every
    /// message they wrote or were sent, oldest first.
    public func everything(of user: UserID) async throws -> (reviews: [ReviewResource], messages: [MessageResource]) {
        let reviews = try await pool.query(
            """
            SELECT \(unsafeRaw: ReviewResource.selection)
            WHERE r.author_id = \(user.rawValue) OR (r.subject_id = \(user.rawValue) AND r.published)
            ORDER BY r.position
            """)
        let messages = try await pool.query(
            """
            SELECT \(unsafeRaw: MessageResource.selection)
            WHERE m.author_id = \(user.rawValue) OR m.recipient_id = \(user.rawValue)
            ORDER BY m.position
            """)
        return (try reviews.map(ReviewResource.init), try messages.map(MessageResource.init))
    }
}
