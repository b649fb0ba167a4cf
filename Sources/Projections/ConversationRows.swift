import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// A row of `reviews_view`: a review, and whether it is shown yet and still. `table` is its
/// one declaration.
struct ReviewRow: Sendable {
    /// The deal's approved bid (a booking's id, for a booking's review).
    var bid = BidID.none
    var role = ReviewerRole.owner
    var item = ItemID.none
    var author = UserID.none
    var subject = UserID.none
    var stars = 0
    var text = ""
    var createdAt = Date(timeIntervalSince1970: 0)
    var position: Int64 = 0
    /// False while a booking's review is held for its publication.
    var published = true
    var hidden = false

    /// Every column but the generated `review_id`.
    static let table = ViewTable<ReviewRow>(
        "reviews_view", blank: ReviewRow(),
        [
            ViewColumn("bid_id", "uuid", \.bid),
            ViewColumn("role", \.role),
            ViewColumn("item_id", "uuid", \.item),
            ViewColumn("author_id", "uuid", \.author),
            ViewColumn("subject_id", "uuid", \.subject),
            ViewColumn("stars", "integer", \.stars),
            ViewColumn("text", "text", \.text),
            ViewColumn("created_at", "timestamp with time zone", \.createdAt),
            ViewColumn("position", "bigint", \.position),
            ViewColumn("published", "boolean", \.published),
            ViewColumn("hidden", "boolean", \.hidden),
        ])

    /// A review as its writing makes it: shown at once, or held for its booking's publication.
    init(_ review: ReviewWritten, item: ItemID?, _ event: ProjectedEvent) {
        (bid, role, self.item, author, subject) = (review.bidID, review.role, item ?? .none, review.authorID, review.subjectID)
        (stars, text, createdAt, position, published) = (review.stars, review.text, event.recordedAt, event.position, review.held != true)
    }

    init() {}
}

/// A row of `messages_view`: a message on a bid. `table` is its one declaration.
struct MessageRow: Sendable {
    var id = MessageID.none
    var bid = BidID.none
    var item = ItemID.none
    var author = UserID.none
    var recipient = UserID.none
    var text = ""
    var createdAt = Date(timeIntervalSince1970: 0)
    /// Its log position: the order of a conversation, and its cursor.
    var position: Int64 = 0

    static let table = ViewTable<MessageRow>(
        "messages_view", blank: MessageRow(),
        [
            ViewColumn("message_id", "uuid", \.id),
            ViewColumn("bid_id", "uuid", \.bid),
            ViewColumn("item_id", "uuid", \.item),
            ViewColumn("author_id", "uuid", \.author),
            ViewColumn("recipient_id", "uuid", \.recipient),
            ViewColumn("text", "text", \.text),
            ViewColumn("created_at", "timestamp with time zone", \.createdAt),
            ViewColumn("position", "bigint", \.position),
        ])

    init(_ message: MessageSent, item: ItemID?, _ event: ProjectedEvent) {
        (id, bid, self.item, author, recipient) = (message.messageID, message.bidID, item ?? .none, message.authorID, message.recipientID)
        (text, createdAt, position) = (message.text, event.recordedAt, event.position)
    }

    init() {}
}
