import EventStore
import Foundation
import HTTPTypes
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import Server
import ServerTestSupport
import Testing
import TestSupport
@testable import UseCases

@Suite("Unknown routes, wrong methods and other origins are answered plainly")
struct RoutingAndCORSTests {
    @Test func unknownRoutesAre404AndWrongMethods405WithAllowAsProblems() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let missing = try await client.send(.get, "/v1/nothing-here", token: ada.token)
            #expect(missing.status == .notFound)
            #expect(missing.headers[.contentType] == "application/problem+json")
            #expect(missing.code == "not_found")
            let wrong = try await client.send(.delete, "/v1/rentals", token: ada.token)
            #expect(wrong.status == .methodNotAllowed)
            #expect(wrong.headers[.allow] == "POST")
            #expect(wrong.code == "method_not_allowed")
            let item = try await client.send(.put, "/v1/items/6f1c1b4e-7e5a-4c5e-9a53-0a8f2f4d3c11", token: ada.token)
            #expect(item.status == .methodNotAllowed)
            #expect(item.headers[.allow] == "GET, PATCH")
        }
    }

    @Test func browsersFromAllowedOriginsMayCallAndOthersGetNoCORSHeaders() async throws {
        try await withServer(allowedOrigins: ["https://app.example"]) { client, _ in
            let ada = try await client.user("ada")
            let preflight = try await client.execute(
                uri: "/v1/rentals", method: .options,
                headers: [.origin: "https://app.example", .accessControlRequestMethod: "POST",
                          .accessControlRequestHeaders: "authorization, content-type, idempotency-key"])
            #expect(preflight.status == .noContent)
            #expect(preflight.headers[.accessControlAllowOrigin] == "https://app.example")
            #expect(preflight.headers[.accessControlAllowMethods] == "POST")
            #expect(preflight.headers[.accessControlAllowHeaders]?.contains("Idempotency-Key") == true)
            let read = try await client.execute(
                uri: "/v1/market", method: .get, headers: [.origin: "https://app.example", .authorization: "Bearer \(ada.token)"])
            #expect(read.status == .ok)
            #expect(read.headers[.accessControlAllowOrigin] == "https://app.example")
            #expect(read.headers[.accessControlExposeHeaders]?.contains("Retry-After") == true)
            let refused = try await client.execute(uri: "/v1/market?limit=0", method: .get, headers: [.origin: "https://app.example"])
            #expect(refused.status == .unauthorized)
            #expect(refused.headers[.accessControlAllowOrigin] == "https://app.example", "errors are readable too")
            let stranger = try await client.execute(
                uri: "/v1/market", method: .get, headers: [.origin: "https://evil.example", .authorization: "Bearer \(ada.token)"])
            #expect(stranger.headers[.accessControlAllowOrigin] == nil)
        }
    }
}
