import Hummingbird
import Marketplace
import Projections

/// `GET /v1/market`: available items, filtered and searched, in keyset pages of one of the
/// orders of `ListSort`; `GET /v1/market/facets`: how many per category and kind;
/// `GET /v1/market/clusters`: how many of them lie in each cell of a map's grid.
struct MarketController: Sendable {
    let items: Replicated<ItemsView>

    @Sendable func market(_ request: Request, context: UserContext) async throws -> Page<ItemResource> {
        var query = ListQuery(request)
        let filter = Self.filter(&query)
        if query.problems.contains(where: { $0.code == "invalid_period" }) {
            // SPEC §12.1 names this refusal by its own code.
            throw DomainError(
                .invalid, "invalid_period", "availableFrom and availableUntil are days in order, at most a year apart.",
                fields: query.problems)
        }
        try query.throwIfAny()
        return try await items.on(context).market(filter)
    }

    /// `GET /v1/market/facets`: what the market's filters find, counted per category and per
    /// kind (SPEC §12.7). The route takes the filters only (the document lists no order or page).
    @Sendable func facets(_ request: Request, context: UserContext) async throws -> MarketFacets {
        var query = ListQuery(request)
        let filter = Self.filter(&query)
        try query.throwIfAny()
        return try await items.on(context).facets(filter)
    }

    /// A zoomed-out map's counts: `zoom` (0 to 20) sets the grid, `bbox` the part of the world
    /// (all of it without one), and `q` and the market's filters which items count. A box wider than
    /// `maxCellsAcross` cells at that zoom is refused: such a map has more pins than a screen.
    @Sendable func clusters(_ request: Request, context: UserContext) async throws -> MarketClusters {
        var query = ListQuery(request)
        let filter = Self.filter(&query)
        // A count of what a map shows: no point, order, refresh or page.
        for name in ["near", "radiusKm", "sort", "updatedSince", "cursor", "limit"] where query.text(name) != nil {
            query.bad(name, "not_for_clusters", "clusters take zoom, bbox, q and the market's filters")
        }
        var zoom = 0
        if let value = query.text("zoom"), let given = Int(value), MarketClusters.zooms.contains(given) {
            zoom = given
        } else {
            query.bad("zoom", "invalid_zoom", "a whole number from 0 to 20")
        }
        if query.problems.isEmpty {
            let degrees = filter.listing.box.map { box in
                box.minLng <= box.maxLng ? box.maxLng - box.minLng : 360 - (box.minLng - box.maxLng)
            } ?? 360
            if MarketClusters.cellsAcross(degrees: degrees, zoom: zoom) > Double(Self.maxCellsAcross) {
                query.bad("bbox", "bbox_too_wide", "at most \(Self.maxCellsAcross) cells across at this zoom: zoom out or send the map's viewport")
            }
        }
        try query.throwIfAny()
        return try await items.on(context).clusters(filter, zoom: zoom)
    }

    /// A 4K screen is 120 cells of 32 px across.
    static let maxCellsAcross = 512

    /// The market's own filters, on top of the shared ones; every bad parameter in one 422.
    static func filter(_ query: inout ListQuery) -> MarketFilter {
        var filter = MarketFilter(listing: query.listing)
        if let value = query.text("kind") {
            filter.kind = ItemKind(rawValue: value)
            if filter.kind == nil { query.bad("kind", "invalid_kind", "rental or request") }
        }
        if let value = query.text("category") {
            filter.category = Marketplace.Category(rawValue: value)
            if filter.category == nil { query.bad("category", "invalid_category", "one of the categories") }
        }
        filter.country = query.country("country")
        for (name, keyPath) in [("minPriceCents", \MarketFilter.minPriceCents), ("maxPriceCents", \MarketFilter.maxPriceCents)] {
            guard let value = query.text(name) else { continue }
            if let price = Int(value), (0...Int(Int32.max)).contains(price) { filter[keyPath: keyPath] = price } else {
                query.bad(name, "invalid_price", "a whole number of cents, 0 to 2147483647")
            }
        }
        if let value = query.text("minRating") {
            if let rating = Double(value), (1...5).contains(rating) { filter.minRating = rating } else {
                query.bad("minRating", "invalid_rating", "a number from 1 to 5")
            }
        }
        filter.availableOn = availablePeriod(&query)
        return filter
    }

    /// `availableFrom` and `availableUntil`, both or neither: days in order, at most a year.
    static func availablePeriod(_ query: inout ListQuery) -> Period? {
        let from = query.text("availableFrom"), until = query.text("availableUntil")
        guard from != nil || until != nil else { return nil }
        guard let from, let until else {
            let missing = from == nil ? "availableFrom" : "availableUntil"
            query.bad(missing, "invalid_period", "availableFrom and availableUntil go together")
            return nil
        }
        guard let first = Day(from), let last = Day(until) else {
            query.bad(Day(from) == nil ? "availableFrom" : "availableUntil", "invalid_period", "a date as YYYY-MM-DD")
            return nil
        }
        let period = Period(from: first, until: last)
        guard first <= last, period.days <= BookingsView.maxCalendarDays else {
            query.bad("availableUntil", "invalid_period", "on or after availableFrom, at most \(BookingsView.maxCalendarDays) days")
            return nil
        }
        return period
    }
}
