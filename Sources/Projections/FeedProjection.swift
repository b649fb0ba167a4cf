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
    /// My bid on a rental approved: the days are mine (to the renter).
    case bookingConfirmed = "booking_confirmed"
    /// My bid waited too long, or its first day came, with no answer.
    case bidExpired = "bid_expired"
    /// A booking of mine is over: time to review the other party (to both).
    case reviewWanted = "review_wanted"
    /// A booking of mine was called off by the other party (to both, when neither did).
    case bookingCancelled = "booking_cancelled"
    /// A booking of mine starts tomorrow (to both, once, by the jobs).
    case bookingStartsTomorrow = "booking_starts_tomorrow"
    /// My payout went to my bank account.
    case payoutSent = "payout_sent"
    /// A new posting meets one of my saved searches.
    case newMatch = "new_match"
    /// A booking of mine was disputed, or its deposit claimed, by the other party (SPEC §12.5).
    case bookingDisputed = "booking_disputed"
    /// An operator divided what a booking of mine held (to both, with each one's share).
    case disputeResolved = "dispute_resolved"
}

extension DisputeOpened {
    /// The party who did not open it.
    var told: UserID { openedBy == renterID ? ownerID : renterID }
}

extension BookingCancelled {
    /// Who hears of it: the party who did not cancel it (both, when an operator or the
    /// server did).
    var told: [UserID] {
        if cancelledBy == renterID { return [ownerID] }
        if cancelledBy == ownerID { return [renterID] }
        return [renterID, ownerID]
    }

    /// Whom the notice names as its source: the one who cancelled, when a party did.
    var teller: UserID? { cancelledBy == renterID || cancelledBy == ownerID ? cancelledBy : nil }
}

extension NoticeKind {
    /// A bid's rejection, as its bidder hears of it: an expiry is told apart.
    static func rejection(_ rejected: BidRejected) -> NoticeKind {
        rejected.reason == "expired" ? .bidExpired : .bidRejected
    }
}

/// `feed_view`: one notice per user for each event that concerns them, keyed by the event's
/// position, so a feed resumes after any position and a replay makes the same feed.
///
/// Stated once, as a fold (`Memory.fold`): what each event tells whom, from what the log said
/// before it (each item's owner, each bid's bidder, item and owner, each booking's held
/// reviews, each loan's lenders). An append reads those the batch needs by key, with the
/// batch's own append (`reads`: the views hold the same, and never change it once written),
/// folds the batch, and inserts its notices and new lenders, one statement each; a build from
/// the first event holds them in memory and copies the notices.
///
/// A notice is inserted without `ON CONFLICT`: an event is applied once, and each makes at
/// most one notice per person (a loan's news one per lender, each once in
/// `feed_loan_lenders`), so a key taken twice is a defect to hear of, not to hide. The
/// conflict check cost 1.7–1.9 times the insert itself (300,000 rows, psql).
public struct FeedProjection: ReadingProjection {
    public let name = "feed"
    public init() {}

    /// What a batch's notices read of earlier events, by key: the items bid on, the bids
    /// decided, the bookings whose reviews are published, the loans with news or a new lender.
    struct Keys {
        var items = Set<ItemID>(), bids = Set<BidID>(), bookings = Set<BidID>(), loans = Set<LoanID>()

        init(_ events: [ProjectedEvent]) {
            for event in events {
                if Aggregate.item.owns(event.streamID) {
                    switch event.type {
                    case BidPlaced.eventType:
                        if let item = Aggregate.item.id(of: event.streamID) { items.insert(item) }
                    case BidApproved.eventType, BidRejected.eventType, ReviewsPublished.eventType:
                        switch try? Aggregate.item.codec.decode(event) {
                        case .bidApproved(let approved): bids.insert(approved.bidID)
                        case .bidRejected(let rejected): bids.insert(rejected.bidID)
                        case .reviewsPublished(let published): bookings.insert(published.bookingID)
                        default: break
                        }
                    default: break
                    }
                } else if Aggregate.loan.owns(event.streamID), let loan = Aggregate.loan.id(of: event.streamID) {
                    switch event.type {
                    case LoanSharePurchased.eventType, LoanFunded.eventType, LoanRepaid.eventType, LoanExpired.eventType: loans.insert(loan)
                    default: break
                    }
                }
            }
        }

