import Foundation
import Hummingbird
import Marketplace
import Postgres

/// `GET /v1/market`: available items, filtered, newest first or nearest first, in keyset pages.
struct MarketController<Context: AuthenticatedRequestContext>: Sendable {
    let pool: PostgresPool

    func addRoutes(to router: Router<Context>, authentication: AuthenticationMiddleware<Context>, idempotency: IdempotencyMiddleware<Context>) {
        router.group("/v1/market").add(middleware: authentication).add(middleware: idempotency).get(use: market)
    }

    /// The market's own filters, on top of the shared ones; every bad parameter in one 422.
    struct Query {
        var list: ListQuery
        var kind: ItemKind?
        var category: Marketplace.Category?
        var minPrice: Int?
        var maxPrice: Int?
        /// Items of owners from this country (ISO 3166-1 alpha-2): items have a place, not a country.
        var country: String?

        /// The country filter as SQL, only when there is one, so the plain market's statement
        /// keeps its plan. The code is one of `Countries.alpha2` (two letters), safe inline.
        var ownersCountryClause: String {
            guard let country, Countries.alpha2.contains(country), country.allSatisfy({ $0.isASCII && $0.isLetter }) else {
                return "true"
            }
            return "owner_id IN (SELECT user_id FROM users_view WHERE country = '\(country)')"
        }

        init(_ request: Request) throws {
            list = ListQuery(request)
            if let value = list.text("kind") {
                kind = ItemKind(rawValue: value)
                if kind == nil { list.bad("kind", "invalid_kind", "rental or request") }
            }
            if let value = list.text("category") {
                category = Marketplace.Category(rawValue: value)
                if category == nil { list.bad("category", "invalid_category", "one of the categories") }
            }
            if let value = list.text("country") {
                country = value.uppercased()
                if !Countries.alpha2.contains(value.uppercased()) {
                    list.bad("country", "invalid_country", "an ISO 3166-1 alpha-2 code, like NP")
                }
            }
            for (name, keyPath) in [("minPriceCents", \Query.minPrice), ("maxPriceCents", \Query.maxPrice)] {
                guard let value = list.text(name) else { continue }
                if let price = Int(value), (0...Int(Int32.max)).contains(price) { self[keyPath: keyPath] = price } else {
                    list.bad(name, "invalid_price", "a whole number of cents, 0 to 2147483647")
                }
            }
            try list.throwIfAny()
        }
    }

    @Sendable func market(_ request: Request, context: Context) async throws -> Page<ItemResource> {
        let filters = try Query(request)
        let query = filters.list
        let point = query.nearPoint
        let after = query.cursor
        // One statement for both orders: the filters are shared, the keyset differs. A refresh
        // (`updatedSince`) also answers the items that left the market since, with their status
        // (tombstones), so a client can take their pins away; its own text, so the plain
        // market's statement keeps its plan on the available items' index.
        let rows = try await pool.query(
            """
            WITH candidates AS (
                SELECT \(unsafeRaw: ItemResource.columns),
                       CASE WHEN \(point)::cube IS NULL THEN NULL
                            ELSE 2 * \(unsafeRaw: Earth.radiusSQL)
                                 * asin(least(1.0, cube_distance(earth, \(point)::cube) / (2 * \(unsafeRaw: Earth.radiusSQL))))
                       END AS distance_km
                FROM items_view
                WHERE \(unsafeRaw: query.updatedSince == nil ? "status = 'available'" : "true")
                  AND (\(filters.kind?.rawValue)::text IS NULL OR kind = \(filters.kind?.rawValue))
                  AND (\(filters.category?.rawValue)::text IS NULL OR category = \(filters.category?.rawValue))
                  AND (\(filters.minPrice)::int IS NULL OR price_cents >= \(filters.minPrice))
                  AND (\(filters.maxPrice)::int IS NULL OR price_cents <= \(filters.maxPrice))
                  AND \(unsafeRaw: filters.ownersCountryClause)
                  AND (\(query.updatedSince)::timestamptz IS NULL OR updated_at > \(query.updatedSince))
                  AND NOT EXISTS (SELECT FROM unnest(\(query.titlePatterns)::text[]) AS p WHERE title NOT ILIKE p)
                  AND (\(query.radiusBox)::cube IS NULL OR earth <@ \(query.radiusBox)::cube)
            )
            SELECT * FROM candidates
            WHERE (\(query.radiusKm)::float8 IS NULL OR distance_km <= \(query.radiusKm))
              AND (\(after?.id)::uuid IS NULL
                   OR (\(query.byDistance) AND (distance_km, item_id) > (\(after?.km), \(after?.id)))
                   OR (NOT \(query.byDistance) AND (created_at, item_id) < (\(after?.at), \(after?.id))))
            ORDER BY
                CASE WHEN \(query.byDistance) THEN distance_km END ASC,
                CASE WHEN \(query.byDistance) THEN item_id END ASC,
                created_at DESC, item_id DESC
            LIMIT \(query.limit + 1)
            """)
        let items = try rows.prefix(query.limit).map { try ItemResource($0, position: nil) }
        return Page(
            data: items,
            nextCursor: query.nextCursor(items, fetched: rows.count, at: \.createdAt, id: \.id.rawValue, km: \.distanceKm))
    }
}
