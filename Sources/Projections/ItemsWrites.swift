import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres
import UUIDs

/// The items projection's set-based writes and the market cells' moves (`ItemsProjection`).
extension ItemsProjection {
    // MARK: The fold's writes. Each finds its rows by key (`= ANY`), so a batch is never a
    // scan of a whole view: a rebuild's tables have no statistics to stop the planner
    // choosing one.

    /// Items the fold made. (`ON CONFLICT`: a posting makes its stream, so an id is never
    /// posted twice; were it, the first posting stays, as a build keeps it.)
    static let insertItems = ItemRow.table.insert("insert items") { "\($0)\nON CONFLICT (item_id) DO NOTHING" }

    /// Fates for bids a build copied already (`Rows.decide`).
    static let lateFates = BidRow.table.update(BidRow.table.indices("status", "reason", "updated_at"), key: ["bid_id"])

    /// Bids the fold made: the first placing of an id stays (the fold reads no bid it does
    /// not decide).
    static let insertBids = BidRow.table.insert("insert bids") { "\($0)\nON CONFLICT (bid_id) DO NOTHING" }

    /// A review, shown at once or held for its booking's publication, and a message: each
    /// statement its event's, in the events' order, before what publishes, hides or redacts it.
    static let insertReviews = ReviewRow.table.insert("insert reviews") { "\($0)\nON CONFLICT (bid_id, role) DO NOTHING" }
    static let insertMessages = MessageRow.table.insert("insert messages") { "\($0)\nON CONFLICT (message_id) DO NOTHING" }

