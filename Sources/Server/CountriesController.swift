import Hummingbird
import Marketplace
import Projections

/// `GET /v1/countries?q=`: ISO 3166-1 countries by name, with their fundraising loans.
struct CountriesController: Sendable {
    let countries: Replicated<CountriesView>

    /// `q` finds a part of the name (`nep`: Nepal) or a code (`np`, `npl`); by name, in keyset pages.
    @Sendable func list(_ request: Request, context: UserContext) async throws -> Page<Country> {
        var query = ListQuery(request)
        let cursor = query.listing.cursor
        if cursor != nil, cursor?.key == nil { query.bad("cursor", "invalid_cursor", "a cursor of another list") }
        try query.throwIfAny()
        return try await countries.on(context).countries(matching: query.text("q") ?? "", limit: query.listing.limit, after: cursor)
    }
}
