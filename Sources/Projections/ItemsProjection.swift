import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres
import UUIDs

/// `items_view`, `bids_view`, `reviews_view` and `messages_view`: every item, bid, review and
/// message as clients read them, and the ratings they add up to in `users_view`.
///
/// Total, like `evolve`: a valid event never fails here. A handle not (yet) in
/// `users_view` is written as empty rather than refusing the event.
public struct ItemsProjection: InlineProjection {
    public let name = "items"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        var unused = Memory()
        try apply(events, &session, building: false, &unused)
    }

    /// A rebuild leaves the market's cells alone: made once over the available items at its
    /// end (`finishRebuild`), they cost a scan, where moving them batch by batch cost an upsert
    /// per cell touched and kept an index on the items whose predicate reads `status`, so that
    /// no change of status could be written beside its row (HOT).
    ///
    /// And its items and bids are sent by `COPY`, their owners' and bidders' handles and
    /// their items' owners known from what the log said earlier (`Memory`), where each insert
    /// looked them up by key: the bids' insert was a build's costliest statement (2.5 s of
    /// 1.04M events, 13 µs a bid, `pg_stat_statements`). Each item is kept in memory and
    /// written once, as the log leaves it, at the build's end, where its statuses, bid counts,
    /// revisions and photos were each an update of its row (the statuses' alone 1.8 s).
    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Memory()) { known in
            try apply(events, &session, building: true, &known)
        }
    }

    /// What a build folds from the log. Each user's handle and the bids placed, which never
    /// change once said (`users_view` keeps the first registration of an id, `bids_view` the
    /// first row of each). Each item as its row stands (`items`; the first posting of an id
    /// only, as `items_view` keeps it), written at the build's end. And the bids not yet
    /// decided (`held`), written once when their fate comes.
    struct Memory: Sendable {
        var handles: [UserID: String] = [:]
        var items: [ItemID: HeldItem] = [:]
        /// Each owner's items, for their forgetting.
        var itemsByOwner: [UserID: [ItemID]] = [:]
        var bids: Set<BidID> = []
        var held: [BidID: BidRow] = [:]
        /// Each registered user's completed deals and ratings, which the users projection
        /// writes with their row at the build's end.
        var userCounts: [UserID: UserCounts] = [:]
        /// A booking's reviews held unpublished: counted when `ReviewsPublished` comes.
        var heldReviews: [BidID: [HeldReview]] = [:]

        /// One more deal or review for `user`, if they are registered: the appends' update of
        /// `users_view` finds no row otherwise.
        mutating func count(_ user: UserID, _ body: (inout UserCounts) -> Void) {
            guard handles[user] != nil else { return }
            body(&userCounts[user, default: UserCounts()])
        }

        /// `body` made to the item's row, if the log posted it: an update of the appends finds
        /// no row otherwise.
        mutating func change(_ item: ItemID?, _ body: (inout ItemRow) -> Void) {
            guard let item, items[item] != nil else { return }
            body(&items[item]!.row)
        }

        /// A forgotten owner's items keep their listing but lose the place, the texts and the
        /// photos, and show `former user`, as the forget's update does to the rows of the appends.
        mutating func forget(owner: UserID, _ event: ProjectedEvent) {
            for id in itemsByOwner[owner] ?? [] {
                items[id]!.row.ownerHandle = Redacted.name
                items[id]!.row.location = Location(lat: 0, lng: 0, place: Redacted.text)
                items[id]!.row.title = Redacted.text
                items[id]!.row.description = Redacted.text
                items[id]!.row.photos = []
                items[id]!.row.touch(event)
            }
        }

        /// A forgotten bidder's undecided bids lose their handle and message, as the forget's
        /// update does to the bids already written.
        mutating func forget(bidder: UserID) {
            for (id, bid) in held where bid.bidder == bidder {
                held[id]!.bidderHandle = Redacted.name
                if bid.message != nil { held[id]!.message = Redacted.text }
            }
        }

        /// The batch's registrations first: the inserts read `users_view` as the users
        /// projection leaves it after the whole batch.
        mutating func register(_ events: [ProjectedEvent]) throws {
            for event in events where event.type == UserRegistered.eventType && Aggregate.user.owns(event.streamID) {
                guard case .registered(let registered) = try Aggregate.user.codec.decode(event) else { continue }
                if handles[registered.userID] == nil { handles[registered.userID] = registered.handle }
            }
        }
    }

    /// A booking's review held unpublished: whom it rates, as whom, with how many stars.
    struct HeldReview: Sendable {
        var subject: UserID
        var role: ReviewerRole
        var stars: Int
    }

    /// What the items' events add to a user's row.
    struct UserCounts: Sendable {
        var completedDeals = 0
        var reviewCount = 0
        var reviewStars = 0
    }

    /// An item of a build as its row stands, and where the log posted it: the order
    /// `finishRebuild` copies the items in.
    struct HeldItem: Sendable {
        var row: ItemRow
        let posted: Int64
    }

    /// The items as the log left them, and the bids still undecided, written as they are;
    /// then each kept cell's count, sums and least item id, from the available items: what
    /// moving them item by item since the first event makes (`applyCellMoves`, migration 0021).
    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Memory()) { known in
            // In the order they were posted, as the appends insert them: a table laid out the
            // same at each build, its pages in the order the market's newest read them.
            let items = ItemRow.table.copy(known.items.values.sorted(by: { $0.posted < $1.posted }).lazy.map(\.row))
            known.items = [:]
            known.itemsByOwner = [:]
            try session.copy(items)
            let pending = BidRow.table.copy(known.held.values)
            known.held = [:]
            try session.copy(pending)
        }
        // The rebuild's own table, seen by no one else until a swap: emptied without dead rows.
        try session.query("TRUNCATE market_cells")
        try session.query(
            """
            INSERT INTO market_cells (level, cell_x, cell_y, count, sum_lat, sum_lng, sample)
            SELECT l, mercator_x(i.lng) >> (24 - l), mercator_y(i.lat) >> (24 - l), count(*),
                   sum(round(i.lat * 1e7)::bigint), sum(round(i.lng * 1e7)::bigint), (array_agg(i.item_id ORDER BY i.item_id))[1]
            FROM items_view i, unnest(\(unsafeRaw: Self.cellLevels)) AS l
            WHERE i.status = 'available'
            GROUP BY 1, 2, 3
            """)
    }

    /// `building`: a build from the first event, which moves no cells (they are made at its end),
    /// keeps its items in memory until its end and sends its bids by `COPY` (`known`).
    private func apply(
        _ events: [ProjectedEvent], _ session: inout PostgresSession, building: Bool, _ known: inout Memory
    ) throws {
        if building { try known.register(events) }
        // Whether an event may have noted a move in or out of the market's cells.
        var moved = false
        var bidCounts = BidCounts()
        var plan = WritePlan()
        for event in events {
            if event.type == UserForgotten.eventType {
                try forget(event, &plan, building: building, &known)
                moved = true
                continue
            }
            guard Aggregate.item.owns(event.streamID) else { continue }
            let item = Aggregate.item.id(of: event.streamID)
            let row = WritePlan.Row(.item, item)
            let at = event.recordedAt
            let decoded = try Aggregate.item.codec.decode(event)
            switch decoded {
            case .rentalPosted, .requestPosted, .revised, .withdrawn, .reserved, .closed, .relisted, .expired, .takenDown, .suspended,
                .reinstated:
                moved = true
            default: break
            }
            switch decoded {
            case .rentalPosted, .requestPosted:
                // The owner's handle: a build's from memory, the appends' read by the insert.
                var posted = ItemRow(posted: decoded, ownerHandle: "", at: at, position: event.position)!
                if building {
                    guard known.items[posted.id] == nil else { break }
                    posted.ownerHandle = known.handles[posted.owner] ?? ""
                    known.items[posted.id] = HeldItem(row: posted, posted: event.position)
                    known.itemsByOwner[posted.owner, default: []].append(posted.id)
                } else {
                    plan.add(Self.insertItems, ItemRow.table.values(posted), writes: [WritePlan.Row(.item, posted.id)])
                }
            case .revised(let revised) where building:
                known.change(item) { $0.revise(revised, event) }
            case .revised(let revised):
                // Moved while available: out of its old cells, into its new ones (one statement:
                // projections are pipelined, and read no answers).
                plan.add(
                    [
                        """
                        WITH old AS (SELECT lat, lng FROM items_view WHERE item_id = \(item)),
                        changed AS (
                            UPDATE items_view
                            SET title = coalesce(\(revised.title), title), description = coalesce(\(revised.description), description),
                                category = coalesce(\(revised.category?.rawValue), category),
                                price_cents = coalesce(\(revised.priceCents), price_cents),
                                lat = coalesce(\(revised.location?.lat), lat), lng = coalesce(\(revised.location?.lng), lng),
                                place = coalesce(\(revised.location?.place), place),
                                updated_at = \(at), position = \(event.position)
                            WHERE item_id = \(item)
                            RETURNING status, lat, lng
                        ),
                        moves (item, lat, lng, delta) AS (
                            SELECT \(item), old.lat, old.lng, -1 FROM old, changed
                            WHERE changed.status = 'available' AND (old.lat, old.lng) <> (changed.lat, changed.lng)
                            UNION ALL
                            SELECT \(item), changed.lat, changed.lng, 1 FROM old, changed
                            WHERE changed.status = 'available' AND (old.lat, old.lng) <> (changed.lat, changed.lng)
                        )
                        \(unsafeRaw: Self.noteMoves)
                        """
                    ], writes: [row])
            case .withdrawn:
                setStatus(&plan, item, .withdrawn, event, building: building, &known)
            case .takenDown:
                setStatus(&plan, item, .takenDown, event, building: building, &known)
            case .suspended:
                setStatus(&plan, item, .suspended, event, building: building, &known)
            case .reinstated:
                setStatus(&plan, item, .available, event, building: building, &known)
            case .expired:
                setStatus(&plan, item, .expired, event, building: building, &known)
            case .reserved(let reserved):
                setStatus(&plan, item, .reserved, event, deal: .some(reserved.bidderID), building: building, &known)
            case .closed:
                setStatus(&plan, item, .closed, event, building: building, &known)
                // A completed deal for both parties: the owner and the bidder it was reserved for.
                if !building {
                    plan.add(Self.completeDeals, [item], reads: [row], writes: [])
                } else if let held = item.flatMap({ known.items[$0]?.row }) {
                    for user in Set([held.owner, held.deal].compactMap { $0 }) {
                        known.count(user) { $0.completedDeals += 1 }
                    }
                }
            case .relisted:
                setStatus(&plan, item, .available, event, deal: .some(nil), building: building, &known)
            case .photoAdded(let added) where building:
                known.change(item) { held in
                    if Gallery.add(added.digest, to: &held.photos) { held.touch(event) }
                }
            case .photoRemoved(let removed) where building:
                known.change(item) { held in
                    Gallery.remove(removed.digest, from: &held.photos)
                    held.touch(event)
                }
            case .photoAdded(let added):
                plan.add([Gallery.items.add(added.digest, to: item?.rawValue, event)], writes: [row])
            case .photoRemoved(let removed):
                plan.add([Gallery.items.remove(removed.digest, from: item?.rawValue, event)], writes: [row])
            case .bidPlaced(let placed) where building:
                if known.bids.insert(placed.bidID).inserted {
                    known.held[placed.bidID] = BidRow(
                        placed: placed, item: item, owner: item.flatMap { known.items[$0]?.row.owner },
                        bidderHandle: known.handles[placed.bidderID] ?? "", at: at)
                }
                known.change(item) { held in
                    held.bidCount += 1
                    held.touch(event)
                }
            case .bidPlaced(let placed):
                // The owner and the bidder's handle read by the insert.
                plan.add(
                    Self.insertBids, BidRow.table.values(BidRow(placed: placed, item: item, owner: nil, bidderHandle: "", at: at)),
                    reads: [row], writes: [WritePlan.Row(.bid, placed.bidID.rawValue)])
                bidCounts.add(item, event)
            case .bidWithdrawn(let withdrawn):
                setBid(&plan, withdrawn.bidID, .withdrawn, reason: nil, event, building: building, &known)
            case .bidRejected(let rejected):
                setBid(&plan, rejected.bidID, .rejected, reason: rejected.reason, event, building: building, &known)
            case .bidApproved(let approved):
                setBid(&plan, approved.bidID, .approved, reason: nil, event, building: building, &known)
            case .reviewWritten(let review) where review.held == true:
                // A booking's review: written, shown and counted once published.
                if building {
                    known.heldReviews[review.bidID, default: []].append(
                        HeldReview(subject: review.subjectID, role: review.role, stars: review.stars))
                }
                plan.add([Self.insertReview(review, item, event, published: false)], writes: [row])
            case .reviewsPublished(let published) where building:
                let reviews = known.heldReviews.removeValue(forKey: published.bookingID) ?? []
                for review in reviews {
                    known.count(review.subject) { counts in
                        counts.reviewCount += 1
                        counts.reviewStars += review.stars
                    }
                }
                let renters = reviews.filter { $0.role == .bidder }
                if !renters.isEmpty {
                    known.change(item) { held in
                        held.reviewCount += renters.count
                        held.reviewStars += renters.reduce(0) { $0 + $1.stars }
                        held.touch(event)
                    }
                }
                plan.add(
                    ["UPDATE reviews_view SET published = true WHERE bid_id = \(published.bookingID.rawValue) AND NOT published"],
                    writes: [row])
            case .reviewsPublished(let published):
                // As a review written at once counts: its subject, and the item when the renter wrote it.
                plan.add(
                    [
                        """
                        WITH published AS (
                            UPDATE reviews_view SET published = true WHERE bid_id = \(published.bookingID.rawValue) AND NOT published
                            RETURNING subject_id, role, stars, hidden
                        ),
                        users AS (
                            UPDATE users_view u SET review_count = u.review_count + p.n, review_stars = u.review_stars + p.s
                            FROM (SELECT subject_id, count(*)::int AS n, sum(stars)::int AS s FROM published WHERE NOT hidden GROUP BY subject_id) p
                            WHERE u.user_id = p.subject_id
                        )
                        UPDATE items_view i
                        SET review_count = i.review_count + p.n, review_stars = i.review_stars + p.s, updated_at = \(at),
                            position = \(event.position)
                        FROM (SELECT count(*)::int AS n, sum(stars)::int AS s FROM published WHERE role = 'bidder' AND NOT hidden HAVING count(*) > 0) p
                        WHERE i.item_id = \(item)
                        """
                    ], writes: [row])
            case .reviewWindowClosed, .bookingReminded, .depositReleased, .depositClaimed, .disputeOpened, .disputeResolved:
                // `BookingsProjection`'s.
                break
            case .savedSearchesMatched:
                // `FeedProjection`'s.
                break
            case .reviewWritten(let review):
                var statements: [PostgresQuery] = [Self.insertReview(review, item, event, published: true)]
                if building {
                    known.count(review.subjectID) { counts in
                        counts.reviewCount += 1
                        counts.reviewStars += review.stars
                    }
                } else {
                    statements.append(
                        """
                        UPDATE users_view SET review_count = review_count + 1, review_stars = review_stars + \(review.stars)
                        WHERE user_id = \(review.subjectID.rawValue)
                        """)
                }
                // A renter's review rates the item too; an owner's rates only the renter.
                if review.role == .bidder && building {
                    known.change(item) { held in
                        held.reviewCount += 1
                        held.reviewStars += review.stars
                        held.touch(event)
                    }
                } else if review.role == .bidder {
                    statements.append(
                        """
                        UPDATE items_view SET review_count = review_count + 1, review_stars = review_stars + \(review.stars),
                               updated_at = \(at), position = \(event.position)
                        WHERE item_id = \(item)
                        """)
                }
                plan.add(statements, writes: [row])
            case .bookingCompleted(let completed) where building:
                for user in [completed.ownerID, completed.renterID] {
                    known.count(user) { $0.completedDeals += 1 }
                }
            case .bookingCompleted(let completed):
                plan.add(
                    [
                        """
                        UPDATE users_view SET completed_deals = completed_deals + 1
                        WHERE user_id IN (\(completed.ownerID.rawValue), \(completed.renterID.rawValue))
                        """
                    ], writes: [WritePlan.Row(.user, completed.ownerID.rawValue), WritePlan.Row(.user, completed.renterID.rawValue)])
            case .windowRevised(let revised) where building:
                known.change(item) { held in
                    held.from = revised.availableFrom
                    held.until = revised.availableUntil
                    held.touch(event)
                }
            case .windowRevised(let revised):
                plan.add(
                    [
                        """
                        UPDATE items_view
                        SET window_from = \(revised.availableFrom?.description)::date,
                            window_until = \(revised.availableUntil?.description)::date,
                            updated_at = \(at), position = \(event.position)
                        WHERE item_id = \(item)
                        """
                    ], writes: [row])
            case .bookingConfirmed, .bookingCancelled, .blackoutAdded, .blackoutRemoved:
                // The rows are `BookingsProjection`'s; the rental's free days changed, so a market
                // refresh (`updatedSince`) hears of it. (One case: a `where` binds only the last
                // of several patterns.)
                if building {
                    known.change(item) { $0.touch(event) }
                } else {
                    plan.add(
                        ["UPDATE items_view SET updated_at = \(at), position = \(event.position) WHERE item_id = \(item)"],
                        writes: [row])
                }
            case .reviewHidden(let hidden):
                // Out of the lists, and out of the ratings it was counted in; a held one is
                // never counted at its publication.
                let bid = hidden.bidID
                if building {
                    known.heldReviews[bid]?.removeAll { $0.role == hidden.role && $0.subject == hidden.subjectID }
                    if hidden.counted {
                        known.count(hidden.subjectID) { counts in
                            counts.reviewCount -= 1
                            counts.reviewStars -= hidden.stars
                        }
                        if hidden.role == .bidder {
                            known.change(item) { held in
                                held.reviewCount -= 1
                                held.reviewStars -= hidden.stars
                            }
                        }
                    }
                }
                var statements: [PostgresQuery] = [
                    "UPDATE reviews_view SET hidden = true WHERE bid_id = \(bid) AND role = \(hidden.role.rawValue)"
                ]
                if hidden.counted && !building {
                    statements.append(
                        """
                        UPDATE users_view SET review_count = review_count - 1, review_stars = review_stars - \(hidden.stars)
                        WHERE user_id = \(hidden.subjectID.rawValue)
                        """)
                    if hidden.role == .bidder {
                        statements.append(
                            """
                            UPDATE items_view SET review_count = review_count - 1, review_stars = review_stars - \(hidden.stars)
                            WHERE item_id = \(item)
                            """)
                    }
                }
                plan.barrier(statements)
            case .messageHidden(let hidden):
                // After the message's insert, whatever the batch: its insert keys no row.
                plan.barrier(
                    ["UPDATE messages_view SET text = \(MessageHidden.hiddenText) WHERE message_id = \(hidden.messageID.rawValue)"])
            case .messageSent(let message):
                plan.add(
                    [
                        """
                        INSERT INTO messages_view (message_id, bid_id, item_id, author_id, recipient_id, text, created_at, position)
                        VALUES (\(message.messageID.rawValue), \(message.bidID.rawValue), \(item), \(message.authorID.rawValue),
                                \(message.recipientID.rawValue), \(message.text), \(at), \(event.position))
                        ON CONFLICT (message_id) DO NOTHING
                        """
                    ], writes: [])
            }
        }
        // A build writes no item until its end, so it notes no moves.
        if moved && !building { try Self.startMoves(&session) }
        try plan.run(&session)
        try bidCounts.write(&session)
        if moved && !building { try Self.applyCellMoves(&session) }
    }

    /// A forgotten owner's items keep their listing but lose the place, texts and photos; a forgotten bidder's
    /// bids lose their message; what they wrote in reviews and messages is removed (their stars stay). Both show `former user`, in step with the sealed fields' redaction.
    private func forget(_ event: ProjectedEvent, _ plan: inout WritePlan, building: Bool, _ known: inout Memory) throws {
        guard case .forgotten(let forgotten) = try Aggregate.user.codec.decode(event) else { return }
        let user = forgotten.userID
        // Rows of any item or bid: after what came before, before what comes after.
        if building {
            known.forget(bidder: user)
            known.forget(owner: user, event)
            plan.barrier(Self.redactions(of: user))
            return
        }
        plan.barrier([
            // Their available items move to 0, 0 on the map, as the sealed places read now. A
            // cell they left that names one as its sample takes another when the moves apply.
            """
            WITH moves (item, lat, lng, delta) AS (
                SELECT item_id, lat, lng, -1 FROM items_view WHERE owner_id = \(user) AND status = 'available'
                UNION ALL
                SELECT item_id, 0, 0, 1 FROM items_view WHERE owner_id = \(user) AND status = 'available'
            )
            \(unsafeRaw: Self.noteMoves)
            """,
            """
            UPDATE items_view SET owner_handle = \(Redacted.name), lat = 0, lng = 0, place = \(Redacted.text),
                   title = \(Redacted.text), description = \(Redacted.text), photos = '{}',
                   updated_at = \(event.recordedAt), position = \(event.position)
            WHERE owner_id = \(user)
            """,
        ] + Self.redactions(of: user))
    }

    /// What a forgotten person wrote on others' rows, redacted: their bids' handle and message,
    /// their reviews' and messages' text.
    private static func redactions(of user: UserID) -> [PostgresQuery] {
        [
            """
            UPDATE bids_view SET bidder_handle = \(Redacted.name),
                   message = CASE WHEN message IS NULL THEN NULL ELSE \(Redacted.text) END
            WHERE bidder_id = \(user)
            """,
            "UPDATE reviews_view SET text = \(Redacted.text) WHERE author_id = \(user)",
            "UPDATE messages_view SET text = \(Redacted.text) WHERE author_id = \(user)",
        ]
    }

    /// A new status; in or out of the market's cells when it becomes or stops being available.
    /// `deal`: the bidder of the deal it is reserved for (`.some(nil)`: none any more); nil
    /// keeps it.
    private func setStatus(
        _ plan: inout WritePlan, _ item: ItemID?, _ status: ItemStatus, _ event: ProjectedEvent, deal: UserID?? = nil, building: Bool,
        _ known: inout Memory
    ) {
        if building {
            known.change(item) { held in
                if !Self.keepsStatus(held.kind, status, dealSet: deal != nil) { held.status = status }
                if let deal { held.deal = deal }
                held.touch(event)
            }
            return
        }
        plan.add(
            Self.setStatuses, [item, status.rawValue, event.recordedAt, event.position, deal != nil, deal ?? nil],
            writes: [WritePlan.Row(.item, item)])
    }

    /// A review into `reviews_view`, shown at once or held for its booking's publication.
    static func insertReview(_ review: ReviewWritten, _ item: ItemID?, _ event: ProjectedEvent, published: Bool) -> PostgresQuery {
        """
        INSERT INTO reviews_view (bid_id, role, item_id, author_id, subject_id, stars, text, created_at, position, published)
        VALUES (\(review.bidID.rawValue), \(review.role.rawValue), \(item), \(review.authorID.rawValue),
                \(review.subjectID.rawValue), \(review.stars), \(review.text), \(event.recordedAt), \(event.position), \(published))
        ON CONFLICT (bid_id, role) DO NOTHING
        """
    }

    /// A rental is booked by date and stays available: a second release's reservation,
    /// closing and relisting of one (`deal` set, or `reserved` and `closed`) leave its status,
    /// as `setStatuses` does.
    static func keepsStatus(_ kind: ItemKind, _ status: ItemStatus, dealSet: Bool) -> Bool {
        kind == .rental && (dealSet || status == .reserved || status == .closed)
    }

    /// A bid's fate; in a build, a bid still held is written now, decided, by COPY.
    private func setBid(
        _ plan: inout WritePlan, _ bid: BidID, _ status: BidStatus, reason: String?, _ event: ProjectedEvent, building: Bool,
        _ known: inout Memory
    ) {
        if building, var held = known.held.removeValue(forKey: bid) {
            (held.status, held.reason, held.updatedAt) = (status, reason, event.recordedAt)
            plan.add(copy: BidRow.table.target, BidRow.table.values(held), writes: [WritePlan.Row(.bid, bid.rawValue)])
            return
        }
        plan.add(
            Self.setBids, [bid.rawValue, status.rawValue, reason, event.recordedAt], writes: [WritePlan.Row(.bid, bid.rawValue)])
    }
}
