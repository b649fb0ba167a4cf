import Foundation
import Marketplace
import Postgres
import Synchronization

/// Reads of `items_view` and `bids_view`, which `ItemsProjection` writes.
public struct ItemsView: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    /// The item; `item_not_found` when there is none.
    public func item(_ id: ItemID, position: Int64? = nil) async throws -> ItemResource {
        let rows = try await pool.query(
            "SELECT \(unsafeRaw: ItemResource.columns), NULL::float8 AS distance_km FROM items_view WHERE item_id = \(id.rawValue)",
            prepared: true)
        guard let row = rows.first else { throw DomainError.itemNotFound }
        return try ItemResource(row, position: position)
    }

    /// A user's handle, as a posting writes it beside its item. Handles never change, so
    /// each is read once per process (a forgotten user's stays too, and posts nothing).
    public func handle(of user: UserID) async throws -> String {
        if let handle = Self.handles.withLock({ $0[user] }) { return handle }
        let rows = try await pool.query("SELECT handle FROM users_view WHERE user_id = \(user.rawValue)", prepared: true)
        // No user yet: written as empty, as the projection writes it, and not kept.
        guard let handle = try rows.first?.decode("handle", as: String.self) else { return "" }
        Self.handles.withLock { handles in
            if handles.count >= 100_000 { handles.removeAll(keepingCapacity: true) }
            handles[user] = handle
        }
        return handle
    }

    private static let handles = Mutex<[UserID: String]>([:])

    /// The bid; `bid_not_found` when there is none.
    public func bid(_ id: BidID, position: Int64? = nil) async throws -> BidResource {
        let rows = try await pool.query(
            "SELECT \(unsafeRaw: BidResource.columns) FROM \(unsafeRaw: BidResource.source) WHERE bid_id = \(id.rawValue)",
            prepared: true)
        guard let row = rows.first else { throw DomainError.bidNotFound }
        return try BidResource(row, position: position)
    }

    /// The item a bid was placed on: the stream that decides on the bid.
    public func item(ofBid id: BidID) async throws -> ItemID {
        let rows = try await pool.query("SELECT item_id FROM bids_view WHERE bid_id = \(id.rawValue)", prepared: true)
        guard let itemID = try rows.first?.decode("item_id", as: UUID.self) else { throw DomainError.bidNotFound }
        return ItemID(itemID)
    }

    /// After an approval, and only then, the owner and the approved bidder see each other's
    /// e-mail, while the item is reserved or closed. Nobody else ever does.
    public func contactEmail(_ item: ItemResource, for actor: UserID) async throws -> String? {
        guard item.status == ItemStatus.reserved.rawValue || item.status == ItemStatus.closed.rawValue else { return nil }
        let rows = try await pool.query(
            """
            SELECT b.bidder_id, bidder.email AS bidder_email, owner.email AS owner_email
            FROM bids_view b
            JOIN users_view bidder ON bidder.user_id = b.bidder_id
            JOIN users_view owner ON owner.user_id = \(item.ownerId.rawValue)
            WHERE b.item_id = \(item.id.rawValue) AND b.status = 'approved'
            ORDER BY b.updated_at DESC LIMIT 1
            """, prepared: true)
        guard let row = rows.first else { return nil }
        if actor == item.ownerId { return try row.decode("bidder_email") }
        if actor.rawValue == (try row.decode("bidder_id", as: UUID.self)) { return try row.decode("owner_email") }
        return nil
    }

    /// The item's bids, newest first: all of them, or only `bidder`'s. The statement holds
    /// only the filters that are set, as the market's does. The owner's is prepared; a
    /// bidder's is planned with its values, since a generic plan may take the bidder's index
    /// and walk every bid of a bidder with many to find the few on this item.
    public func bids(on item: ItemID, onlyBy bidder: UserID?, limit: Int, after: Cursor?) async throws -> Page<BidResource> {
        var statement: PostgresQuery =
            "SELECT \(unsafeRaw: BidResource.columns) FROM \(unsafeRaw: BidResource.source) WHERE item_id = \(item.rawValue)"
        if let bidder { statement.append(" AND bidder_id = \(bidder.rawValue)") }
        if let after { statement.append(" AND (created_at, bid_id) < (\(after.at), \(after.id))") }
        statement.append(" ORDER BY created_at DESC, bid_id DESC LIMIT \(literal: PageSize.rowsRead(limit))")
        let rows = try await pool.query(statement, prepared: bidder == nil)
        let bids = try rows.prefix(limit).map { try BidResource($0, position: nil) }
        let next = rows.count > limit ? bids.last.map { Cursor(at: $0.createdAt, id: $0.id.rawValue).encoded } : nil
        return Page(data: bids, nextCursor: next)
    }

    /// The market: available items, filtered, newest first or nearest first, in keyset pages;
    /// the statement holds only the filters that are set. A refresh (`updatedSince`) also
    /// answers the items that left the market since, with their status (tombstones), so a
    /// client can take their pins away.
    public func market(_ filter: MarketFilter) async throws -> Page<ItemResource> {
        var filter = filter
        try await filter.listing.resolveSearch(on: pool)
        var filters: [PostgresQuery] = []
        if filter.listing.updatedSince == nil { filters.append("status = 'available'") }
        filters += filter.conditions
        let rows = try await pool.query(
            filter.listing.statement(
                select: ItemResource.columns, from: "items_view", id: "item_id", where: filters, sortKeys: MarketFilter.sortKeys),
            prepared: filter.listing.isPreparable)
        return try filter.listing.page(rows, at: \.createdAt, id: \.id.rawValue) { try ItemResource($0, position: nil) }
    }

    /// How many available items the filter finds in each category and of each kind (SPEC
    /// §12.7): one statement, both counts from the same rows.
    public func facets(_ filter: MarketFilter) async throws -> MarketFacets {
        var filter = filter
        try await filter.listing.resolveSearch(on: pool)
        let conditions: [PostgresQuery] = ["status = 'available'"] + filter.conditions + filter.listing.facetConditions
        var statement: PostgresQuery = "SELECT category, kind, count(*)::int AS n FROM items_view WHERE "
        statement.append(.joined(conditions, separator: " AND "))
        statement.append(" GROUP BY GROUPING SETS ((category), (kind))")
        var facets = MarketFacets()
        for row in try await pool.query(statement) {
            let count: Int = try row.decode("n")
            if let category = try row.decode("category", as: String?.self) { facets.categories[category] = count }
            if let kind = try row.decode("kind", as: String?.self) { facets.kinds[kind] = count }
        }
        return facets
    }

    /// The available items in the filter's box (the whole world without one), counted per
    /// cell of a grid of `MarketClusters.cellPixels` at `zoom`: where each cell's items lie on
    /// average, how many, and the least item id among them.
    ///
    /// The whole market, zoomed out, is read from the cells the projection keeps (migration
    /// 0021): the kept cells wholly inside the box, and the items of the cells along its edges,
    /// which lie partly outside it. A market filter, or a grid finer than any kept level,
    /// counts the items themselves (zoomed in, there are few in the box).
    public func clusters(_ filter: MarketFilter, zoom: Int) async throws -> MarketClusters {
        var filter = filter
        try await filter.listing.resolveSearch(on: pool)
        let grid = zoom + 3
        let boxes = filter.listing.box.map { box -> [MapBox] in
            box.minLng <= box.maxLng
                ? [MapBox(box.minLng, box.minLat, box.maxLng, box.maxLat)]
                : [MapBox(box.minLng, box.minLat, 180, box.maxLat), MapBox(-180, box.minLat, box.maxLng, box.maxLat)]
        } ?? [MapBox(-180, -90, 180, 90)]
        let conditions = filter.conditions + filter.listing.searchConditions
        var cells = [MarketClusters.Cell]()
        for box in boxes {
            let statement =
                if conditions.isEmpty, let kept = MarketClusters.keptLevels.first(where: { $0 >= grid }) {
                    box.keptCellsStatement(grid: grid, kept: kept)
                } else {
                    box.itemsStatement(grid: grid, where: conditions)
                }
            cells += try await pool.query(statement).map { row in
                MarketClusters.Cell(
                    lat: try row.decode("lat"), lng: try row.decode("lng"), count: try row.decode("count"),
                    sampleItemId: ItemID(UUID(uuidString: try row.decode("sample")) ?? UUID()))
            }
        }
        return MarketClusters(cells: cells)
    }
}

