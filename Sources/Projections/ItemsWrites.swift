import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres
import UUIDs

/// The items projection's set-based writes and the market cells' moves (`ItemsProjection`).
extension ItemsProjection {
    /// The cell moves of a batch are noted in a setting of its transaction,
    /// `lender.cell_moves`, by each statement that moves items (`noteMoves`), and read at the
    /// batch's end (`notedMoves`). A setting made with `set_config(…, true)` ends with its
    /// transaction, leaves nothing behind, and is no one else's.
    ///
    /// They went through a shared table before (migration 0022), emptied by `DELETE`: its dead
    /// rows stayed until autovacuum came (once a minute at most, and never while an older
    /// snapshot is open, a backup's), and each batch's reads walked them all. In 60 s of
    /// postings the four statements that read it went from 530 µs a batch to 1.6 ms, a third
    /// of the flusher's serial time, over 1,010 pages. A temporary table of each session had
    /// no dead rows, but emptied at commit it keeps the transaction id it was made in, and
    /// held back the whole database's freezing for as long as its session lived.
    ///
    /// Each batch that moves items starts afresh here, its moves to be read at its end. A build
    /// from the first event notes none: it writes its items at its end, and makes its cells
    /// from them.
    static func startMoves(_ session: inout PostgresSession) throws {
        try session.query("SELECT set_config('lender.cell_moves', '', true)", prepared: true)
    }

    /// The end of a statement whose last common table is `moves (item, lat, lng, delta)`: those
    /// moves appended to the batch's (`startMoves`) as JSON arrays `[item, map x, map y, lat
    /// and lng in 1e-7 degrees, delta]`, comma-separated. Integers, so they read back exactly
    /// whatever `extra_float_digits` says, and each move's position is worked out once, not at
    /// each level. Appended as text, the noted moves are not read again until the batch's end;
    /// a statement that moves nothing leaves the setting alone. The statement's writes happen
    /// either way (data-modifying common tables always run to the end), and it answers one
    /// boolean, not the setting.
    static let noteMoves = """
        SELECT set_config('lender.cell_moves', concat_ws(',', nullif(current_setting('lender.cell_moves', true), ''), (
                   SELECT string_agg(jsonb_build_array(item, mercator_x(lng), mercator_y(lat), round(lat * 1e7)::int8,
                                                       round(lng * 1e7)::int8, delta)::text, ',')
                   FROM moves)), true) IS NULL
        WHERE EXISTS (SELECT FROM moves)
        """

    /// The batch's moves as the rows of `m` (item, x, y, lat7, lng7, delta), read out of the
    /// setting once (`MATERIALIZED`, so that no use of a column reads the JSON again).
    static let notedMoves = """
        WITH m AS MATERIALIZED (
            SELECT (e ->> 0)::uuid AS item, (e ->> 1)::int4 AS x, (e ->> 2)::int4 AS y, (e ->> 3)::int8 AS lat7,
                   (e ->> 4)::int8 AS lng7, (e ->> 5)::int4 AS delta
            FROM jsonb_array_elements(('[' || coalesce(current_setting('lender.cell_moves', true), '') || ']')::jsonb) AS e)
        """

    // MARK: Set-based writes. Each row finds what it reads by key (a correlated subquery, or
    // `= ANY` beside a join), so a batch is never a scan of a whole view: a rebuild's tables
    // have no statistics to stop the planner choosing one.

    /// New items (`ItemRow(posted:)`), each with its owner's handle (empty when not yet in
    /// `users_view`), into the market's cells.
    static let insertItems = ItemRow.table.insert(
        "insert items", computed: ["owner_handle": "coalesce((SELECT handle FROM users_view WHERE user_id = r.owner_id), '')"]
    ) { insert in
        """
        WITH inserted AS (
            \(insert)
            ON CONFLICT (item_id) DO NOTHING
            RETURNING item_id, lat, lng
        ),
        moves (item, lat, lng, delta) AS (SELECT item_id, lat, lng, 1 FROM inserted)
        \(noteMoves)
        """
    }

