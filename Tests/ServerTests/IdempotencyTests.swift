import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import Server
import ServerTestSupport
import Testing
import TestSupport

@Suite("Idempotency-Key over HTTP")
struct IdempotencyTests {
    /// A fresh body each time: `[String: Any]` cannot cross into concurrent tasks.
    static func rental() -> [String: Any] {
        [
            "title": "Road bike", "category": "bikes", "dailyPriceCents": 1500,
            "location": ["lat": 27.7, "lng": 85.3, "place": "Kathmandu"],
        ]
    }

    @Test func tenConcurrentPostsWithOneKeyCreateOneItemAndAnswerAlike() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let responses = try await withThrowingTaskGroup(of: (HTTPResponse.Status, ItemID?, Int64?).self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        let response = try await client.send(
                            .post, "/v1/rentals", json: Self.rental(), token: owner.token, idempotencyKey: "key-1")
                        let item = try? response.decode(ItemResource.self)
                        return (response.status, item?.id, item?.position)
                    }
                }
                return try await group.reduce(into: [(HTTPResponse.Status, ItemID?, Int64?)]()) { $0.append($1) }
            }
            #expect(responses.allSatisfy { $0.0 == .created })
            #expect(Set(responses.compactMap(\.1)).count == 1)
            #expect(Set(responses.compactMap(\.2)).count == 1)
            let items = try await admin.query("SELECT count(*) AS n FROM items_view").single().decode("n", as: Int.self)
            #expect(items == 1)
            let events = try await admin.query("SELECT count(*) AS n FROM events WHERE type = 'RentalPosted'")
                .single().decode("n", as: Int.self)
            #expect(events == 1)
        }
    }

    @Test func aRepeatIsMarkedAndTheSameKeyWithAnotherBodyIs422() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let first = try await client.send(.post, "/v1/rentals", json: Self.rental(), token: owner.token, idempotencyKey: "key-1")
            let again = try await client.send(.post, "/v1/rentals", json: Self.rental(), token: owner.token, idempotencyKey: "key-1")
            #expect(again.status == .created)
            #expect(try again.decode(ItemResource.self).id == first.decode(ItemResource.self).id)
            #expect(again.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")

            var other = Self.rental()
            other["title"] = "Another bike"
            let reused = try await client.send(.post, "/v1/rentals", json: other, token: owner.token, idempotencyKey: "key-1")
            #expect(reused.status == .unprocessableContent)
            #expect(reused.code == "idempotency_key_reused")
            #expect(reused.fieldCodes["Idempotency-Key"] == "idempotency_key_reused", "names the header (issue 47)")

            // Keys are per user: another user's key-1 is another key.
            let someoneElse = try await client.user("someone")
            let theirs = try await client.send(.post, "/v1/rentals", json: Self.rental(), token: someoneElse.token, idempotencyKey: "key-1")
            #expect(theirs.status == .created)
            #expect(try theirs.decode(ItemResource.self).id != first.decode(ItemResource.self).id)
            let items = try await admin.query("SELECT count(*) AS n FROM items_view").single().decode("n", as: Int.self)
            #expect(items == 2)
        }
    }

    @Test func aRefusalIsAnAnswerAndIsGivenAgain() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            var bad = Self.rental()
            bad["dailyPriceCents"] = 0
            let first = try await client.send(.post, "/v1/rentals", json: bad, token: owner.token, idempotencyKey: "bad-1")
            #expect(first.status == .unprocessableContent)
            let again = try await client.send(.post, "/v1/rentals", json: bad, token: owner.token, idempotencyKey: "bad-1")
            #expect(again.status == .unprocessableContent)
            #expect(again.code == first.code)
            #expect(again.headers[.contentType] == "application/problem+json")
            #expect(try await admin.query("SELECT count(*) AS n FROM items_view").single().decode("n", as: Int.self) == 0)
            let badKey = try await client.send(.post, "/v1/rentals", json: Self.rental(), token: owner.token, idempotencyKey: "has space")
            #expect(badKey.status == .badRequest)
            #expect(badKey.code == "invalid_idempotency_key")
        }
    }
}