        /// One read for each kind of key the batch has, each told by its first column.
        var reads: [PostgresQuery] {
            var reads: [PostgresQuery] = []
            if !items.isEmpty {
                reads.append("SELECT item_id, owner_id FROM items_view WHERE item_id = ANY (\(items.map(\.description))::uuid[])")
            }
            if !bids.isEmpty {
                reads.append(
                    "SELECT bid_id, bidder_id, item_id, owner_id FROM bids_view WHERE bid_id = ANY (\(bids.map(\.description))::uuid[])")
            }
            if !bookings.isEmpty {
                // Its reviews held unpublished, as the fold holds them.
                reads.append(
                    """
                    SELECT bid_id AS booking_id, author_id, subject_id, stars FROM reviews_view
                    WHERE bid_id = ANY (\(bookings.map(\.description))::uuid[]) AND NOT published ORDER BY position
                    """)
            }
            if !loans.isEmpty {
                reads.append(
                    "SELECT loan_id, lender_id FROM feed_loan_lenders WHERE loan_id = ANY (\(loans.map(\.description))::uuid[])")
            }
            return reads
        }

        /// What `reads` found, as the fold holds it. Each result is told by its first column,
        /// not by its place: the reads were made from every event the batch might append, and
        /// `apply` gets those it did append (an append refused for its version drops out).
        static func memory(_ read: [PostgresRows]) throws -> Memory {
            var known = Memory()
            for found in read {
                switch found.columns.first?.name {
                case "item_id":
                    for row in found { known.owners[try row.decode("item_id", as: ItemID.self)] = try row.decode("owner_id", as: UserID.self) }
                case "bid_id":
                    for row in found {
                        known.bids[try row.decode("bid_id", as: BidID.self)] = Memory.Bid(
                            bidder: try row.decode("bidder_id", as: UserID.self), item: try row.decode("item_id", as: ItemID?.self),
                            owner: try row.decode("owner_id", as: UserID?.self))
                    }
                case "booking_id":
                    for row in found {
                        let booking = try row.decode("booking_id", as: BidID.self)
                        known.heldReviews[booking, default: []].append(
                            Memory.HeldReview(
                                booking: booking, author: try row.decode("author_id", as: UserID.self),
                                subject: try row.decode("subject_id", as: UserID.self), stars: try row.decode("stars")))
                    }
                case "loan_id":
                    for row in found {
                        known.lenders[try row.decode("loan_id", as: LoanID.self), default: []].append(try row.decode("lender_id", as: UserID.self))
                    }
                default:
                    throw PostgresError(.decoding, message: "a read FeedProjection.Keys does not make")
                }
            }
            return known
        }
    }

    public func reads(_ events: [ProjectedEvent]) -> [PostgresQuery] { Keys(events).reads }

    /// The batch folded from what `reads` found; its notices and new lenders inserted, one
    /// statement each, and the feeds of whoever it forgot removed. A notice to someone
    /// forgotten by the batch's end is not written (`stillHere`, read as the users projection
    /// leaves `users_view`).
    public func apply(_ events: [ProjectedEvent], read: [PostgresRows], _ session: inout PostgresSession) throws {
        var known = try Keys.memory(read)
        var notices: [Notice] = [], lenders: [(LoanID, UserID)] = [], forgotten: [UserID] = []
        for event in events {
            try known.fold(event, into: &notices, lenders: &lenders, forgotten: &forgotten)
        }
        if !lenders.isEmpty {
            try session.query(
                LoanLender.table.write(Self.addLenders, lenders.map { LoanLender(loan: $0, lender: $1) }), prepared: true)
        }
        if !notices.isEmpty { try session.query(Notice.table.write(Self.insertNotices, notices), prepared: true) }
        if !forgotten.isEmpty { try Self.removeFeeds(of: forgotten, &session) }
    }

