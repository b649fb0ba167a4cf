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

    /// The query, checked in full: every bad parameter is listed in one 422.
    struct Query {
        var kind: ItemKind?
        var category: Marketplace.Category?
        var words: [String] = []
        var minPrice: Int?
        var maxPrice: Int?
        var near: (lat: Double, lng: Double)?
        var radiusKm: Double?
        var byDistance = false
        var updatedSince: Date?
        var limit = 20
        var cursor: Cursor?

        init(_ request: Request) throws {
            let parameters = request.uri.queryParameters
            func text(_ name: String) -> String? { parameters[name[...]].map { String($0) } }
            var problems = [FieldError]()
            func bad(_ field: String, _ code: String, _ message: String) {
                problems.append(FieldError(field: field, code: code, message: message))
            }
            if let value = text("kind") {
                kind = ItemKind(rawValue: value)
                if kind == nil { bad("kind", "invalid_kind", "rental or request") }
            }
            if let value = text("category") {
                category = Marketplace.Category(rawValue: value)
                if category == nil { bad("category", "invalid_category", "one of the categories") }
            }
            words = (text("q") ?? "").split(whereSeparator: \.isWhitespace).prefix(10).map(String.init)
            for (name, keyPath) in [("minPriceCents", \Query.minPrice), ("maxPriceCents", \Query.maxPrice)] {
                guard let value = text(name) else { continue }
                if let price = Int(value), price >= 0 { self[keyPath: keyPath] = price } else {
                    bad(name, "invalid_price", "a whole number of cents, 0 or more")
                }
            }
            if let value = text("near") {
                let parts = value.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
                if parts.count == 2, let lat = parts[0], let lng = parts[1], (-90...90).contains(lat), (-180...180).contains(lng) {
                    near = (lat, lng)
                } else {
                    bad("near", "invalid_point", "lat,lng with lat -90..90 and lng -180..180")
                }
            }
            if let value = text("radiusKm") {
                if let radius = Double(value), radius > 0, radius <= 20_000 { radiusKm = radius } else {
                    bad("radiusKm", "invalid_radius", "kilometres, more than 0 and at most 20000")
                }
                if text("near") == nil { bad("radiusKm", "needs_near", "radiusKm needs near") }
            }
            switch text("sort") {
            case nil, "newest": byDistance = false
            case "distance":
                byDistance = true
                if text("near") == nil { bad("sort", "needs_near", "sort=distance needs near") }
            default: bad("sort", "invalid_sort", "newest or distance")
            }
            if let value = text("updatedSince") {
                updatedSince = ISO8601DateFormatter().date(from: value)
                if updatedSince == nil { bad("updatedSince", "invalid_time", "an RFC 3339 time") }
            }
            do { limit = try request.pageLimit() } catch { bad("limit", "out_of_range", "a number from 1 to 100") }
            do { cursor = try Cursor(query: text("cursor")) } catch {
                bad("cursor", "invalid_cursor", "not a cursor this server gave")
            }
            if byDistance, cursor != nil, cursor?.km == nil { bad("cursor", "invalid_cursor", "a cursor of another sort") }
            if !problems.isEmpty { throw Problem(DomainError.invalid(problems)) }
        }

        /// `%word%` for ILIKE, with the pattern characters of the word escaped.
        var titlePatterns: [String] {
            words.map { word in
                "%" + word.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
                    .replacingOccurrences(of: "_", with: "\\_") + "%"
            }
        }
    }

    @Sendable func market(_ request: Request, context: Context) async throws -> Page<ItemResource> {
        let query = try Query(request)
        let lat = query.near?.lat
        let lng = query.near?.lng
        let after = query.cursor
        // One statement for both orders: the filters are shared, the keyset differs.
        let rows = try await pool.query(
            """
            WITH candidates AS (
                SELECT \(unsafeRaw: ItemResource.columns),
                       CASE WHEN \(lat)::float8 IS NULL THEN NULL
                            ELSE earth_km(earth, earth_point(\(lat), \(lng))) END AS distance_km
                FROM items_view
                WHERE status = 'available'
                  AND (\(query.kind?.rawValue)::text IS NULL OR kind = \(query.kind?.rawValue))
                  AND (\(query.category?.rawValue)::text IS NULL OR category = \(query.category?.rawValue))
                  AND (\(query.minPrice)::int IS NULL OR price_cents >= \(query.minPrice))
                  AND (\(query.maxPrice)::int IS NULL OR price_cents <= \(query.maxPrice))
                  AND (\(query.updatedSince)::timestamptz IS NULL OR updated_at > \(query.updatedSince))
                  AND NOT EXISTS (SELECT FROM unnest(\(query.titlePatterns)::text[]) AS p WHERE title NOT ILIKE p)
                  AND (\(query.radiusKm)::float8 IS NULL
                       OR earth <@ cube_enlarge(earth_point(\(lat), \(lng)), \(query.radiusKm), 3))
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
        let next: String? =
            rows.count > query.limit
            ? items.last.map { Cursor(at: $0.createdAt, id: $0.id.rawValue, km: query.byDistance ? $0.distanceKm : nil).encoded } : nil
        return Page(data: items, nextCursor: next)
    }
}
