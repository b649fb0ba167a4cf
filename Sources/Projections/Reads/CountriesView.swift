import Foundation
import Marketplace
import Postgres

/// Reads of `countries` (reference data) with `country_loans_view`, which `LoansProjection` writes.
public struct CountriesView: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    /// Countries page by name alone; the cursor's id goes unused.
    static var noID: UUID { UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }

    /// `text` finds a part of the name (`nep`: Nepal) or a code (`np`, `npl`); by name, in keyset pages.
    public func countries(matching text: String, limit: Int, after: Cursor?) async throws -> Page<Country> {
        let text = text.trimmingCharacters(in: .whitespaces).prefix(100).lowercased()
        let rows = try await pool.query(
            """
            SELECT c.code, c.alpha3, c.name, c.flag, coalesce(v.fundraising_loans, 0) AS fundraising_loans
            FROM countries c LEFT JOIN country_loans_view v ON v.country_code = c.code
            WHERE (\(text) = '' OR c.name ILIKE \(MapListing.containing(text)) OR lower(c.code) = \(text)
                   OR lower(c.alpha3) = \(text))
              AND (\(after?.key)::text IS NULL OR c.name > \(after?.key))
            ORDER BY c.name
            LIMIT \(limit + 1)
            """)
        let countries = try rows.prefix(limit).map { row in
            Country(
                code: try row.decode("code"), alpha3: try row.decode("alpha3"), name: try row.decode("name"),
                flag: try row.decode("flag"), fundraisingLoans: try row.decode("fundraising_loans"))
        }
        let next =
            rows.count > limit
            ? countries.last.map { Cursor(at: Date(timeIntervalSince1970: 0), id: Self.noID, key: $0.name).encoded }
            : nil
        return Page(data: countries, nextCursor: next)
    }
}

public struct Country: Codable, Sendable {
    public var code: String
    public var alpha3: String
    public var name: String
    public var flag: String
    public var fundraisingLoans: Int
}