/// A part of the map that does not cross the antimeridian: minLng ≤ maxLng.
struct MapBox {
    var minLng, minLat, maxLng, maxLat: Double

    init(_ minLng: Double, _ minLat: Double, _ maxLng: Double, _ maxLat: Double) {
        (self.minLng, self.minLat, self.maxLng, self.maxLat) = (minLng, minLat, maxLng, maxLat)
    }

    var conditions: PostgresQuery {
        "v.lat BETWEEN \(minLat) AND \(maxLat) AND v.lng BETWEEN \(minLng) AND \(maxLng)"
    }

    /// Counts the box's items per cell at `grid`.
    func itemsStatement(grid: Int, where filters: [PostgresQuery]) -> PostgresQuery {
        let shift = 24 - grid
        var statement: PostgresQuery = """
            SELECT count(*)::int AS count, avg(v.lat) AS lat, avg(v.lng) AS lng, min(v.item_id::text) AS sample
            FROM items_view v WHERE v.status = 'available' AND
            """
        statement.append(" ")
        statement.append(.joined([conditions] + filters, separator: " AND "))
        statement.append(
            " GROUP BY v.map_x >> \(literal: shift), v.map_y >> \(literal: shift) ORDER BY v.map_y >> \(literal: shift), v.map_x >> \(literal: shift)")
        return statement
    }

