import Foundation
import Hummingbird
import HummingbirdCore
import Marketplace
import Projections
import UseCases

/// Saved searches (SPEC §12.7): `POST /v1/me/saved-searches {name, query}` keeps a market
/// query (its query string, read as `GET /v1/market` reads it), `GET` lists them, `DELETE
/// .../{id}` drops one. A new posting that one meets tells its owner (`new_match`).
struct SavedSearchesController: Sendable {
    let searches: SavedSearches

    struct Body: Decodable {
        var name: String?
        var query: String?
    }

    struct List: ResponseEncodable {
        var data: [SavedSearchResource]
    }

    /// A query string longer than this is not one a screen of filters makes.
    static let maxQueryLength = 2_000

    @Sendable func save(_ request: Request, context: UserContext) async throws -> EditedResponse<SavedSearchResource> {
        let body = try await request.decodeBody(Body.self, context: context)
        var fields = FieldCheck()
        fields.require(("name", body.name), ("query", body.query))
        let trimmedName = body.name?.trimmingCharacters(in: .whitespacesAndNewlines)
        if let trimmedName, !SavedSearchLimits.nameLength.contains(trimmedName.count) {
            fields.problems.append(FieldError(field: "name", code: "invalid_name", message: "1 to 80 characters"))
        }
        var parsedFilter: MarketFilter?
        if let query = body.query {
            do { parsedFilter = try Self.filter(query) } catch let error as DomainError { fields.problems += error.fields }
        }
        let (name, query, filter) = try fields.checked(trimmedName, body.query, parsedFilter)
        let saved = try await searches.save(context.user, name: name, query: query, filter: filter)
        return EditedResponse(status: .created, response: saved)
    }

    @Sendable func list(_ request: Request, context: UserContext) async throws -> List {
        List(data: try await searches.list(context.user))
    }

    @Sendable func delete(_ request: Request, context: UserContext) async throws -> HTTPResponse.Status {
        guard let id = UUID(uuidString: try context.parameters.require("searchID")) else { throw SavedSearches.notFoundError }
        try await searches.delete(context.user, id)
        return .noContent
    }

    /// The market's filter from a query string, as `GET /v1/market` reads one; what is wrong
    /// with it is named under `query` (`query.category`, ...). An order and a page size are
    /// taken and left aside; a cursor, a refresh time or a rating, which no new posting can
    /// meet, are not.
    static func filter(_ query: String) throws -> MarketFilter {
        func named(_ problems: [FieldError]) -> DomainError {
            DomainError.invalid(problems.map { FieldError(field: "query.\($0.field)", code: $0.code, message: $0.message) })
        }
        guard query.count <= maxQueryLength else {
            throw DomainError.invalid([FieldError(field: "query", code: "too_long", message: "at most \(maxQueryLength) characters")])
        }
        let text = query.hasPrefix("?") ? String(query.dropFirst()) : query
        let pairs = URI("/v1/market?" + text).formParameters
        // Held to what the market's own query is held to (`QueryTextMiddleware`).
        let problems = RouteTable.problems(pairs, path: "/v1/market", method: "GET")
        if !problems.isEmpty { throw named(problems) }
        // No new posting is on a page yet, or rated.
        if let name = pairs.first(where: { ["cursor", "updatedSince", "minRating"].contains($0.name) })?.name {
            throw named([
                FieldError(
                    field: name, code: "not_for_saved_searches", message: "a saved search is met by new postings, which have no page or rating yet")
            ])
        }
        var list = ListQuery(pairs)
        let filter = MarketController.filter(&list)
        guard list.problems.isEmpty else { throw named(list.problems) }
        return filter
    }
}
