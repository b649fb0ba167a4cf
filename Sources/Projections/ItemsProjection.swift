import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// `items_view`, `bids_view`, `reviews_view` and `messages_view`: every item, bid, review and
/// message as clients read them, and the ratings they add up to in `users_view`.
///
/// Total, like `evolve`: a valid event never fails here. A handle not (yet) in
/// `users_view` is written as empty rather than refusing the event.
public struct ItemsProjection: InlineProjection {
    public let name = "items"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        // Whether an event may have noted a move in or out of the market's cells.
        var moved = false
        var bidCounts = BidCounts()
        for event in events {
            if event.type == UserForgotten.eventType {
                try forget(event, &session)
                moved = true
                continue
            }
            guard Aggregate.item.owns(event.streamID) else { continue }
            let item = UUID(uuidString: String(event.streamID.rawValue.dropFirst("item-".count)))
            let at = event.recordedAt
            let decoded = try Aggregate.item.codec.decode(event)
            switch decoded {
            case .rentalPosted, .requestPosted, .revised, .withdrawn, .reserved, .closed, .relisted: moved = true
            default: break
            }
            switch decoded {
            case .rentalPosted(let posted):
                try insertItem(
                    &session, id: posted.itemID, kind: .rental, owner: posted.ownerID, title: posted.title,
                    description: posted.description, category: posted.category, price: posted.dailyPriceCents,
                    location: posted.location, from: posted.availableFrom, until: posted.availableUntil, event: event)
            case .requestPosted(let posted):
                try insertItem(
                    &session, id: posted.itemID, kind: .request, owner: posted.ownerID, title: posted.title,
                    description: posted.description, category: posted.category, price: posted.maxDailyPriceCents,
                    location: posted.location, from: posted.neededFrom, until: posted.neededUntil, event: event)
            case .revised(let revised):
                // Moved while available: out of its old cells, into its new ones (one statement:
                // projections are pipelined, and read no answers).
                try session.query(
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
                    )
                    INSERT INTO market_cell_moves (item, lat, lng, delta)
                    SELECT \(item), old.lat, old.lng, -1 FROM old, changed
                    WHERE changed.status = 'available' AND (old.lat, old.lng) <> (changed.lat, changed.lng)
                    UNION ALL
                    SELECT \(item), changed.lat, changed.lng, 1 FROM old, changed
                    WHERE changed.status = 'available' AND (old.lat, old.lng) <> (changed.lat, changed.lng)
                    """, prepared: true)
            case .withdrawn:
                try setStatus(&session, item, .withdrawn, event)
            case .reserved(let reserved):
                try setStatus(&session, item, .reserved, event, deal: .some(reserved.bidderID.rawValue))
            case .closed:
                try setStatus(&session, item, .closed, event)
                // A completed deal for both parties: the owner and the bidder it was reserved
                // for. Each found by key: an `IN` over a `UNION` could be planned as a scan of
                // `users_view`, and a rebuild's tables have no statistics to stop it.
                try session.query(
                    """
                    UPDATE users_view SET completed_deals = completed_deals + 1
                    WHERE user_id = (SELECT owner_id FROM items_view WHERE item_id = \(item))
                       OR user_id = (SELECT deal_bidder_id FROM items_view WHERE item_id = \(item))
                    """, prepared: true)
            case .relisted:
                try setStatus(&session, item, .available, event, deal: .some(nil))
            case .photoAdded(let added):
                try Gallery.items.add(added.digest, to: item, event, &session)
            case .photoRemoved(let removed):
                try Gallery.items.remove(removed.digest, from: item, event, &session)
            case .bidPlaced(let placed):
                try session.query(
                    """
                    INSERT INTO bids_view (bid_id, item_id, owner_id, bidder_id, bidder_handle, daily_price_cents, from_day,
                                           until_day, message, status, created_at, updated_at)
                    VALUES (\(placed.bidID.rawValue), \(item), (SELECT owner_id FROM items_view WHERE item_id = \(item)),
                            \(placed.bidderID.rawValue),
                            coalesce((SELECT handle FROM users_view WHERE user_id = \(placed.bidderID.rawValue)), ''),
                            \(placed.dailyPriceCents), \(placed.from.description)::date, \(placed.until.description)::date,
                            \(placed.message), 'pending', \(at), \(at))
                    ON CONFLICT (bid_id) DO NOTHING
                    """, prepared: true)
                bidCounts.add(item, event)
            case .bidWithdrawn(let withdrawn):
                try setBid(&session, withdrawn.bidID, .withdrawn, reason: nil, event)
            case .bidRejected(let rejected):
                try setBid(&session, rejected.bidID, .rejected, reason: rejected.reason, event)
            case .bidApproved(let approved):
                try setBid(&session, approved.bidID, .approved, reason: nil, event)
            case .reviewWritten(let review):
                try session.query(
                    """
                    INSERT INTO reviews_view (bid_id, role, item_id, author_id, subject_id, stars, text, created_at, position)
                    VALUES (\(review.bidID.rawValue), \(review.role.rawValue), \(item), \(review.authorID.rawValue),
                            \(review.subjectID.rawValue), \(review.stars), \(review.text), \(at), \(event.position))
                    ON CONFLICT (bid_id, role) DO NOTHING
                    """, prepared: true)
                try session.query(
                    """
                    UPDATE users_view SET review_count = review_count + 1, review_stars = review_stars + \(review.stars)
                    WHERE user_id = \(review.subjectID.rawValue)
                    """, prepared: true)
                // A renter's review rates the item too; an owner's rates only the renter.
                if review.role == .bidder {
                    try session.query(
                        """
                        UPDATE items_view SET review_count = review_count + 1, review_stars = review_stars + \(review.stars),
                               updated_at = \(at), position = \(event.position)
                        WHERE item_id = \(item)
                        """, prepared: true)
                }
            case .messageSent(let message):
                try session.query(
                    """
                    INSERT INTO messages_view (message_id, bid_id, item_id, author_id, recipient_id, text, created_at, position)
                    VALUES (\(message.messageID.rawValue), \(message.bidID.rawValue), \(item), \(message.authorID.rawValue),
                            \(message.recipientID.rawValue), \(message.text), \(at), \(event.position))
                    ON CONFLICT (message_id) DO NOTHING
                    """, prepared: true)
            }
        }
        try bidCounts.write(&session)
        if moved { try Self.applyCellMoves(&session) }
    }

    /// A forgotten owner's items keep their listing but lose the place; a forgotten bidder's
    /// bids lose their message; what they wrote in reviews and messages is removed (their stars stay). Both show `former user`, in step with the sealed fields' redaction.
    private func forget(_ event: ProjectedEvent, _ session: inout PostgresSession) throws {
        guard case .forgotten(let forgotten) = try Aggregate.user.codec.decode(event) else { return }
        let user = forgotten.userID.rawValue
        // Their available items move to 0, 0 on the map, as the sealed places read now. A
        // cell they left that names one as its sample takes another when the moves apply.
        try session.query(
            """
            INSERT INTO market_cell_moves (item, lat, lng, delta)
            SELECT item_id, lat, lng, -1 FROM items_view WHERE owner_id = \(user) AND status = 'available'
            UNION ALL
            SELECT item_id, 0, 0, 1 FROM items_view WHERE owner_id = \(user) AND status = 'available'
            """, prepared: true)
        try session.query(
            """
            UPDATE items_view SET owner_handle = \(Redacted.name), lat = 0, lng = 0, place = \(Redacted.text),
                   updated_at = \(event.recordedAt), position = \(event.position)
            WHERE owner_id = \(user)
            """, prepared: true)
        try session.query(
            """
            UPDATE bids_view SET bidder_handle = \(Redacted.name),
                   message = CASE WHEN message IS NULL THEN NULL ELSE \(Redacted.text) END
            WHERE bidder_id = \(user)
            """, prepared: true)
        try session.query("UPDATE reviews_view SET text = \(Redacted.text) WHERE author_id = \(user)", prepared: true)
        try session.query("UPDATE messages_view SET text = \(Redacted.text) WHERE author_id = \(user)", prepared: true)
    }

    private func insertItem(
        _ session: inout PostgresSession, id: ItemID, kind: ItemKind, owner: UserID, title: String, description: String,
        category: Marketplace.Category, price: Int?, location: Location, from: Day?, until: Day?, event: ProjectedEvent
    ) throws {
        try session.query(
            """
            WITH inserted AS (
            INSERT INTO items_view (item_id, kind, owner_id, owner_handle, title, description, category, price_cents,
                                    lat, lng, place, window_from, window_until, status, created_at, updated_at, position)
            VALUES (\(id.rawValue), \(kind.rawValue), \(owner.rawValue),
                    coalesce((SELECT handle FROM users_view WHERE user_id = \(owner.rawValue)), ''),
                    \(title), \(description), \(category.rawValue), \(price), \(location.lat), \(location.lng),
                    \(location.place), \(from?.description)::date, \(until?.description)::date, 'available',
                    \(event.recordedAt), \(event.recordedAt), \(event.position))
            ON CONFLICT (item_id) DO NOTHING
            RETURNING item_id, lat, lng
            )
            INSERT INTO market_cell_moves (item, lat, lng, delta) SELECT item_id, lat, lng, 1 FROM inserted
            """, prepared: true)
    }

    /// A new status; in or out of the market's cells when it becomes or stops being available.
    /// `deal`: the bidder of the deal it is reserved for (`.some(nil)`: none any more); nil
    /// keeps it.
    private func setStatus(
        _ session: inout PostgresSession, _ item: UUID?, _ status: ItemStatus, _ event: ProjectedEvent, deal: UUID?? = nil
    ) throws {
        try session.query(
            """
            WITH old AS (SELECT status FROM items_view WHERE item_id = \(item)),
            changed AS (
                UPDATE items_view SET status = \(status.rawValue), updated_at = \(event.recordedAt), position = \(event.position),
                       deal_bidder_id = CASE WHEN \(deal != nil) THEN \(deal ?? nil)::uuid ELSE deal_bidder_id END
                WHERE item_id = \(item)
                RETURNING status, lat, lng
            )
            INSERT INTO market_cell_moves (item, lat, lng, delta)
            SELECT \(item), changed.lat, changed.lng, CASE WHEN changed.status = 'available' THEN 1 ELSE -1 END
            FROM old, changed
            WHERE (old.status = 'available') <> (changed.status = 'available')
            """, prepared: true)
    }

    private func setBid(
        _ session: inout PostgresSession, _ bid: BidID, _ status: BidStatus, reason: String?, _ event: ProjectedEvent
    ) throws {
        try session.query(
            """
            UPDATE bids_view SET status = \(status.rawValue), reason = \(reason), updated_at = \(event.recordedAt)
            WHERE bid_id = \(bid.rawValue)
            """, prepared: true)
    }

    /// The kept cells' levels, as `market_cells` keeps them (migration 0021).
    static let cellLevels = "'{4,6,8,10,12,14,16}'::smallint[]"

    /// The moves the batch noted, applied to the cells set-based (migration 0022): each cell
    /// touched gets its count and sums changed once; an emptied one goes; one whose sample
    /// left it (no longer available, or moved away) takes its least available item again.
    /// The least id of a set that lost items is found again only when it was the one lost,
    /// so a cell's sample is the least of its items whatever order they came in: a rebuild
    /// makes the same rows.
    static func applyCellMoves(_ session: inout PostgresSession) throws {
        // Only a cell an item left can empty or lose its sample: arrivals keep the least id
        // by the upsert's `least`, so a batch of postings skips the two statements' work.
        let left = """
            SELECT DISTINCT l AS level, mercator_x(m.lng) >> (24 - l) AS cell_x, mercator_y(m.lat) >> (24 - l) AS cell_y
            FROM market_cell_moves m, unnest(\(cellLevels)) AS l WHERE m.delta < 0
            """
        // A cell only items left had a row already; its proposed sample (the greatest uuid,
        // never an item's) is one `least` passes over.
        try session.query(
            """
            INSERT INTO market_cells AS c (level, cell_x, cell_y, count, sum_lat, sum_lng, sample)
            SELECT l, mercator_x(m.lng) >> (24 - l), mercator_y(m.lat) >> (24 - l), sum(m.delta),
                   sum(m.delta * round(m.lat * 1e7)::bigint), sum(m.delta * round(m.lng * 1e7)::bigint),
                   coalesce((array_agg(m.item ORDER BY m.item) FILTER (WHERE m.delta > 0))[1], 'ffffffff-ffff-ffff-ffff-ffffffffffff')
            FROM market_cell_moves m, unnest(\(unsafeRaw: cellLevels)) AS l
            GROUP BY 1, 2, 3
            ON CONFLICT (level, cell_x, cell_y) DO UPDATE
            SET count = c.count + excluded.count, sum_lat = c.sum_lat + excluded.sum_lat,
                sum_lng = c.sum_lng + excluded.sum_lng, sample = least(c.sample, excluded.sample)
            """, prepared: true)
        try session.query(
            """
            DELETE FROM market_cells c USING (\(unsafeRaw: left)) t
            WHERE (c.level, c.cell_x, c.cell_y) = (t.level, t.cell_x, t.cell_y) AND c.count <= 0
            """, prepared: true)
        try session.query(
            """
            UPDATE market_cells c SET sample = coalesce((
                SELECT i.item_id FROM items_view i
                WHERE i.status = 'available'
                  AND i.map_x BETWEEN c.cell_x << (24 - c.level) AND ((c.cell_x + 1) << (24 - c.level)) - 1
                  AND i.map_y BETWEEN c.cell_y << (24 - c.level) AND ((c.cell_y + 1) << (24 - c.level)) - 1
                ORDER BY i.item_id LIMIT 1), c.sample)
            FROM (\(unsafeRaw: left)) t
            WHERE (c.level, c.cell_x, c.cell_y) = (t.level, t.cell_x, t.cell_y)
              AND NOT EXISTS (
                SELECT FROM items_view i
                WHERE i.item_id = c.sample AND i.status = 'available'
                  AND i.map_x BETWEEN c.cell_x << (24 - c.level) AND ((c.cell_x + 1) << (24 - c.level)) - 1
                  AND i.map_y BETWEEN c.cell_y << (24 - c.level) AND ((c.cell_y + 1) << (24 - c.level)) - 1)
            """, prepared: true)
        try session.query("DELETE FROM market_cell_moves", prepared: true)
    }
}

/// Each item's new bids in a batch, counted once at its end: one statement for the batch
/// rather than one a bid. Nothing here reads the count meanwhile; `updated_at` and
/// `position` become the last bid's only where no later event of the batch set them (every
/// statement that sets one sets both), so the row ends as event by event.
private struct BidCounts {
    private var items: [UUID: (bids: Int, at: Date, position: Int64)] = [:]

    mutating func add(_ item: UUID?, _ event: ProjectedEvent) {
        guard let item else { return }
        items[item] = ((items[item]?.bids ?? 0) + 1, event.recordedAt, event.position)
    }

    /// The rows found by key (`= ANY`), so a batch's few items are never a scan of them all.
    func write(_ session: inout PostgresSession) throws {
        guard !items.isEmpty else { return }
        var ids = PostgresBatchColumn(), counts = PostgresBatchColumn(), times = PostgresBatchColumn()
        var positions = PostgresBatchColumn()
        for (item, count) in items {
            ids.append(item)
            counts.append(count.bids)
            times.append(count.at)
            positions.append(count.position)
        }
        try session.query(
            """
            UPDATE items_view i
            SET bid_count = i.bid_count + c.bids,
                updated_at = CASE WHEN c.position > i.position THEN c.at ELSE i.updated_at END,
                position = greatest(i.position, c.position)
            FROM unnest(\(ids)::uuid[], \(counts)::int4[], \(times)::timestamptz[], \(positions)::int8[])
                 AS c(item, bids, at, position)
            WHERE i.item_id = c.item AND i.item_id = ANY (\(ids)::uuid[])
            """, prepared: true)
    }
}