    /// The kept cells at level `kept` wholly inside the box, summed into cells of `grid`,
    /// and the items of the cells on its edges: the columns at its west and east ends and the
    /// rows at its north and south ends, each read on an index of its own. A side at the
    /// world's end (longitude ±180, latitude ±90) has no partial cells.
    func keptCellsStatement(grid: Int, kept: Int) -> PostgresQuery {
        let keptShift = 24 - kept
        let up = kept - grid
        let shift = 24 - grid
        var strips: [PostgresQuery] = []
        for (edge, range): (PostgresQuery, PostgresQuery) in [
            ("i.ix0 > i.fx0", "v.map_x BETWEEN i.fx0 << \(literal: keptShift) AND ((i.fx0 + 1) << \(literal: keptShift)) - 1"),
            // A column of its own unless the west strip took it (a box one kept cell wide).
            ("i.ix1 < i.fx1 AND (i.fx1 <> i.fx0 OR i.ix0 = i.fx0)",
             "v.map_x BETWEEN i.fx1 << \(literal: keptShift) AND ((i.fx1 + 1) << \(literal: keptShift)) - 1"),
            ("i.iy0 > i.fy0",
             "v.map_y BETWEEN i.fy0 << \(literal: keptShift) AND ((i.fy0 + 1) << \(literal: keptShift)) - 1 AND v.map_x >> \(literal: keptShift) BETWEEN i.ix0 AND i.ix1"),
            ("i.iy1 < i.fy1 AND (i.fy1 <> i.fy0 OR i.iy0 = i.fy0)",
             "v.map_y BETWEEN i.fy1 << \(literal: keptShift) AND ((i.fy1 + 1) << \(literal: keptShift)) - 1 AND v.map_x >> \(literal: keptShift) BETWEEN i.ix0 AND i.ix1"),
        ] {
            var strip: PostgresQuery = """
                SELECT v.map_x >> \(literal: shift) AS cx, v.map_y >> \(literal: shift) AS cy, 1 AS n, v.lat AS slat,
                       v.lng AS slng, v.item_id::text AS sample
                FROM items_view v, inner_cells i WHERE v.status = 'available' AND
                """
            strip.append(" ")
            strip.append(.joined([edge, range, conditions], separator: " AND "))
            strips.append(strip)
        }
        var statement: PostgresQuery = """
            WITH ends AS (
                SELECT mercator_x(\(minLng)) >> \(literal: keptShift) AS fx0, mercator_x(\(maxLng)) >> \(literal: keptShift) AS fx1,
                       mercator_y(\(maxLat)) >> \(literal: keptShift) AS fy0, mercator_y(\(minLat)) >> \(literal: keptShift) AS fy1
            ), inner_cells AS (
                SELECT fx0, fx1, fy0, fy1,
                       fx0 + \(literal: minLng <= -180 ? 0 : 1) AS ix0, fx1 - \(literal: maxLng >= 180 ? 0 : 1) AS ix1,
                       fy0 + \(literal: maxLat >= 90 ? 0 : 1) AS iy0, fy1 - \(literal: minLat <= -90 ? 0 : 1) AS iy1
                FROM ends
            ), parts AS (
                SELECT c.cell_x >> \(literal: up) AS cx, c.cell_y >> \(literal: up) AS cy, c.count AS n,
                       c.sum_lat / 1e7 AS slat, c.sum_lng / 1e7 AS slng, c.sample::text AS sample
                FROM market_cells c, inner_cells i
                WHERE c.level = \(literal: kept) AND c.cell_x BETWEEN i.ix0 AND i.ix1 AND c.cell_y BETWEEN i.iy0 AND i.iy1
            """
        for strip in strips {
            statement.append(" UNION ALL ")
            statement.append(strip)
        }
        statement.append(
            """
            )
            SELECT sum(n)::int AS count, (sum(slat) / sum(n))::float8 AS lat, (sum(slng) / sum(n))::float8 AS lng,
                   min(sample) AS sample
            FROM parts GROUP BY cx, cy ORDER BY cy, cx
            """)
        return statement
    }
}

