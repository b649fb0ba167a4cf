import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres
import UUIDs

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
///
/// Set-based: a batch's notices are gathered by shape and written at its end, one statement
/// a shape, rather than one a notice. That is the same feed: every notice reads the other
/// views as the batch leaves them, as before, and is keyed by its own position. Each row
/// finds what it reads by key (`LATERAL ... OFFSET 0`, which the planner cannot turn into a
/// join over a whole view).
public struct FeedProjection: InlineProjection {
    public let name = "feed"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        var batch = Notices()
        for event in events {
            if Aggregate.item.owns(event.streamID) {
                try item(event, &batch)
            } else if Aggregate.loan.owns(event.streamID) {
                try loan(event, &batch, &session)
            } else if Aggregate.user.owns(event.streamID) {
                try user(event, &batch)
            }
        }
        try batch.write(&session)
    }

    private func item(_ event: ProjectedEvent, _ batch: inout Notices) throws {
        let item = UUID(text: event.streamID.rawValue.dropFirst("item-".count))
        switch try Aggregate.item.codec.decode(event) {
        case .bidPlaced(let placed):
            batch.bidsReceived.add(event, item, placed.bidID.rawValue, placed.bidderID.rawValue, placed.dailyPriceCents)
        case .bidApproved(let approved):
            batch.bidFates.add(event, NoticeKind.bidApproved.rawValue, approved.bidID.rawValue)
        case .bidRejected(let rejected):
            batch.bidFates.add(event, NoticeKind.bidRejected.rawValue, rejected.bidID.rawValue)
        case .messageSent(let message):
            batch.notice(
                .messageReceived, to: message.recipientID, event, item: item, bid: message.bidID.rawValue,
                message: message.messageID.rawValue, from: message.authorID)
        case .reviewWritten(let review):
            batch.notice(
                .reviewReceived, to: review.subjectID, event, item: item, bid: review.bidID.rawValue, from: review.authorID,
                stars: review.stars)
        default:
            break
        }
    }

    private func loan(_ event: ProjectedEvent, _ batch: inout Notices, _ session: inout PostgresSession) throws {
        let loan = UUID(text: event.streamID.rawValue.dropFirst("loan-".count))
        let kind: NoticeKind
        switch try Aggregate.loan.codec.decode(event) {
        case .sharePurchased(let share):
            // A lender hears only of what happens to the loan after they lent.
            if !batch.loanNotices.isEmpty { try batch.write(&session) }
            batch.lenders.loans.append(loan)
            batch.lenders.lenders.append(share.lenderID.rawValue)
            return
        case .funded: kind = .loanFunded
        case .repaid: kind = .loanRepaid
        case .expired: kind = .loanExpired
        default: return
        }
        batch.loanNotices.add(event, kind.rawValue, loan)
    }

    private func user(_ event: ProjectedEvent, _ batch: inout Notices) throws {
        switch try Aggregate.user.codec.decode(event) {
        case .balanceCredited(let credit):
            guard let user = UUID(text: event.streamID.rawValue.dropFirst("user-".count)) else { return }
            batch.notice(.balanceCredited, to: UserID(user), event, loan: credit.loanID.rawValue, amount: credit.amountCents)
        case .forgotten(let forgotten):
            // A forgotten person has no feed; notices about them elsewhere read `former user`.
            batch.forgotten.append(forgotten.userID.rawValue)
        default:
            break
        }
    }

    /// A forgotten person has no feed, now or later (a repayment still credits them). A scalar
    /// subquery, looked up by key for each row: as `NOT EXISTS` the planner may join a batch
    /// against the whole of `users_view`, and a rebuild's tables have no statistics to stop it.
    static func stillHere(_ column: String) -> String {
        "(SELECT gone.forgotten_at FROM users_view gone WHERE gone.user_id = \(column)) IS NULL"
    }
}

/// A batch's notices, by shape, each shape a set of columns for `unnest`.
private struct Notices {
    /// A bid on an item: its owner hears of it.
    var bidsReceived = Rows(4)
    /// A bid approved or rejected: its bidder hears of it.
    var bidFates = Rows(2)
    /// A notice to a named user.
    var direct = Rows(9)
    /// Who lent to a loan, and what happened to loans: its lenders hear of it.
    var lenders = (loans: PostgresBatchColumn(), lenders: PostgresBatchColumn())
    var loanNotices = Rows(2)
    var forgotten: [UUID] = []

    mutating func notice(
        _ kind: NoticeKind, to user: UserID, _ event: ProjectedEvent, item: UUID? = nil, bid: UUID? = nil,
        loan: UUID? = nil, message: UUID? = nil, from: UserID? = nil, amount: Int? = nil, stars: Int? = nil
    ) {
        direct.add(event, user.rawValue, kind.rawValue, item, bid, loan, message, from?.rawValue, amount, stars)
    }

