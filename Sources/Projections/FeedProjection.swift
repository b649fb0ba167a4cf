import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// What concerns a user, as it happens (SPEC §11.4).
public enum NoticeKind: String, Codable, Sendable, CaseIterable {
    /// A bid on one of my items.
    case bidReceived = "bid_received"
    case bidApproved = "bid_approved"
    case bidRejected = "bid_rejected"
    case messageReceived = "message_received"
    case reviewReceived = "review_received"
    /// A loan I lent to: fully funded, fully repaid, or expired unfunded (and refunded).
    case loanFunded = "loan_funded"
    case loanRepaid = "loan_repaid"
    case loanExpired = "loan_expired"
    /// Money into my balance: a repayment's share, or a refund.
    case balanceCredited = "balance_credited"
}

/// `feed_view`: one notice per user for each event that concerns them, keyed by the event's
/// position, so a feed resumes after any position and a replay makes the same feed. Runs
/// after the items projection, whose bids it reads to know whom a bid's fate concerns.
public struct FeedProjection: InlineProjection {
    public let name = "feed"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        for event in events {
            if Aggregate.item.owns(event.streamID) {
                try item(event, &session)
            } else if Aggregate.loan.owns(event.streamID) {
                try loan(event, &session)
            } else if Aggregate.user.owns(event.streamID) {
                try user(event, &session)
            }
        }
    }

    private func item(_ event: ProjectedEvent, _ session: inout PostgresSession) throws {
        let item = UUID(uuidString: String(event.streamID.rawValue.dropFirst("item-".count)))
        switch try Aggregate.item.codec.decode(event) {
        case .bidPlaced(let placed):
            try session.query(
                """
                INSERT INTO feed_view (user_id, position, kind, item_id, bid_id, from_user_id, amount_cents, created_at)
                SELECT owner_id, \(event.position), \(NoticeKind.bidReceived.rawValue), item_id, \(placed.bidID.rawValue),
                       \(placed.bidderID.rawValue), \(placed.dailyPriceCents), \(event.recordedAt)
                FROM items_view WHERE item_id = \(item) AND \(unsafeRaw: Self.stillHere("owner_id"))
                ON CONFLICT DO NOTHING
                """, prepared: true)
        case .bidApproved(let approved):
            try bidFate(.bidApproved, approved.bidID, event, &session)
        case .bidRejected(let rejected):
            try bidFate(.bidRejected, rejected.bidID, event, &session)
        case .messageSent(let message):
            try notice(
                .messageReceived, to: message.recipientID, event, &session, item: item, bid: message.bidID.rawValue,
                message: message.messageID.rawValue, from: message.authorID)
        case .reviewWritten(let review):
            try notice(
                .reviewReceived, to: review.subjectID, event, &session, item: item, bid: review.bidID.rawValue,
                from: review.authorID, stars: review.stars)
        default:
            break
        }
    }

    /// A bid approved or rejected: its bidder hears of it.
    private func bidFate(_ kind: NoticeKind, _ bid: BidID, _ event: ProjectedEvent, _ session: inout PostgresSession) throws {
        try session.query(
            """
            INSERT INTO feed_view (user_id, position, kind, item_id, bid_id, from_user_id, created_at)
            SELECT bidder_id, \(event.position), \(kind.rawValue), item_id, bid_id, owner_id, \(event.recordedAt)
            FROM bids_view WHERE bid_id = \(bid.rawValue) AND \(unsafeRaw: Self.stillHere("bidder_id"))
            ON CONFLICT DO NOTHING
            """, prepared: true)
    }

    private func loan(_ event: ProjectedEvent, _ session: inout PostgresSession) throws {
        let loan = UUID(uuidString: String(event.streamID.rawValue.dropFirst("loan-".count)))
        let kind: NoticeKind
        switch try Aggregate.loan.codec.decode(event) {
        case .sharePurchased(let share):
            try session.query(
                "INSERT INTO feed_loan_lenders (loan_id, lender_id) VALUES (\(loan), \(share.lenderID.rawValue)) ON CONFLICT DO NOTHING",
                prepared: true)
            return
        case .funded: kind = .loanFunded
        case .repaid: kind = .loanRepaid
        case .expired: kind = .loanExpired
        default: return
        }
        try session.query(
            """
            INSERT INTO feed_view (user_id, position, kind, loan_id, created_at)
            SELECT lender_id, \(event.position), \(kind.rawValue), loan_id, \(event.recordedAt)
            FROM feed_loan_lenders WHERE loan_id = \(loan) AND \(unsafeRaw: Self.stillHere("lender_id"))
            ON CONFLICT DO NOTHING
            """, prepared: true)
    }

    private func user(_ event: ProjectedEvent, _ session: inout PostgresSession) throws {
        switch try Aggregate.user.codec.decode(event) {
        case .balanceCredited(let credit):
            guard let user = UUID(uuidString: String(event.streamID.rawValue.dropFirst("user-".count))) else { return }
            try notice(
                .balanceCredited, to: UserID(user), event, &session, loan: credit.loanID.rawValue, amount: credit.amountCents)
        case .forgotten(let forgotten):
            // A forgotten person has no feed; notices about them elsewhere read `former user`.
            try session.query("DELETE FROM feed_view WHERE user_id = \(forgotten.userID.rawValue)", prepared: true)
        default:
            break
        }
    }

    /// A forgotten person has no feed, now or later (a repayment still credits them).
    static func stillHere(_ column: String) -> String {
        "NOT EXISTS (SELECT 1 FROM users_view gone WHERE gone.user_id = \(column) AND gone.forgotten_at IS NOT NULL)"
    }

    private func notice(
        _ kind: NoticeKind, to user: UserID, _ event: ProjectedEvent, _ session: inout PostgresSession, item: UUID? = nil,
        bid: UUID? = nil, loan: UUID? = nil, message: UUID? = nil, from: UserID? = nil, amount: Int? = nil, stars: Int? = nil
    ) throws {
        try session.query(
            """
            INSERT INTO feed_view (user_id, position, kind, item_id, bid_id, loan_id, message_id, from_user_id, amount_cents,
                                   stars, created_at)
            SELECT user_id, \(event.position), \(kind.rawValue), \(item), \(bid), \(loan), \(message), \(from?.rawValue),
                   \(amount), \(stars), \(event.recordedAt)
            FROM (SELECT \(user.rawValue)::uuid AS user_id) recipient WHERE \(unsafeRaw: Self.stillHere("recipient.user_id"))
            ON CONFLICT DO NOTHING
            """, prepared: true)
    }
}