/// Counts of the market per cell of a map's grid.
public struct MarketClusters: Codable, Sendable {
    public struct Cell: Codable, Sendable {
        /// Where the cell's items lie on average: where a map draws the cluster.
        public var lat: Double
        public var lng: Double
        public var count: Int
        public var sampleItemId: ItemID
    }

    public var cells: [Cell]

    /// Cells of 32 px on a map of 256-px tiles: 8 × 8 a tile, 2^(zoom+3) across the world.
    public static let cellPixels = 32
    public static let zooms = 0...20
    /// The grid levels `market_cells` keeps (2^level cells across the world): migration 0021.
    static let keptLevels = [4, 6, 8, 10, 12, 14, 16]

    /// Cells across a box of `degrees` of longitude at `zoom`, as a bound on an answer's size.
    public static func cellsAcross(degrees: Double, zoom: Int) -> Double { degrees / 360 * Double(1 << (zoom + 3)) }
}

extension MarketFilter {
    /// The market's orders by value, larger first: a rental's daily price or a request's
    /// highest (none: last either way), and the item's mean rating (none: last).
    static let sortKeys: [ListSort: String] = [
        .priceAsc: "-coalesce(price_cents, 2147483647)",
        .priceDesc: "coalesce(price_cents, -1)",
        .rating: "CASE WHEN review_count > 0 THEN review_stars::float8 / review_count ELSE -1 END",
    ]

    /// The market's own filters, as conditions on `items_view`.
    var conditions: [PostgresQuery] {
        var filters: [PostgresQuery] = []
        if let minRating {
            // Exact in decimals: stars / count >= minRating (in float8, 1.1 * 10 is 11.000000000000002).
            filters.append("review_count > 0 AND review_stars >= \(minRating)::numeric * review_count")
        }
        if let kind { filters.append("kind = \(kind.rawValue)") }
        if let category { filters.append("category = \(category.rawValue)") }
        if let minimum = minPriceCents { filters.append("price_cents >= \(minimum)") }
        if let maximum = maxPriceCents { filters.append("price_cents <= \(maximum)") }
        if let country {
            filters.append("owner_id IN (SELECT user_id FROM users_view WHERE country = \(country))")
        }
        if let period = availableOn {
            // Rentals free on every day of the period: inside the window, no booking that holds
            // its days and no blackout over any of them. Uncorrelated (a hashed set of the few
            // items taken then), so the condition reads the same under any alias of the items;
            // the days as ranges, on the GiST indexes of migration 0029.
            let (from, until) = (period.from.sql, period.until.sql)
            filters.append(
                """
                kind = 'rental' AND coalesce(window_from <= \(from)::date, true) AND coalesce(window_until >= \(until)::date, true)
                AND item_id NOT IN (
                    SELECT b.item_id FROM bookings_view b
                    WHERE b.status <> 'cancelled' AND daterange(b.from_day, b.until_day, '[]') && daterange(\(from)::date, \(until)::date, '[]')
                    UNION ALL
                    SELECT k.item_id FROM blackouts_view k
                    WHERE daterange(k.from_day, k.until_day, '[]') && daterange(\(from)::date, \(until)::date, '[]'))
                """)
        }
        return filters
    }
}

