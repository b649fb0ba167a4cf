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

@Suite("A retry is the same request whatever bytes carry it")
struct IdempotencyDigestTests {
    static let rental = #"{"title": "Drill", "category": "tools", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3}}"#

    /// A retry that orders its keys anew, spaces them otherwise or escapes a letter is the
    /// same request; another value is not.
    @Test func theSameValueInOtherBytesIsTheSameRequest() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let first = try await client.send(.post, "/v1/rentals", raw: Self.rental, token: ada.token, idempotencyKey: "k1")
            #expect(first.status == .created)
            let retry = try await client.send(
                .post, "/v1/rentals",
                raw: #"{ "location":{"lng":85.3,"lat":27.7},"dailyPriceCents":500,  "category":"t\u006fols","title":"Dr\u0069ll" }"#,
                token: ada.token, idempotencyKey: "k1")
            #expect(retry.status == .created, "\(retry)")
            #expect(retry.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(try retry.decode(ItemResource.self).id == first.decode(ItemResource.self).id)
            let other = try await client.send(
                .post, "/v1/rentals", raw: Self.rental.replacingOccurrences(of: "500", with: "501"), token: ada.token,
                idempotencyKey: "k1")
            #expect(other.status == .unprocessableContent)
            #expect(other.code == "idempotency_key_reused")
            #expect(try await count(admin, "SELECT count(*) FROM items_view") == 1)
        }
    }

    /// An 80,000-key body costs about as much with an Idempotency-Key as without: both are
    /// refused by the shape check's count of values (issue 48), before the digest or the
    /// decoder sees them.
    @Test func aHugeBodyWithAKeyCostsAtMostThreeTimesOneWithout() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let padding = (0..<80_000).map { "\"k\(String(format: "%05d", $0))\":1" }.joined(separator: ",")
            let body = "{" + padding + #","title": "Drill", "category": "tools", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3}}"#
            #expect(body.utf8.count < 1_048_576)
            // Interleaved, the fastest of five each: the suites around this one load the machine
            // in waves, and a wave must fall on both sides of the comparison or on neither.
            let clock = ContinuousClock()
            var without = Duration.seconds(3600), with = Duration.seconds(3600)
            for round in 0..<5 {
                for key in [nil, "huge-\(round)"] {
                    let started = clock.now
                    let response = try await client.send(.post, "/v1/rentals", raw: body, token: ada.token, idempotencyKey: key)
                    let took = clock.now - started
                    #expect(response.status == .badRequest)
                    #expect(response.code == "too_many_values")
                    if key == nil { without = min(without, took) } else { with = min(with, took) }
                }
            }
            #expect(with <= without * 3 + .milliseconds(150), "with a key \(with), without \(without)")
        }
    }
}
