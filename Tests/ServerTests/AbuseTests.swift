import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ServerTestSupport
import Testing

@Suite("Bodies and parameters out of bounds")
struct AbuseTests {
    @Test func deepNestingAndLongStringsAreRefusedAndNothingBreaks() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let before = try await eventCount(admin)
            let deep = String(repeating: "[", count: 200_000) + String(repeating: "]", count: 200_000)
            for key in [nil, "deep-1"] {
                let response = try await client.send(.post, "/v1/rentals", raw: deep, token: ada.token, idempotencyKey: key)
                #expect(response.status == .badRequest)
                #expect(response.code == "too_deeply_nested")
            }
            let nested = #"{"title": "Bike", "location": "# + String(repeating: #"{"a": "#, count: 40) + "1" + String(repeating: "}", count: 41)
            #expect(try await client.send(.post, "/v1/rentals", raw: nested, token: ada.token).code == "too_deeply_nested")
            let long = try await client.send(
                .post, "/v1/rentals",
                body: API.RentalBody(
                    title: String(repeating: "x", count: 30_000), category: .tools, dailyPriceCents: 1,
                    location: API.LocationInput(lat: 1, lng: 2)),
                token: ada.token)
            #expect(long.status == .badRequest)
            #expect(long.code == "string_too_long")
            // Tiny values by the thousand are refused by count before any decoding (issue 48),
            // anonymous or not, keyed or not.
            let wide = "{\"title\": [" + Array(repeating: "0", count: 10_000).joined(separator: ",") + "]}"
            for (token, key) in [(Optional(ada.token), Optional("wide-1")), (nil, nil)] {
                let response = try await client.send(.post, token == nil ? "/v1/sessions" : "/v1/rentals", raw: wide, token: token, idempotencyKey: key)
                #expect(response.status == .badRequest && response.code == "too_many_values", "\(response)")
            }
            // Anyone without a token sends at most 64 KiB (a login is a few hundred bytes); a
            // signed-in user a megabyte.
            let large = "{\"handle\": \"ada\", \"password\": \"" + String(repeating: "x", count: 19_000) + "\"" + String(repeating: " ", count: 60_000) + "}"
            for path in ["/v1/sessions", "/v1/users", "/v1/password-resets"] {
                let refused = try await client.send(.post, path, raw: large)
                #expect(refused.status == .contentTooLarge && refused.code == "body_too_large", "\(path): \(refused)")
            }
            let signedIn = try await client.send(.post, "/v1/rentals", raw: large, token: ada.token)
            #expect(signedIn.status != .contentTooLarge, "\(signedIn)")
            // An escaped quote does not end a string early, and a plain body still works.
            let quoted = try await client.send(
                .post, "/v1/rentals",
                body: API.RentalBody(
                    title: #"The "best" bike [really] {yes}"#, category: .bikes, dailyPriceCents: 100,
                    location: API.LocationInput(lat: 1, lng: 2)),
                token: ada.token)
            #expect(quoted.status == .created, "\(quoted)")
            #expect(try await eventCount(admin) == before + 1)
        }
    }

    @Test func badQueryParametersAreRefusedNeverAServerError() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let queries = [
                "/v1/market?near=abc&radiusKm=-1&limit=0&cursor=%%%", "/v1/market?sort=upside&updatedSince=yesterday",
                "/v1/market?minPriceCents=-5&kind=boat&category=ships", "/v1/loans?near=91,0&status=x&country=12",
                "/v1/countries?limit=1000&cursor=nope", "/v1/events?after=x", "/v1/items/not-a-uuid", "/v1/loans/not-a-uuid",
                "/v1/items/\(UUID())/bids?limit=-3&cursor=zz", "/v1/users/123",
            ]
            for query in queries {
                let response = try await client.send(.get, query, token: ada.token)
                #expect((400..<500).contains(Int(response.status.code)), "\(query): \(response.status)")
                #expect(response.headers[.contentType] == "application/problem+json", "\(query)")
            }
        }
    }
}