/// Counts of what a market query finds, per category and per kind (`GET /v1/market/facets`).
/// Every category and kind is there, 0 when none is found.
public struct MarketFacets: Codable, Sendable {
    public var categories: [String: Int]
    public var kinds: [String: Int]

    public init() {
        categories = Dictionary(uniqueKeysWithValues: Marketplace.Category.allCases.map { ($0.rawValue, 0) })
        kinds = Dictionary(uniqueKeysWithValues: ItemKind.allCases.map { ($0.rawValue, 0) })
    }
}

/// The market's own filters, on top of the shared ones.
public struct MarketFilter: Sendable {
    public var listing: MapListing
    public var kind: ItemKind?
    public var category: Marketplace.Category?
    public var minPriceCents: Int?
    public var maxPriceCents: Int?
    /// Items of owners from this country (ISO 3166-1 alpha-2): items have a place, not a country.
    public var country: String?
    /// Only rentals free on every day of this period (`availableFrom`, `availableUntil`).
    public var availableOn: Period?
    /// Only items whose renters rated them this well on average (1 to 5).
    public var minRating: Double?

    public init(listing: MapListing) { self.listing = listing }
}

/// An item as clients read it (SPEC §6).
public struct ItemResource: Codable, Sendable {
    public var id: ItemID
    public var kind: String
    public var title: String
    public var description: String
    public var category: String
    public var dailyPriceCents: Int?
    public var maxDailyPriceCents: Int?
    public var status: String
    public var ownerId: UserID
    public var ownerHandle: String
    public var location: Location
    public var availableFrom: String?
    public var availableUntil: String?
    /// A rental's security deposit (SPEC §12.5), held with each bid's charge: 0 for none; nil
    /// for a request.
    public var securityDepositCents: Int?
    public var neededFrom: String?
    public var neededUntil: String?
    public var bidCount: Int
    /// The mean of its renters' stars, to one decimal; nil before the first review.
    public var rating: Double?
    public var reviewCount: Int
    public var photos: [PhotoResource]
    public var createdAt: Date
    public var updatedAt: Date
    /// The other party's e-mail, for the owner and the approved bidder only.
    public var contactEmail: String?
    /// From the point a market query was `near`.
    public var distanceKm: Double?
    public var position: Int64?
    /// The columns of `items_view` its declaration marks `shown:` (`ShownColumns.swift`), after
    /// the members above. Written, never decoded: a client reads them by their names.
    public var shown: [ShownMember] = []

    enum CodingKeys: String, CodingKey {
        case id, kind, title, description, category, dailyPriceCents, maxDailyPriceCents, status, ownerId, ownerHandle, location,
            availableFrom, availableUntil, securityDepositCents, neededFrom, neededUntil, bidCount, rating, reviewCount, photos,
            createdAt, updatedAt, contactEmail, distanceKm, position
    }

