import Foundation

// Reviews and conversations (SPEC §11.4): both on the item's stream, where the deal they
// follow was decided, so that who may write is decided from the same folded state.

/// Who wrote a review: the item's owner, about the renter, or the approved bidder, about
/// the item and its owner.
public enum ReviewerRole: String, Hashable, Sendable, Codable {
    case owner, bidder
}

/// One side's review of the other after a completed deal: the deal's approved bid names it.
public struct ReviewWritten: EventBody, Hashable {
    public static let eventType = "ReviewWritten"
    public var bidID: BidID
    public var authorID: UserID
    public var subjectID: UserID
    public var role: ReviewerRole
    public var stars: Int
    public var text: String
    /// A booking's review, held unpublished until `ReviewsPublished` (nil: published at once,
    /// as every review of the second release and of a request is).
    public var held: Bool?

    public init(
        bidID: BidID, authorID: UserID, subjectID: UserID, role: ReviewerRole, stars: Int, text: String, held: Bool? = nil
    ) {
        self.bidID = bidID
        self.authorID = authorID
        self.subjectID = subjectID
        self.role = role
        self.stars = stars
        self.text = text
        self.held = held
    }
}

/// A booking's held reviews are shown and counted: both parties have reviewed, or its
/// review window has closed.
public struct ReviewsPublished: EventBody, Hashable {
    public static let eventType = "ReviewsPublished"
    public var bookingID: BookingID

    public init(bookingID: BookingID) {
        self.bookingID = bookingID
    }
}

/// Fourteen days after a booking's completion: no more reviews of it.
public struct ReviewWindowClosed: EventBody, Hashable {
    public static let eventType = "ReviewWindowClosed"
    public var bookingID: BookingID

    public init(bookingID: BookingID) {
        self.bookingID = bookingID
    }
}

/// A message between the item's owner and one bidder, on that bid.
public struct MessageSent: EventBody, Hashable {
    public static let eventType = "MessageSent"
    public var messageID: MessageID
    public var bidID: BidID
    public var authorID: UserID
    public var recipientID: UserID
    public var text: String

    public init(messageID: MessageID, bidID: BidID, authorID: UserID, recipientID: UserID, text: String) {
        self.messageID = messageID
        self.bidID = bidID
        self.authorID = authorID
        self.recipientID = recipientID
        self.text = text
    }
}

public struct WriteReview: Hashable, Sendable {
    public var stars: Int
    public var text: String

    public init(stars: Int, text: String = "") {
        self.stars = stars
        self.text = text
    }
}

public struct SendMessage: Hashable, Sendable {
    public var messageID: MessageID
    public var bidID: BidID
    public var text: String
    /// Whether the other party has blocked the author: a fact from the recipient's stream.
    public var isBlockedByRecipient: Bool

    public init(messageID: MessageID = MessageID(), bidID: BidID, text: String, isBlockedByRecipient: Bool = false) {
        self.messageID = messageID
        self.bidID = bidID
        self.text = text
        self.isBlockedByRecipient = isBlockedByRecipient
    }
}

/// A completed deal: the bid approved before the item closed, and who has reviewed it.
public struct CompletedDeal: Hashable, Sendable {
    public var bidID: BidID
    public var bidderID: UserID
    public var reviewedBy: Set<ReviewerRole> = []
}

extension ItemDecider {
    public static let starRange = 1...5
    public static let maxReviewLength = 2000
    public static let maxMessageLength = 2000

    /// Each side of a completed deal reviews the other once: the owner their latest deal's
    /// renter, a bidder their own latest deal on the item. Anyone else is refused.
    static func review(_ review: WriteReview, _ state: ItemState, actor: UserID) throws -> ItemEvent {
        let item = try requireItem(state)
        let role: ReviewerRole = actor == item.ownerID ? .owner : .bidder
        let deal = role == .owner ? item.completedDeals.last : item.completedDeals.last { $0.bidderID == actor }
        // A booking completed by this release is reviewed on its own route, held until published.
        if let deal, item.booking(deal.bidID)?.completedOn != nil {
            throw DomainError(
                .conflict, "review_the_booking", "Review a booking at /v1/bookings/\(deal.bidID)/reviews.")
        }
        let approvedNow = item.bids.contains { $0.bidderID == actor && $0.status == .approved }
        guard role == .owner || deal != nil || approvedNow else {
            throw DomainError(.forbidden, "not_a_party", "Only the owner and the approved bidder of a completed deal review it.")
        }
        var validation = Validation()
        validation.check(starRange.contains(review.stars), "stars", "invalid_stars", "a whole number from 1 to 5")
        validation.check(review.text.isWithin(0...maxReviewLength), "text", "too_long", "at most \(maxReviewLength) characters")
        try validation.throwIfInvalid()
        guard let deal else {
            throw DomainError(.conflict, "deal_not_completed", "A review follows a completed deal; this one is not completed.")
        }
        guard !deal.reviewedBy.contains(role) else {
            throw DomainError(.conflict, "already_reviewed", "You have already reviewed this deal.")
        }
        return .reviewWritten(
            ReviewWritten(
                bidID: deal.bidID, authorID: actor, subjectID: role == .owner ? deal.bidderID : item.ownerID, role: role,
                stars: review.stars, text: review.text))
    }

    /// Only the owner and that bidder write on a bid, and not to someone who blocked them.
    static func message(_ message: SendMessage, _ state: ItemState, actor: UserID) throws -> ItemEvent {
        let item = try requireItem(state)
        let bid = try requireBid(item, message.bidID)
        guard actor == item.ownerID || actor == bid.bidderID else {
            throw DomainError(.forbidden, "not_a_party", "Only the item's owner and the bidder write on a bid.")
        }
        let trimmed = message.text.trimmingCharacters(in: .whitespacesAndNewlines)
        var validation = Validation()
        validation.check(!trimmed.isEmpty, "text", "empty", "a message has some text")
        validation.check(message.text.isWithin(0...maxMessageLength), "text", "too_long", "at most \(maxMessageLength) characters")
        try validation.throwIfInvalid()
        guard !message.isBlockedByRecipient else {
            throw DomainError(.forbidden, "blocked", "The other party has blocked you.")
        }
        return .messageSent(
            MessageSent(
                messageID: message.messageID, bidID: bid.id, authorID: actor,
                recipientID: actor == item.ownerID ? bid.bidderID : item.ownerID, text: message.text))
    }
}