    /// Writes what was gathered, a statement a shape, and starts again.
    mutating func write(_ session: inout PostgresSession) throws {
        let stillHere = FeedProjection.stillHere
        if !lenders.loans.isEmpty {
            try session.query(
                """
                INSERT INTO feed_loan_lenders (loan_id, lender_id)
                SELECT * FROM unnest(\(lenders.loans)::uuid[], \(lenders.lenders)::uuid[]) ON CONFLICT DO NOTHING
                """, prepared: true)
        }
        if !bidsReceived.isEmpty {
            let c = bidsReceived.columns
            try session.query(
                """
                INSERT INTO feed_view (user_id, position, kind, item_id, bid_id, from_user_id, amount_cents, created_at)
                SELECT i.owner_id, n.position, \(NoticeKind.bidReceived.rawValue), i.item_id, n.bid, n.bidder, n.amount, n.at
                FROM unnest(\(bidsReceived.positions)::int8[], \(bidsReceived.times)::timestamptz[], \(c[0])::uuid[],
                            \(c[1])::uuid[], \(c[2])::uuid[], \(c[3])::int8[]) AS n(position, at, item, bid, bidder, amount),
                     LATERAL (SELECT owner_id, item_id FROM items_view WHERE item_id = n.item OFFSET 0) i
                WHERE \(unsafeRaw: stillHere("i.owner_id"))
                ON CONFLICT DO NOTHING
                """, prepared: true)
        }
        if !bidFates.isEmpty {
            let c = bidFates.columns
            try session.query(
                """
                INSERT INTO feed_view (user_id, position, kind, item_id, bid_id, from_user_id, created_at)
                SELECT b.bidder_id, n.position, n.kind, b.item_id, b.bid_id, b.owner_id, n.at
                FROM unnest(\(bidFates.positions)::int8[], \(bidFates.times)::timestamptz[], \(c[0])::text[],
                            \(c[1])::uuid[]) AS n(position, at, kind, bid),
                     LATERAL (SELECT bidder_id, item_id, bid_id, owner_id FROM bids_view WHERE bid_id = n.bid OFFSET 0) b
                WHERE \(unsafeRaw: stillHere("b.bidder_id"))
                ON CONFLICT DO NOTHING
                """, prepared: true)
        }
        if !direct.isEmpty {
            let c = direct.columns
            try session.query(
                """
                INSERT INTO feed_view (user_id, position, kind, item_id, bid_id, loan_id, message_id, from_user_id, amount_cents,
                                       stars, created_at)
                SELECT n.user_id, n.position, n.kind, n.item, n.bid, n.loan, n.message, n.from_user, n.amount, n.stars, n.at
                FROM unnest(\(direct.positions)::int8[], \(direct.times)::timestamptz[], \(c[0])::uuid[], \(c[1])::text[],
                            \(c[2])::uuid[], \(c[3])::uuid[], \(c[4])::uuid[], \(c[5])::uuid[], \(c[6])::uuid[],
                            \(c[7])::int8[], \(c[8])::int4[])
                     AS n(position, at, user_id, kind, item, bid, loan, message, from_user, amount, stars)
                WHERE \(unsafeRaw: stillHere("n.user_id"))
                ON CONFLICT DO NOTHING
                """, prepared: true)
        }
        if !loanNotices.isEmpty {
            let c = loanNotices.columns
            try session.query(
                """
                INSERT INTO feed_view (user_id, position, kind, loan_id, created_at)
                SELECT l.lender_id, n.position, n.kind, l.loan_id, n.at
                FROM unnest(\(loanNotices.positions)::int8[], \(loanNotices.times)::timestamptz[], \(c[0])::text[],
                            \(c[1])::uuid[]) AS n(position, at, kind, loan),
                     LATERAL (SELECT lender_id, loan_id FROM feed_loan_lenders WHERE loan_id = n.loan OFFSET 0) l
                WHERE \(unsafeRaw: stillHere("l.lender_id"))
                ON CONFLICT DO NOTHING
                """, prepared: true)
        }
        if !forgotten.isEmpty {
            try session.query(
                "DELETE FROM feed_view WHERE user_id = ANY (\(forgotten.map(\.uuidString))::uuid[])", prepared: true)
        }
        self = Notices()
    }
}

/// Rows of one shape: each notice's position and time, and its other values by column.
private struct Rows {
    var positions: [Int64] = []
    var times = PostgresBatchColumn()
    var columns: [PostgresBatchColumn]

    init(_ width: Int) { columns = Array(repeating: PostgresBatchColumn(), count: width) }

    var isEmpty: Bool { positions.isEmpty }

    mutating func add(_ event: ProjectedEvent, _ values: (any PostgresEncodable)...) {
        precondition(values.count == columns.count, "a notice's values, one a column")
        positions.append(event.position)
        times.append(event.recordedAt)
        for (index, value) in values.enumerated() { columns[index].append(value) }
    }
}