    /// A build from the first event: the same fold, over what the log has said so far, held in
    /// memory (`Memory`) rather than read back from the views, and its notices sent by `COPY`.
    /// The notices were a rebuild's largest table, and their inserts its costliest statements
    /// (433,800 rows of 1.08M events, 4.7 s, each looking up what it reads by key).
    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        var notices: [Notice] = [], lenders: [LoanLender] = []
        var forgotten: [UserID] = []
        try memory.with(name, initial: Memory()) { known in
            var batch: [Notice] = [], lent: [(LoanID, UserID)] = []
            for event in events {
                try known.fold(event, into: &batch, lenders: &lent, forgotten: &forgotten)
            }
            lenders = lent.map { LoanLender(loan: $0, lender: $1) }
            // Whoever is forgotten by the batch's end hears nothing of it, as `stillHere` reads,
            // and whoever the batch forgets loses what it said to them, as the deletion after
            // the appends' inserts does (even someone `users_view` never held).
            let forgottenNow = Set(forgotten)
            notices = batch.filter { !known.forgotten.contains($0.user) && !forgottenNow.contains($0.user) }
            // What the batch's forgotten were told before it goes at the build's end, at once
            // (`finishRebuild`): each notice written before this batch.
            if let first = events.first?.position {
                for user in forgotten { known.removals[user] = first }
            }
        }
        try session.copy(LoanLender.table.copy(lenders))
        try session.copy(Notice.table.copy(notices))
    }

    /// The notices of everyone the build forgot, written before the batch that forgot them,
    /// deleted in one statement: the deletions of the appends, made batch by batch, found the
    /// rows by the table's key, which a build makes at its end (`keysAfterRows`).
    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        let removals = memory.with(name, initial: Memory()) { known in
            defer { known.removals = [:] }
            return known.removals
        }
        guard !removals.isEmpty else { return }
        var users = PostgresBatchColumn(), before = PostgresBatchColumn()
        for (user, position) in removals {
            users.append(user)
            before.append(position)
        }
        try session.query(
            """
            DELETE FROM feed_view f USING unnest(\(users)::uuid[], \(before)::int8[]) AS r(user_id, before)
            WHERE f.user_id = r.user_id AND f.position < r.before
            """)
    }

    /// A forgotten person has no feed; notices about them elsewhere read `former user`.
    static func removeFeeds(of users: [UserID], _ session: inout PostgresSession) throws {
        try session.query("DELETE FROM feed_view WHERE user_id = ANY (\(users.map(\.description))::uuid[])", prepared: true)
    }

    /// A notice: a row of `feed_view`. `table` is its one declaration.
    struct Notice: Sendable {
        var user = UserID.none
        var position: Int64 = 0
        var kind = NoticeKind.bidReceived
        var item: ItemID?
        var bid: BidID?
        var loan: LoanID?
        var message: MessageID?
        var from: UserID?
        var amountCents: Int?
        var stars: Int?
        var createdAt = Date(timeIntervalSince1970: 0)

        static let table = ViewTable<Notice>(
            "feed_view", blank: Notice(),
            [
                ViewColumn("user_id", "uuid", \.user),
                ViewColumn("position", "bigint", \.position),
                ViewColumn("kind", \.kind),
                ViewColumn("item_id", "uuid", \.item),
                ViewColumn("bid_id", "uuid", \.bid),
                ViewColumn("loan_id", "uuid", \.loan),
                ViewColumn("message_id", "uuid", \.message),
                ViewColumn("from_user_id", "uuid", \.from),
                ViewColumn("amount_cents", "bigint", \.amountCents),
                ViewColumn("stars", "integer", \.stars),
                ViewColumn("created_at", "timestamp with time zone", \.createdAt),
            ])

        init(
            _ kind: NoticeKind, to user: UserID, _ event: ProjectedEvent, item: ItemID? = nil, bid: BidID? = nil, loan: LoanID? = nil,
            message: MessageID? = nil, from: UserID? = nil, amount: Int? = nil, stars: Int? = nil
        ) {
            (self.user, position, self.kind, createdAt) = (user, event.position, kind, event.recordedAt)
            (self.item, self.bid, self.loan, self.message, self.from, amountCents, self.stars) = (item, bid, loan, message, from, amount, stars)
        }

        init() {}
    }

    /// A lender to a loan, as its news reaches them: a row of `feed_loan_lenders`.
    struct LoanLender: Sendable {
        var loan = LoanID.none
        var lender = UserID.none

        static let table = ViewTable<LoanLender>(
            "feed_loan_lenders", blank: LoanLender(), [ViewColumn("loan_id", "uuid", \.loan), ViewColumn("lender_id", "uuid", \.lender)])
    }

    /// What the notices read, folded from the log in its order: each item's owner, each bid's
    /// bidder, item and owner, each booking's held reviews, each loan's lenders (in the order
    /// they first lent), who is registered and who of them forgotten. An append holds what
    /// its batch reads (`Keys.memory`); a build, all of it (about 100 bytes a bid).
    struct Memory: Sendable {
        struct Bid: Sendable {
            var bidder: UserID
            var item: ItemID?
            /// As `bids_view` has it: the item's owner when the bid was placed.
            var owner: UserID?
        }

        /// A booking's review held unpublished: who wrote it about whom, with how many stars.
        struct HeldReview: Sendable {
            var booking: BidID
            var author: UserID
            var subject: UserID
            var stars: Int
        }

        var owners: [ItemID: UserID] = [:]
        var bids: [BidID: Bid] = [:]
        /// Each booking's reviews held unpublished, told when `ReviewsPublished` comes.
        var heldReviews: [BidID: [HeldReview]] = [:]
        var lenders: [LoanID: [UserID]] = [:]
        var registered: Set<UserID> = []
        /// As `users_view.forgotten_at` says: only a registered user's is set.
        var forgotten: Set<UserID> = []
        /// Everyone forgotten (registered or not), and the first position of the last batch
        /// that forgot them: their notices before it are deleted at the build's end.
        var removals: [UserID: Int64] = [:]

        /// `event`'s notices, and what it tells the fold: the projection's one statement of
        /// who hears of what. `lenders`: each loan's new lenders, for `feed_loan_lenders`.
        mutating func fold(
            _ event: ProjectedEvent, into notices: inout [Notice], lenders newLenders: inout [(LoanID, UserID)],
            forgotten newlyForgotten: inout [UserID]
        ) throws {
            if Aggregate.item.owns(event.streamID) {
                // As the views key them: an item by its posting's id, a bid's item by its stream.
                let item = Aggregate.item.id(of: event.streamID)
                switch try Aggregate.item.codec.decode(event) {
                case .rentalPosted(let posted):
                    if owners[posted.itemID] == nil { owners[posted.itemID] = posted.ownerID }
                case .requestPosted(let posted):
                    if owners[posted.itemID] == nil { owners[posted.itemID] = posted.ownerID }
                case .bidPlaced(let placed):
                    let owner = item.flatMap { owners[$0] }
                    if bids[placed.bidID] == nil { bids[placed.bidID] = Bid(bidder: placed.bidderID, item: item, owner: owner) }
                    guard let owner else { return }
                    notices.append(
                        Notice(.bidReceived, to: owner, event, item: item, bid: placed.bidID, from: placed.bidderID, amount: placed.dailyPriceCents))
                case .bidApproved(let approved):
                    fate(.bidApproved, of: approved.bidID, event, &notices)
                case .bidRejected(let rejected):
                    fate(NoticeKind.rejection(rejected), of: rejected.bidID, event, &notices)
                case .bookingConfirmed(let confirmed):
                    notices.append(Notice(.bookingConfirmed, to: confirmed.renterID, event, item: item, bid: confirmed.bookingID, from: confirmed.ownerID))
                case .bookingCompleted(let completed):
                    notices.append(Notice(.reviewWanted, to: completed.renterID, event, item: item, bid: completed.bookingID, from: completed.ownerID))
                    notices.append(Notice(.reviewWanted, to: completed.ownerID, event, item: item, bid: completed.bookingID, from: completed.renterID))
                case .bookingCancelled(let cancelled):
                    for user in cancelled.told {
                        notices.append(
                            Notice(
                                .bookingCancelled, to: user, event, item: item, bid: cancelled.bookingID, from: cancelled.teller,
                                amount: user == cancelled.renterID ? cancelled.refundCents : nil))
                    }
                case .disputeOpened(let opened):
                    notices.append(Notice(.bookingDisputed, to: opened.told, event, item: item, bid: opened.bookingID, from: opened.openedBy))
                case .depositClaimed(let claimed):
                    notices.append(
                        Notice(
                            .bookingDisputed, to: claimed.renterID, event, item: item, bid: claimed.bookingID, from: claimed.ownerID,
                            amount: claimed.amountCents))
                case .disputeResolved(let resolved):
                    for (user, amount) in [(resolved.renterID, resolved.renterCents), (resolved.ownerID, resolved.ownerCents)] {
                        notices.append(Notice(.disputeResolved, to: user, event, item: item, bid: resolved.bookingID, amount: amount))
                    }
                case .bookingReminded(let reminded):
                    notices.append(
                        Notice(.bookingStartsTomorrow, to: reminded.renterID, event, item: item, bid: reminded.bookingID, from: reminded.ownerID))
                    notices.append(
                        Notice(.bookingStartsTomorrow, to: reminded.ownerID, event, item: item, bid: reminded.bookingID, from: reminded.renterID))
                case .messageSent(let message):
                    notices.append(
                        Notice(
                            .messageReceived, to: message.recipientID, event, item: item, bid: message.bidID, message: message.messageID,
                            from: message.authorID))
                case .reviewWritten(let review) where review.held == true:
                    // News once published (not before: its stars stay hidden till then).
                    heldReviews[review.bidID, default: []].append(
                        HeldReview(booking: review.bidID, author: review.authorID, subject: review.subjectID, stars: review.stars))
                case .reviewWritten(let review):
                    notices.append(
                        Notice(.reviewReceived, to: review.subjectID, event, item: item, bid: review.bidID, from: review.authorID, stars: review.stars))
                case .savedSearchesMatched(let matched):
                    for user in matched.users { notices.append(Notice(.newMatch, to: user, event, item: item, from: matched.ownerID)) }
                case .reviewsPublished(let published):
                    for review in heldReviews.removeValue(forKey: published.bookingID) ?? [] {
                        notices.append(
                            Notice(.reviewReceived, to: review.subject, event, item: item, bid: review.booking, from: review.author, stars: review.stars))
                    }
                default:
                    break
                }
            } else if Aggregate.loan.owns(event.streamID) {
                guard let loan = Aggregate.loan.id(of: event.streamID) else { return }
                let kind: NoticeKind
                switch try Aggregate.loan.codec.decode(event) {
                case .sharePurchased(let share):
                    // A lender hears only of what happens after they lent.
                    if !lenders[loan, default: []].contains(share.lenderID) {
                        lenders[loan, default: []].append(share.lenderID)
                        newLenders.append((loan, share.lenderID))
                    }
                    return
                case .funded: kind = .loanFunded
                case .repaid: kind = .loanRepaid
                case .expired: kind = .loanExpired
                default: return
                }
                for lender in lenders[loan] ?? [] { notices.append(Notice(kind, to: lender, event, loan: loan)) }
            } else if Aggregate.user.owns(event.streamID) {
                switch try Aggregate.user.codec.decode(event) {
                case .registered(let registered):
                    self.registered.insert(registered.userID)
                case .balanceCredited(let credit):
                    guard let user = Aggregate.user.id(of: event.streamID) else { return }
                    notices.append(Notice(.balanceCredited, to: user, event, loan: credit.loanID, amount: credit.amountCents))
                case .payoutSent(let sent):
                    guard let user = Aggregate.user.id(of: event.streamID) else { return }
                    notices.append(Notice(.payoutSent, to: user, event, amount: sent.amountCents))
                case .forgotten(let gone):
                    if registered.contains(gone.userID) { forgotten.insert(gone.userID) }
                    newlyForgotten.append(gone.userID)
                default:
                    break
                }
            }
        }

        /// A bid approved or rejected: its bidder hears of it, from the item's owner.
        private func fate(_ kind: NoticeKind, of bid: BidID, _ event: ProjectedEvent, _ notices: inout [Notice]) {
            guard let known = bids[bid] else { return }
            notices.append(Notice(kind, to: known.bidder, event, item: known.item, bid: bid, from: known.owner))
        }
    }

    /// A forgotten person has no feed, now or later (a repayment still credits them). A scalar
    /// subquery, looked up by key for each row: as `NOT EXISTS` the planner may join a batch
    /// against the whole of `users_view`, and a rebuild's tables have no statistics to stop it.
    static func stillHere(_ column: String) -> String {
        "(SELECT gone.forgotten_at FROM users_view gone WHERE gone.user_id = \(column)) IS NULL"
    }

    /// Who lent to a loan, for its news.
    static let addLenders = LoanLender.table.insert("add loan lenders") { "\($0)\nON CONFLICT DO NOTHING" }

    /// A batch's notices, but to whoever is forgotten by its end.
    static let insertNotices = Notice.table.insert("notices") { "\($0)\nWHERE \(stillHere("r.user_id"))" }
}