    /// What a forgotten person wrote on rows the fold does not hold, redacted as it redacts
    /// those it holds: their bids' handle and message, their reviews' and messages' text.
    static func redactions(of user: UserID) -> [PostgresQuery] {
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

    /// The batch's deals and ratings added to their users' rows (the users projection's,
    /// written before: its fold never changes these columns), one statement.
    static func count(_ counts: [UserID: UserCounts], _ session: inout PostgresSession) throws {
        var users = PostgresBatchColumn(), deals = PostgresBatchColumn(), reviews = PostgresBatchColumn()
        var stars = PostgresBatchColumn()
        var any = false
        for (user, counted) in counts where counted.completedDeals != 0 || counted.reviewCount != 0 || counted.reviewStars != 0 {
            users.append(user)
            deals.append(counted.completedDeals)
            reviews.append(counted.reviewCount)
            stars.append(counted.reviewStars)
            any = true
        }
        guard any else { return }
        try session.query(
            """
            UPDATE users_view u
            SET completed_deals = u.completed_deals + c.deals, review_count = u.review_count + c.reviews,
                review_stars = u.review_stars + c.stars
            FROM unnest(\(users)::uuid[], \(deals)::int4[], \(reviews)::int4[], \(stars)::int4[]) AS c(user_id, deals, reviews, stars)
            WHERE u.user_id = c.user_id AND u.user_id = ANY (\(users)::uuid[])
            """, prepared: true)
    }

    /// A row of `market_cells`: the available items in one cell of one level of the map's grid,
    /// their places summed (in 1e-7 degrees) and the least id among them. `table` is its one
    /// declaration. No Swift code holds one: the cells are worked out by SQL from the items'
    /// places, at a build's end and from each batch's moves (`move`), and read summed by the
    /// map's clusters (`ItemsView.clusters`); the declaration names their columns for both.
    struct MarketCellRow: Sendable {
        var level = 0
        var cellX = 0
        var cellY = 0
        var count = 0
        var sumLat = 0
        var sumLng = 0
        var sample = ItemID.none

        static let table = ViewTable<MarketCellRow>(
            "market_cells", blank: MarketCellRow(),
            [
                ViewColumn("level", "smallint", \.level),
                ViewColumn("cell_x", "integer", \.cellX),
                ViewColumn("cell_y", "integer", \.cellY),
                ViewColumn("count", "integer", \.count),
                ViewColumn("sum_lat", "bigint", \.sumLat),
                ViewColumn("sum_lng", "bigint", \.sumLng),
                ViewColumn("sample", "uuid", \.sample),
            ])
    }

    /// The kept cells' levels, as `market_cells` keeps them (migration 0021).
    static let cellLevels = "'{4,6,8,10,12,14,16}'::smallint[]"

    /// The batch's moves applied to the cells set-based (migration 0022): each cell touched
    /// gets its count and sums changed once; an emptied one goes; one whose sample left it
    /// (no longer available, or moved away) takes its least available item again. The least
    /// id of a set that lost items is found again only when it was the one lost, so a cell's
    /// sample is the least of its items whatever order they came in: a rebuild makes the same
    /// rows. After the items are written: a sample is found among them.
    static func move(_ moves: CellMoves, _ session: inout PostgresSession) throws {
        guard !moves.isEmpty else { return }
        let bindings = moves.columns.map(\.postgresBinding)
        // Each move's position worked out once, not at each level; lat and lng in 1e-7
        // degrees, integers, as the rebuild sums them.
        let m = """
            WITH m AS MATERIALIZED (
                SELECT item, mercator_x(lng) AS x, mercator_y(lat) AS y, round(lat * 1e7)::int8 AS lat7,
                       round(lng * 1e7)::int8 AS lng7, delta
                FROM unnest($1::uuid[], $2::float8[], $3::float8[], $4::int4[]) AS r(item, lat, lng, delta))
            """
        // A cell only items left had a row already; its proposed sample (the greatest uuid,
        // never an item's) is one `least` passes over.
        try session.query(
            PostgresQuery(
                unsafeSQL: """
                    \(m)
                    INSERT INTO \(MarketCellRow.table.name) AS c (\(MarketCellRow.table.selectList()))
                    SELECT l, m.x >> (24 - l), m.y >> (24 - l), sum(m.delta), sum(m.delta * m.lat7), sum(m.delta * m.lng7),
                           coalesce((array_agg(m.item ORDER BY m.item) FILTER (WHERE m.delta > 0))[1], 'ffffffff-ffff-ffff-ffff-ffffffffffff')
                    FROM m, unnest(\(cellLevels)) AS l
                    GROUP BY 1, 2, 3
                    ON CONFLICT (level, cell_x, cell_y) DO UPDATE
                    SET count = c.count + excluded.count, sum_lat = c.sum_lat + excluded.sum_lat,
                        sum_lng = c.sum_lng + excluded.sum_lng, sample = least(c.sample, excluded.sample)
                    """, bindings: bindings), prepared: true)
        // Only a cell an item left can empty or lose its sample: arrivals keep the least id
        // by the upsert's `least`, so a batch of postings skips the two statements.
        guard moves.anyLeft else { return }
        let left = """
            \(m)
            SELECT DISTINCT l AS level, m.x >> (24 - l) AS cell_x, m.y >> (24 - l) AS cell_y
            FROM m, unnest(\(cellLevels)) AS l WHERE m.delta < 0
            """
        try session.query(
            PostgresQuery(
                unsafeSQL: """
                    DELETE FROM market_cells c USING (\(left)) t
                    WHERE (c.level, c.cell_x, c.cell_y) = (t.level, t.cell_x, t.cell_y) AND c.count <= 0
                    """, bindings: bindings), prepared: true)
        try session.query(
            PostgresQuery(
                unsafeSQL: """
                    UPDATE market_cells c SET sample = coalesce((
                        SELECT i.item_id FROM items_view i
                        WHERE i.status = 'available'
                          AND i.map_x BETWEEN c.cell_x << (24 - c.level) AND ((c.cell_x + 1) << (24 - c.level)) - 1
                          AND i.map_y BETWEEN c.cell_y << (24 - c.level) AND ((c.cell_y + 1) << (24 - c.level)) - 1
                        ORDER BY i.item_id LIMIT 1), c.sample)
                    FROM (\(left)) t
                    WHERE (c.level, c.cell_x, c.cell_y) = (t.level, t.cell_x, t.cell_y)
                      AND NOT EXISTS (
                        SELECT FROM items_view i
                        WHERE i.item_id = c.sample AND i.status = 'available'
                          AND i.map_x BETWEEN c.cell_x << (24 - c.level) AND ((c.cell_x + 1) << (24 - c.level)) - 1
                          AND i.map_y BETWEEN c.cell_y << (24 - c.level) AND ((c.cell_y + 1) << (24 - c.level)) - 1)
                    """, bindings: bindings), prepared: true)
    }
}

/// A batch's moves of items in and out of the market's cells, from each item's row before
/// and after it: an item is in the cells of its place while it is available, and nowhere
/// else. Left (-1) where it was, arrived (+1) where it is, when the two differ.
struct CellMoves {
    private(set) var columns = Array(repeating: PostgresBatchColumn(), count: 4)
    private(set) var isEmpty = true
    /// Whether an item left a cell.
    private(set) var anyLeft = false

    init(before: [ItemID: ItemRow], after: [ItemID: ItemsProjection.HeldItem]) {
        for (id, held) in after {
            let was = before[id].flatMap { $0.status == .available ? ($0.location.lat, $0.location.lng) : nil }
            let now = held.row.status == .available ? (held.row.location.lat, held.row.location.lng) : nil
            if let was, let now, was == now { continue }
            if let was {
                add(id, was, -1)
                anyLeft = true
            }
            if let now { add(id, now, 1) }
        }
    }

    private mutating func add(_ item: ItemID, _ place: (Double, Double), _ delta: Int) {
        columns[0].append(item)
        columns[1].append(place.0)
        columns[2].append(place.1)
        columns[3].append(delta)
        isEmpty = false
    }
}
