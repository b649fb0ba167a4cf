import Hummingbird
import Marketplace
import Projections

/// `GET /v1/market`: available items, filtered, newest first or nearest first, in keyset pages.
struct MarketController: Sendable {
    let items: Replicated<ItemsView>

    /// The market's own filters, on top of the shared ones; every bad parameter in one 422.
    @Sendable func market(_ request: Request, context: UserContext) async throws -> Page<ItemResource> {
        var query = ListQuery(request)
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
        try query.throwIfAny()
        return try await items.on(context).market(filter)
    }
}