    /// As the synthesized form writes the members (an absent optional left out), then the
    /// shown columns; `write(to:)` (Server's JSONWriter.swift) writes the same bytes.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: MemberKey.self)
        try container.encode(id, forKey: "id")
        try container.encode(kind, forKey: "kind")
        try container.encode(title, forKey: "title")
        try container.encode(description, forKey: "description")
        try container.encode(category, forKey: "category")
        try container.encodeIfPresent(dailyPriceCents, forKey: "dailyPriceCents")
        try container.encodeIfPresent(maxDailyPriceCents, forKey: "maxDailyPriceCents")
        try container.encode(status, forKey: "status")
        try container.encode(ownerId, forKey: "ownerId")
        try container.encode(ownerHandle, forKey: "ownerHandle")
        try container.encode(location, forKey: "location")
        try container.encodeIfPresent(availableFrom, forKey: "availableFrom")
        try container.encodeIfPresent(availableUntil, forKey: "availableUntil")
        try container.encodeIfPresent(securityDepositCents, forKey: "securityDepositCents")
        try container.encodeIfPresent(neededFrom, forKey: "neededFrom")
        try container.encodeIfPresent(neededUntil, forKey: "neededUntil")
        try container.encode(bidCount, forKey: "bidCount")
        try container.encodeIfPresent(rating, forKey: "rating")
        try container.encode(reviewCount, forKey: "reviewCount")
        try container.encode(photos, forKey: "photos")
        try container.encode(createdAt, forKey: "createdAt")
        try container.encode(updatedAt, forKey: "updatedAt")
        try container.encodeIfPresent(contactEmail, forKey: "contactEmail")
        try container.encodeIfPresent(distanceKm, forKey: "distanceKm")
        try container.encodeIfPresent(position, forKey: "position")
        for member in shown { try container.encode(member.value, forKey: MemberKey(member.name)) }
    }

    /// What `init(_:position:)` reads, besides `distance_km`: `items_view`'s row.
    static let columns = ItemRow.table.selectList()

    init(_ row: PostgresRow, position: Int64?) throws {
        self.init(try ItemRow.table.decode(row), distanceKm: try row.decode("distance_km", as: Double?.self), position: position)
    }

    /// The row as clients read it: a rental's price and window under names of their own, a
    /// request's under theirs.
    init(_ row: ItemRow, distanceKm: Double?, position: Int64?) {
        id = row.id
        kind = row.kind.rawValue
        title = row.title
        description = row.description
        category = row.category.rawValue
        let (from, until) = (row.from?.description, row.until?.description)
        if row.kind == .rental {
            (dailyPriceCents, availableFrom, availableUntil) = (row.priceCents, from, until)
            securityDepositCents = row.deposit ?? 0
        } else {
            (maxDailyPriceCents, neededFrom, neededUntil) = (row.priceCents, from, until)
        }
        status = row.status.rawValue
        ownerId = row.owner
        ownerHandle = row.ownerHandle
        location = row.location
        bidCount = row.bidCount
        reviewCount = row.reviewCount
        rating = Rating.mean(stars: row.reviewStars, count: row.reviewCount)
        photos = row.photos.map(PhotoResource.init)
        createdAt = row.createdAt
        updatedAt = row.updatedAt
        self.distanceKm = distanceKm
        self.position = position
        shown = ItemRow.table.shown(row)
    }
}

extension ItemResource {
    /// A posting as `items_view` holds it the moment its append commits: the row
    /// `ItemsProjection` inserts, read without reading it back. Nil for any other event.
    public init?(
        posted event: ItemEvent, at recordedAt: Date, position: Int64?, ownerHandle: (UserID) async throws -> String
    ) async rethrows {
        guard var row = ItemRow(posted: event, ownerHandle: "", at: recordedAt, position: position ?? 0) else { return nil }
        row.ownerHandle = try await ownerHandle(row.owner)
        self.init(row, distanceKm: nil, position: position)
    }
}

/// A bid as clients read it (SPEC §6).
public struct BidResource: Codable, Sendable {
    public var id: BidID
    public var itemId: ItemID
    public var bidderId: UserID
    public var bidderHandle: String
    public var dailyPriceCents: Int
    public var from: String
    public var until: String
    public var message: String?
    public var status: String
    public var reason: String?
    public var createdAt: Date
    /// What a row of bids draws beside the bid: the item's title, kind and first photo.
    public var itemTitle: String
    public var itemKind: String
    public var itemPhoto: PhotoResource?
    /// A rental bid's prices and how its charge is held (SPEC §12.2); null on a request's.
    public var payment: RentalPayment?
    public var position: Int64?

    /// What `init(_:position:)` reads, from `source`: `bids_view`'s row, and what is joined.
    static let columns = """
        \(BidRow.table.selectList("bids_view")), coalesce(item_title, '') AS item_title, coalesce(item_kind, '') AS item_kind,
        item_photo, \(RentalPayment.columns)
        """

    /// `bids_view` with its item's title, kind and first photo joined under names of their
    /// own, so that a statement's other columns (`item_id`, `status`, `created_at`) stay the bids'.
    static let source = """
        bids_view LEFT JOIN LATERAL (
            SELECT title AS item_title, kind AS item_kind, photos[1] AS item_photo FROM items_view i
            WHERE i.item_id = bids_view.item_id
        ) item ON true
        LEFT JOIN LATERAL (\(RentalPayment.lateral("bids_view.bid_id"))) price ON true
        """