    /// New statuses (and deals: `deal_set`), each item in or out of the market's cells when it
    /// becomes or stops being available.
    static let setStatuses = SetWrite("set item statuses", width: 6) { c in
        // The old status read in the update's own snapshot, by key, row by row.
        """
        WITH changed AS (
            UPDATE items_view i
            SET status = CASE WHEN i.kind = 'rental' AND (r.deal_set OR r.status IN ('reserved', 'closed')) THEN i.status
                              ELSE r.status END,
                updated_at = r.at, position = r.position,
                   deal_bidder_id = CASE WHEN r.deal_set THEN r.deal ELSE i.deal_bidder_id END
            FROM (
                SELECT r.*, old.status AS old_status
                FROM unnest(\(c[0])::uuid[], \(c[1])::text[], \(c[2])::timestamptz[], \(c[3])::int8[], \(c[4])::bool[],
                            \(c[5])::uuid[]) AS r(item, status, at, position, deal_set, deal),
                     LATERAL (SELECT status FROM items_view WHERE item_id = r.item OFFSET 0) old
            ) r
            WHERE i.item_id = r.item AND i.item_id = ANY (\(c[0])::uuid[])
            RETURNING i.item_id, i.status, i.lat, i.lng, r.old_status
        ),
        moves (item, lat, lng, delta) AS (
            SELECT item_id, lat, lng, CASE WHEN status = 'available' THEN 1 ELSE -1 END FROM changed
            WHERE (old_status = 'available') <> (status = 'available')
        )
        \(unsafeRaw: noteMoves)
        """
    }

    /// A completed deal for both parties of each item: its owner and the bidder it was
    /// reserved for, once each per item.
    static let completeDeals = SetWrite("complete deals", width: 1) { c in
        """
        WITH deals AS (
            SELECT p.user_id, count(*) AS n
            FROM unnest(\(c[0])::uuid[]) AS r(item),
                 LATERAL (SELECT owner_id, deal_bidder_id FROM items_view WHERE item_id = r.item OFFSET 0) i,
                 LATERAL (SELECT DISTINCT u FROM (VALUES (i.owner_id), (i.deal_bidder_id)) AS v(u) WHERE u IS NOT NULL) AS p(user_id)
            GROUP BY p.user_id
        )
        UPDATE users_view u SET completed_deals = u.completed_deals + deals.n
        FROM deals WHERE u.user_id = deals.user_id AND u.user_id = ANY (ARRAY(SELECT user_id FROM deals))
        """
    }

    /// New bids (`BidRow(placed:)`), each with its item's owner and its bidder's handle (empty
    /// when not yet in `users_view`).
    static let insertBids = BidRow.table.insert(
        "insert bids",
        computed: [
            "owner_id": "(SELECT owner_id FROM items_view WHERE item_id = r.item_id)",
            "bidder_handle": "coalesce((SELECT handle FROM users_view WHERE user_id = r.bidder_id), '')",
        ]
    ) { insert in "\(insert)\nON CONFLICT (bid_id) DO NOTHING" }

    /// Bids' new statuses.
    static let setBids = SetWrite("set bid statuses", width: 4) { c in
        """
        UPDATE bids_view b SET status = r.status, reason = r.reason, updated_at = r.at
        FROM unnest(\(c[0])::uuid[], \(c[1])::text[], \(c[2])::text[], \(c[3])::timestamptz[]) AS r(bid, status, reason, at)
        WHERE b.bid_id = r.bid AND b.bid_id = ANY (\(c[0])::uuid[])
        """
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
            \(notedMoves)
            SELECT DISTINCT l AS level, m.x >> (24 - l) AS cell_x, m.y >> (24 - l) AS cell_y
            FROM m, unnest(\(cellLevels)) AS l WHERE m.delta < 0
            """
        // A cell only items left had a row already; its proposed sample (the greatest uuid,
        // never an item's) is one `least` passes over.
        try session.query(
            """
            \(unsafeRaw: notedMoves)
            INSERT INTO market_cells AS c (level, cell_x, cell_y, count, sum_lat, sum_lng, sample)
            SELECT l, m.x >> (24 - l), m.y >> (24 - l), sum(m.delta), sum(m.delta * m.lat7), sum(m.delta * m.lng7),
                   coalesce((array_agg(m.item ORDER BY m.item) FILTER (WHERE m.delta > 0))[1], 'ffffffff-ffff-ffff-ffff-ffffffffffff')
            FROM m, unnest(\(unsafeRaw: cellLevels)) AS l
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
    }
}

/// Each item's new bids in a batch, counted once at its end: one statement for the batch
/// rather than one a bid. Nothing here reads the count meanwhile; `updated_at` and
/// `position` become the last bid's only where no later event of the batch set them (every
/// statement that sets one sets both), so the row ends as event by event.
struct BidCounts {
    private var items: [ItemID: (bids: Int, at: Date, position: Int64)] = [:]

    mutating func add(_ item: ItemID?, _ event: ProjectedEvent) {
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
