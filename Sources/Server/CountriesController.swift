import Foundation
import Hummingbird
import Marketplace
import Postgres

/// `GET /v1/countries?q=`: ISO 3166-1 countries by name, with their fundraising loans.
struct CountriesController<Context: AuthenticatedRequestContext>: Sendable {
    let pool: PostgresPool

    struct Country: ResponseEncodable {
        var code: String
        var alpha3: String
        var name: String
        var flag: String
        var fundraisingLoans: Int
    }

    /// Countries page by name alone; the cursor's id goes unused.
    static var noID: UUID { UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }

    func addRoutes(to router: Router<Context>, authentication: AuthenticationMiddleware<Context>) {
        router.group("/v1/countries").add(middleware: authentication).get(use: list)
    }

    /// `q` finds a part of the name (`nep`: Nepal) or a code (`np`, `npl`); by name, in keyset pages.
    @Sendable func list(_ request: Request, context: Context) async throws -> Page<Country> {
        var query = ListQuery(request)
        if query.cursor != nil, query.cursor?.key == nil { query.bad("cursor", "invalid_cursor", "a cursor of another list") }
        try query.throwIfAny()
        let text = query.text("q")?.trimmingCharacters(in: .whitespaces).prefix(100).lowercased() ?? ""
        let pattern = "%" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
            .replacingOccurrences(of: "_", with: "\\_") + "%"
        let rows = try await pool.query(
            """
            SELECT c.code, c.alpha3, c.name, c.flag, coalesce(v.fundraising_loans, 0) AS fundraising_loans
            FROM countries c LEFT JOIN country_loans_view v ON v.country_code = c.code
            WHERE (\(text) = '' OR c.name ILIKE \(pattern) OR lower(c.code) = \(text) OR lower(c.alpha3) = \(text))
              AND (\(query.cursor?.key)::text IS NULL OR c.name > \(query.cursor?.key))
            ORDER BY c.name
            LIMIT \(query.limit + 1)
            """)
        let countries = try rows.prefix(query.limit).map { row in
            Country(
                code: try row.decode("code"), alpha3: try row.decode("alpha3"), name: try row.decode("name"),
                flag: try row.decode("flag"), fundraisingLoans: try row.decode("fundraising_loans"))
        }
        let next =
            rows.count > query.limit
            ? countries.last.map { Cursor(at: Date(timeIntervalSince1970: 0), id: Self.noID, key: $0.name).encoded }
            : nil
        return Page(data: countries, nextCursor: next)
    }
}
