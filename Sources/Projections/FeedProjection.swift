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
/// position, so a feed resumes after any position and a replay makes the same feed. Runs
/// after the items projection, whose bids it reads to know whom a bid's fate concerns.
///
/// Set-based (`WritePlan`): a batch's notices are written a statement a shape, rather than one
/// a notice. That is the same feed: every notice reads the other views as the batch leaves
/// them, as before, and is keyed by its own position. A loan's news reads its lenders, and a
/// share bought writes one, so a lender hears only of what happens after they lent. Each row
/// finds what it reads by key (`LATERAL ... OFFSET 0`, which the planner cannot turn into a
/// join over a whole view).
///
/// A notice is inserted without `ON CONFLICT`: an event is applied once, and each makes at
/// most one notice per person (a loan's news one per lender, each once in
/// `feed_loan_lenders`), so a key taken twice is a defect to hear of, not to hide. The
/// conflict check cost 1.7–1.9 times the insert itself (300,000 rows, psql).
public struct FeedProjection: InlineProjection {
    public let name = "feed"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        var plan = WritePlan()
        var forgotten: [UUID] = []
        for event in events {
            if Aggregate.item.owns(event.streamID) {
                try item(event, &plan)
            } else if Aggregate.loan.owns(event.streamID) {
                try loan(event, &plan)
            } else if Aggregate.user.owns(event.streamID) {
                try user(event, &plan, &forgotten)
            }
        }
        try plan.run(&session)
        if !forgotten.isEmpty { try Self.removeFeeds(of: forgotten, &session) }
    }

    /// A build from the first event: the same notices, worked out here from what the log
    /// has said so far (`Memory`) rather than read back from the views, and sent by `COPY`.
    /// The notices were a rebuild's largest table, and their inserts its costliest statements
    /// (433,800 rows of 1.08M events, 4.7 s, each looking up what it reads by key).
    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        var notices = PostgresCopyRows(unsafeRawTarget: Self.noticeColumns, width: 11)
        var lenders = PostgresCopyRows(unsafeRawTarget: "feed_loan_lenders (loan_id, lender_id)", width: 2)
        var forgotten: [UUID] = []
        try memory.with(name, initial: Memory()) { known in
            var batch: [Notice] = []
            for event in events {
                try known.fold(event, into: &batch, lenders: &lenders, forgotten: &forgotten)
            }
            // Whoever is forgotten by the batch's end hears nothing of it, as `stillHere` reads,
            // and whoever the batch forgets loses what it said to them, as the deletion after
            // the appends' inserts does (even someone `users_view` never held).
            let forgottenNow = Set(forgotten)
            for notice in batch where !known.forgotten.contains(notice.user) && !forgottenNow.contains(notice.user) {
                notices.append(notice.values)
            }
            // What the batch's forgotten were told before it goes at the build's end, at once
            // (`finishRebuild`): each notice written before this batch.
            if let first = events.first?.position {
                for user in forgotten { known.removals[user] = first }
            }
        }
        try session.copy(lenders)
        try session.copy(notices)
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
    static func removeFeeds(of users: [UUID], _ session: inout PostgresSession) throws {
        try session.query("DELETE FROM feed_view WHERE user_id = ANY (\(users.map(\.lowercaseText))::uuid[])", prepared: true)
    }

    static let noticeColumns =
        "feed_view (user_id, position, kind, item_id, bid_id, loan_id, message_id, from_user_id, amount_cents, stars, created_at)"

    /// A notice as a row of `feed_view`.
    struct Notice {
        var user: UUID
        var values: [any PostgresEncodable]

        init(
            _ kind: NoticeKind, to user: UUID, _ event: ProjectedEvent, item: UUID? = nil, bid: UUID? = nil, loan: UUID? = nil,
            message: UUID? = nil, from: UUID? = nil, amount: Int? = nil, stars: Int? = nil
        ) {
            self.user = user
            values = [user, event.position, kind.rawValue, item, bid, loan, message, from, amount, stars, event.recordedAt]
        }
    }

    /// What a rebuild's notices read, folded from the log in its order: each item's owner,
    /// each bid's bidder, item and owner, each loan's lenders (in the order they first lent),
    /// who is registered and who of them forgotten. The views hold the same, and never change
    /// it once written: an item keeps its owner, a bid its bidder, item and owner. About 100
    /// bytes a bid.
    struct Memory: Sendable {
        struct Bid: Sendable {
            var bidder: UUID
            var item: UUID?
            /// As `bids_view` has it: the item's owner when the bid was placed.
            var owner: UUID?
        }

        var owners: [UUID: UUID] = [:]
        var bids: [UUID: Bid] = [:]
        /// Each booking's reviews held unpublished, told when `ReviewsPublished` comes.
        var heldReviews: [UUID: [ReviewWritten]] = [:]
        var lenders: [UUID: [UUID]] = [:]
        var registered: Set<UUID> = []
        /// As `users_view.forgotten_at` says: only a registered user's is set.
        var forgotten: Set<UUID> = []
        /// Everyone forgotten (registered or not), and the first position of the last batch
        /// that forgot them: their notices before it are deleted at the build's end.
        var removals: [UUID: Int64] = [:]

        mutating func fold(
            _ event: ProjectedEvent, into notices: inout [Notice], lenders newLenders: inout PostgresCopyRows,
            forgotten newlyForgotten: inout [UUID]
        ) throws {
            if Aggregate.item.owns(event.streamID) {
                // As the views key them: an item by its posting's id, a bid's item by its stream.
                let item = Aggregate.item.id(of: event.streamID)?.rawValue
                switch try Aggregate.item.codec.decode(event) {
                case .rentalPosted(let posted):
                    if owners[posted.itemID.rawValue] == nil { owners[posted.itemID.rawValue] = posted.ownerID.rawValue }
                case .requestPosted(let posted):
                    if owners[posted.itemID.rawValue] == nil { owners[posted.itemID.rawValue] = posted.ownerID.rawValue }
                case .bidPlaced(let placed):
                    let owner = item.flatMap { owners[$0] }
                    if bids[placed.bidID.rawValue] == nil {
                        bids[placed.bidID.rawValue] = Bid(bidder: placed.bidderID.rawValue, item: item, owner: owner)
                    }
                    guard let owner else { return }
                    notices.append(
                        Notice(
                            .bidReceived, to: owner, event, item: item, bid: placed.bidID.rawValue, from: placed.bidderID.rawValue,
                            amount: placed.dailyPriceCents))
                case .bidApproved(let approved):
                    fate(.bidApproved, of: approved.bidID.rawValue, event, &notices)
                case .bidRejected(let rejected):
                    fate(NoticeKind.rejection(rejected), of: rejected.bidID.rawValue, event, &notices)
                case .bookingConfirmed(let confirmed):
                    notices.append(
                        Notice(
                            .bookingConfirmed, to: confirmed.renterID.rawValue, event, item: item, bid: confirmed.bookingID.rawValue,
                            from: confirmed.ownerID.rawValue))
                case .bookingCompleted(let completed):
                    notices.append(
                        Notice(
                            .reviewWanted, to: completed.renterID.rawValue, event, item: item, bid: completed.bookingID.rawValue,
                            from: completed.ownerID.rawValue))
                    notices.append(
                        Notice(
                            .reviewWanted, to: completed.ownerID.rawValue, event, item: item, bid: completed.bookingID.rawValue,
                            from: completed.renterID.rawValue))
                case .bookingCancelled(let cancelled):
                    for user in cancelled.told {
                        notices.append(
                            Notice(
                                .bookingCancelled, to: user.rawValue, event, item: item, bid: cancelled.bookingID.rawValue,
                                from: cancelled.teller?.rawValue, amount: user == cancelled.renterID ? cancelled.refundCents : nil))
                    }
                case .disputeOpened(let opened):
                    notices.append(
                        Notice(
                            .bookingDisputed, to: opened.told.rawValue, event, item: item, bid: opened.bookingID.rawValue,
                            from: opened.openedBy.rawValue))
                case .depositClaimed(let claimed):
                    notices.append(
                        Notice(
                            .bookingDisputed, to: claimed.renterID.rawValue, event, item: item, bid: claimed.bookingID.rawValue,
                            from: claimed.ownerID.rawValue, amount: claimed.amountCents))
                case .disputeResolved(let resolved):
                    for (user, amount) in [(resolved.renterID, resolved.renterCents), (resolved.ownerID, resolved.ownerCents)] {
                        notices.append(
                            Notice(
                                .disputeResolved, to: user.rawValue, event, item: item, bid: resolved.bookingID.rawValue,
                                amount: amount))
                    }
                case .bookingReminded(let reminded):
                    notices.append(
                        Notice(
                            .bookingStartsTomorrow, to: reminded.renterID.rawValue, event, item: item,
                            bid: reminded.bookingID.rawValue, from: reminded.ownerID.rawValue))
                    notices.append(
                        Notice(
                            .bookingStartsTomorrow, to: reminded.ownerID.rawValue, event, item: item,
                            bid: reminded.bookingID.rawValue, from: reminded.renterID.rawValue))
                case .messageSent(let message):
                    notices.append(
                        Notice(
                            .messageReceived, to: message.recipientID.rawValue, event, item: item, bid: message.bidID.rawValue,
                            message: message.messageID.rawValue, from: message.authorID.rawValue))
                case .reviewWritten(let review) where review.held == true:
                    heldReviews[review.bidID.rawValue, default: []].append(review)
                case .reviewWritten(let review):
                    notices.append(
                        Notice(
                            .reviewReceived, to: review.subjectID.rawValue, event, item: item, bid: review.bidID.rawValue,
                            from: review.authorID.rawValue, stars: review.stars))
                case .savedSearchesMatched(let matched):
                    for user in matched.users {
                        notices.append(Notice(.newMatch, to: user.rawValue, event, item: item, from: matched.ownerID.rawValue))
                    }
                case .reviewsPublished(let published):
                    for review in heldReviews.removeValue(forKey: published.bookingID.rawValue) ?? [] {
                        notices.append(
                            Notice(
                                .reviewReceived, to: review.subjectID.rawValue, event, item: item, bid: review.bidID.rawValue,
                                from: review.authorID.rawValue, stars: review.stars))
                    }
                default:
                    break
                }
            } else if Aggregate.loan.owns(event.streamID) {
                guard let loan = Aggregate.loan.id(of: event.streamID)?.rawValue else { return }
                let kind: NoticeKind
                switch try Aggregate.loan.codec.decode(event) {
                case .sharePurchased(let share):
                    let lender = share.lenderID.rawValue
                    if !lenders[loan, default: []].contains(lender) {
                        lenders[loan, default: []].append(lender)
                        newLenders.append([loan, lender])
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
                    self.registered.insert(registered.userID.rawValue)
                case .balanceCredited(let credit):
                    guard let user = Aggregate.user.id(of: event.streamID)?.rawValue else { return }
                    notices.append(Notice(.balanceCredited, to: user, event, loan: credit.loanID.rawValue, amount: credit.amountCents))
                case .payoutSent(let sent):
                    guard let user = Aggregate.user.id(of: event.streamID)?.rawValue else { return }
                    notices.append(Notice(.payoutSent, to: user, event, amount: sent.amountCents))
                case .forgotten(let gone):
                    if registered.contains(gone.userID.rawValue) { forgotten.insert(gone.userID.rawValue) }
                    newlyForgotten.append(gone.userID.rawValue)
                default:
                    break
                }
            }
        }

        /// A bid approved or rejected: its bidder hears of it, from the item's owner.
        private func fate(_ kind: NoticeKind, of bid: UUID, _ event: ProjectedEvent, _ notices: inout [Notice]) {
            guard let known = bids[bid] else { return }
            notices.append(Notice(kind, to: known.bidder, event, item: known.item, bid: bid, from: known.owner))
        }
    }

    private func item(_ event: ProjectedEvent, _ plan: inout WritePlan) throws {
        let item = Aggregate.item.id(of: event.streamID)?.rawValue
        switch try Aggregate.item.codec.decode(event) {
        case .bidPlaced(let placed):
            plan.add(
                Self.bidsReceived,
                [event.position, event.recordedAt, item, placed.bidID.rawValue, placed.bidderID.rawValue, placed.dailyPriceCents],
                writes: [])
        case .bidApproved(let approved):
            plan.add(Self.bidFates, [event.position, event.recordedAt, NoticeKind.bidApproved.rawValue, approved.bidID.rawValue], writes: [])
        case .bidRejected(let rejected):
            plan.add(
                Self.bidFates, [event.position, event.recordedAt, NoticeKind.rejection(rejected).rawValue, rejected.bidID.rawValue],
                writes: [])
        case .bookingConfirmed(let confirmed):
            notice(
                .bookingConfirmed, to: confirmed.renterID, event, &plan, item: item, bid: confirmed.bookingID.rawValue,
                from: confirmed.ownerID)
        case .bookingCompleted(let completed):
            notice(
                .reviewWanted, to: completed.renterID, event, &plan, item: item, bid: completed.bookingID.rawValue,
                from: completed.ownerID)
            notice(
                .reviewWanted, to: completed.ownerID, event, &plan, item: item, bid: completed.bookingID.rawValue,
                from: completed.renterID)
        case .bookingCancelled(let cancelled):
            for user in cancelled.told {
                notice(
                    .bookingCancelled, to: user, event, &plan, item: item, bid: cancelled.bookingID.rawValue, from: cancelled.teller,
                    amount: user == cancelled.renterID ? cancelled.refundCents : nil)
            }
        case .disputeOpened(let opened):
            notice(.bookingDisputed, to: opened.told, event, &plan, item: item, bid: opened.bookingID.rawValue, from: opened.openedBy)
        case .depositClaimed(let claimed):
            notice(
                .bookingDisputed, to: claimed.renterID, event, &plan, item: item, bid: claimed.bookingID.rawValue,
                from: claimed.ownerID, amount: claimed.amountCents)
        case .disputeResolved(let resolved):
            for (user, amount) in [(resolved.renterID, resolved.renterCents), (resolved.ownerID, resolved.ownerCents)] {
                notice(.disputeResolved, to: user, event, &plan, item: item, bid: resolved.bookingID.rawValue, amount: amount)
            }
        case .bookingReminded(let reminded):
            notice(
                .bookingStartsTomorrow, to: reminded.renterID, event, &plan, item: item, bid: reminded.bookingID.rawValue,
                from: reminded.ownerID)
            notice(
                .bookingStartsTomorrow, to: reminded.ownerID, event, &plan, item: item, bid: reminded.bookingID.rawValue,
                from: reminded.renterID)
        case .messageSent(let message):
            notice(
                .messageReceived, to: message.recipientID, event, &plan, item: item, bid: message.bidID.rawValue,
                message: message.messageID.rawValue, from: message.authorID)
        case .reviewWritten(let review) where review.held != true:
            // A held review is news once published (not before: its stars stay hidden till then).
            notice(
                .reviewReceived, to: review.subjectID, event, &plan, item: item, bid: review.bidID.rawValue, from: review.authorID,
                stars: review.stars)
        case .savedSearchesMatched(let matched):
            for user in matched.users { notice(.newMatch, to: user, event, &plan, item: item, from: matched.ownerID) }
        case .reviewsPublished(let published):
            // The booking's reviews, published by this event (every review of a booking is held
            // until then), as the items projection has just written them.
            plan.add(Self.publishedReviews, [event.position, event.recordedAt, published.bookingID.rawValue], writes: [])
        default:
            break
        }
    }

    private func loan(_ event: ProjectedEvent, _ plan: inout WritePlan) throws {
        let loan = Aggregate.loan.id(of: event.streamID)?.rawValue
        let lenders = [WritePlan.Row(.loanLenders, loan)]
        let kind: NoticeKind
        switch try Aggregate.loan.codec.decode(event) {
        case .sharePurchased(let share):
            plan.add(Self.addLenders, [loan, share.lenderID.rawValue], writes: lenders)
            return
        case .funded: kind = .loanFunded
        case .repaid: kind = .loanRepaid
        case .expired: kind = .loanExpired
        default: return
        }
        plan.add(Self.loanNews, [event.position, event.recordedAt, kind.rawValue, loan], reads: lenders, writes: [])
    }

    private func user(_ event: ProjectedEvent, _ plan: inout WritePlan, _ forgotten: inout [UUID]) throws {
        switch try Aggregate.user.codec.decode(event) {
        case .balanceCredited(let credit):
            guard let user = Aggregate.user.id(of: event.streamID) else { return }
            notice(.balanceCredited, to: user, event, &plan, loan: credit.loanID.rawValue, amount: credit.amountCents)
        case .payoutSent(let sent):
            guard let user = Aggregate.user.id(of: event.streamID) else { return }
            notice(.payoutSent, to: user, event, &plan, amount: sent.amountCents)
        case .forgotten(let gone):
            forgotten.append(gone.userID.rawValue)
        default:
            break
        }
    }

    /// A notice to a named user.
    private func notice(
        _ kind: NoticeKind, to user: UserID, _ event: ProjectedEvent, _ plan: inout WritePlan, item: UUID? = nil,
        bid: UUID? = nil, loan: UUID? = nil, message: UUID? = nil, from: UserID? = nil, amount: Int? = nil, stars: Int? = nil
    ) {
        plan.add(
            Self.direct,
            [event.position, event.recordedAt, user.rawValue, kind.rawValue, item, bid, loan, message, from?.rawValue, amount, stars],
            writes: [])
    }

    /// A forgotten person has no feed, now or later (a repayment still credits them). A scalar
    /// subquery, looked up by key for each row: as `NOT EXISTS` the planner may join a batch
    /// against the whole of `users_view`, and a rebuild's tables have no statistics to stop it.
    static func stillHere(_ column: String) -> String {
        "(SELECT gone.forgotten_at FROM users_view gone WHERE gone.user_id = \(column)) IS NULL"
    }

    // MARK: The notices' shapes.

    /// Who lent to a loan, for its news.
    static let addLenders = SetWrite("add loan lenders", width: 2) { c in
        """
        INSERT INTO feed_loan_lenders (loan_id, lender_id)
        SELECT * FROM unnest(\(c[0])::uuid[], \(c[1])::uuid[]) ON CONFLICT DO NOTHING
        """
    }

    /// A bid on an item: its owner hears of it.
    static let bidsReceived = SetWrite("bids received", width: 6) { c in
        """
        INSERT INTO feed_view (user_id, position, kind, item_id, bid_id, from_user_id, amount_cents, created_at)
        SELECT i.owner_id, n.position, \(NoticeKind.bidReceived.rawValue), i.item_id, n.bid, n.bidder, n.amount, n.at
        FROM unnest(\(c[0])::int8[], \(c[1])::timestamptz[], \(c[2])::uuid[], \(c[3])::uuid[], \(c[4])::uuid[], \(c[5])::int8[])
             AS n(position, at, item, bid, bidder, amount),
             LATERAL (SELECT owner_id, item_id FROM items_view WHERE item_id = n.item OFFSET 0) i
        WHERE \(unsafeRaw: stillHere("i.owner_id"))
        """
    }

    /// A bid approved or rejected: its bidder hears of it.
    static let bidFates = SetWrite("bid fates", width: 4) { c in
        """
        INSERT INTO feed_view (user_id, position, kind, item_id, bid_id, from_user_id, created_at)
        SELECT b.bidder_id, n.position, n.kind, b.item_id, b.bid_id, b.owner_id, n.at
        FROM unnest(\(c[0])::int8[], \(c[1])::timestamptz[], \(c[2])::text[], \(c[3])::uuid[]) AS n(position, at, kind, bid),
             LATERAL (SELECT bidder_id, item_id, bid_id, owner_id FROM bids_view WHERE bid_id = n.bid OFFSET 0) b
        WHERE \(unsafeRaw: stillHere("b.bidder_id"))
        """
    }

    /// A notice to a named user.
    static let direct = SetWrite("notices", width: 11) { c in
        """
        INSERT INTO feed_view (user_id, position, kind, item_id, bid_id, loan_id, message_id, from_user_id, amount_cents,
                               stars, created_at)
        SELECT n.user_id, n.position, n.kind, n.item, n.bid, n.loan, n.message, n.from_user, n.amount, n.stars, n.at
        FROM unnest(\(c[0])::int8[], \(c[1])::timestamptz[], \(c[2])::uuid[], \(c[3])::text[], \(c[4])::uuid[], \(c[5])::uuid[],
                    \(c[6])::uuid[], \(c[7])::uuid[], \(c[8])::uuid[], \(c[9])::int8[], \(c[10])::int4[])
             AS n(position, at, user_id, kind, item, bid, loan, message, from_user, amount, stars)
        WHERE \(unsafeRaw: stillHere("n.user_id"))
        """
    }

    /// A booking's reviews, published: each subject hears of the review about them.
    static let publishedReviews = SetWrite("published reviews", width: 3) { c in
        """
        INSERT INTO feed_view (user_id, position, kind, item_id, bid_id, from_user_id, stars, created_at)
        SELECT r.subject_id, n.position, 'review_received', r.item_id, r.bid_id, r.author_id, r.stars, n.at
        FROM unnest(\(c[0])::int8[], \(c[1])::timestamptz[], \(c[2])::uuid[]) AS n(position, at, booking),
             LATERAL (SELECT subject_id, item_id, bid_id, author_id, stars FROM reviews_view WHERE bid_id = n.booking OFFSET 0) r
        WHERE \(unsafeRaw: stillHere("r.subject_id"))
        """
    }

    /// What happened to a loan: its lenders (so far) hear of it.
    static let loanNews = SetWrite("loan news", width: 4) { c in
        """
        INSERT INTO feed_view (user_id, position, kind, loan_id, created_at)
        SELECT l.lender_id, n.position, n.kind, l.loan_id, n.at
        FROM unnest(\(c[0])::int8[], \(c[1])::timestamptz[], \(c[2])::text[], \(c[3])::uuid[]) AS n(position, at, kind, loan),
             LATERAL (SELECT lender_id, loan_id FROM feed_loan_lenders WHERE loan_id = n.loan OFFSET 0) l
        WHERE \(unsafeRaw: stillHere("l.lender_id"))
        """
    }
}