    init(_ row: PostgresRow, position: Int64?) throws {
        self.init(
            try BidRow.table.decode(row), itemTitle: try row.decode("item_title"),
            itemKind: try row.decode("item_kind"), itemPhoto: try row.decode("item_photo", as: String?.self),
            payment: try RentalPayment(row), position: position)
    }

    /// The row as clients read it, with what a row of bids draws beside it.
    init(_ row: BidRow, itemTitle: String, itemKind: String, itemPhoto: String?, payment: RentalPayment?, position: Int64?) {
        id = row.id
        // A bid's item is always known to a read (`ItemsProjection` keys it by its stream).
        itemId = row.item ?? .none
        bidderId = row.bidder
        bidderHandle = row.bidderHandle
        dailyPriceCents = row.dailyPriceCents
        from = row.from.description
        until = row.until.description
        message = row.message
        status = row.status.rawValue
        reason = row.reason
        createdAt = row.createdAt
        self.itemTitle = itemTitle
        self.itemKind = itemKind
        self.itemPhoto = itemPhoto.map(PhotoResource.init)
        self.payment = payment
        self.position = position
    }
}

/// A rental bid's money, as its bid and its booking show it: the prices its event fixed and
/// how the charge is held.
public struct RentalPayment: Codable, Sendable, Hashable {
    public var days: Int
    public var totalCents: Int
    public var renterFeeCents: Int
    public var ownerFeeCents: Int
    public var chargeCents: Int
    public var payoutCents: Int
    public var cancellationPolicy: String
    /// The rental's security deposit, held and captured beside the charge; absent: none.
    public var depositCents: Int?
    /// `balance` or `card`.
    public var payWith: String

    public init(_ price: RentalPrice, payWith method: RentalPayMethod) {
        depositCents = price.depositCents
        days = price.days
        totalCents = price.totalCents
        renterFeeCents = price.renterFeeCents
        ownerFeeCents = price.ownerFeeCents
        chargeCents = price.chargeCents
        payoutCents = price.payoutCents
        cancellationPolicy = price.cancellationPolicy.rawValue
        payWith = method.rawValue
    }

    init(_ price: RentalPriceRow) {
        (days, totalCents, renterFeeCents, ownerFeeCents) = (price.days, price.totalCents, price.renterFeeCents, price.ownerFeeCents)
        (chargeCents, payoutCents, depositCents) = (price.chargeCents, price.payoutCents, price.depositCents)
        (cancellationPolicy, payWith) = (price.cancellationPolicy.rawValue, price.payWith.rawValue)
    }

    /// `rental_prices_view`'s row for the bid `bidColumn` names, joined as `price`: all its
    /// columns but the bid's, which the row beside it has (`columns`).
    static func lateral(_ bidColumn: String) -> String {
        "SELECT \(price.selectList()) FROM rental_prices_view p WHERE p.bid_id = \(bidColumn)"
    }

    static let columns = price.selectList("price")
    private static let price = RentalPriceRow.table.withoutKey

    /// Nil when the row has no prices (a request's bid, or one placed before rentals were
    /// paid). The price's columns come after the row's own: the last of its first's name.
    init?(_ row: PostgresRow) throws {
        guard let first = Self.price.columns.first?.name, let start = row.columns.lastIndex(where: { $0.name == first }),
            try row.decode(start, as: Int?.self) != nil
        else { return nil }
        self.init(try Self.price.decode(row, from: start))
    }
}

extension BidResource {
    /// A bid as `bids_view` holds it the moment its append commits (`ItemsProjection` writes
    /// these same fields): the answer of the command, without reading it back.
    public init(
        placed: BidPlaced, on item: PostedItem, at recordedAt: Date, position: Int64?,
        bidderHandle: (UserID) async throws -> String
    ) async rethrows {
        let row = BidRow(
            placed: placed, item: item.id, owner: item.ownerID,
            bidderHandle: try await bidderHandle(placed.bidderID), at: recordedAt)
        self.init(
            row, itemTitle: item.title, itemKind: item.kind.rawValue, itemPhoto: item.photos.first,
            payment: placed.price.flatMap { price in placed.hold.map { RentalPayment(price, payWith: $0.method) } },
            position: position)
    }
}

