import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ServerTestSupport
import Testing

@Suite("Metrics")
struct MetricsTests {
    /// The value of the first sample line starting with `prefix`, or 0.
    static func sample(_ text: String, _ prefix: String) -> Double {
        text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
    }

    @Test func metricsArePresentAndMoveWithTheLoad() async throws {
        try await withServer { client, _ in
            let scrape = { () async throws -> String in
                let response = try await client.execute(uri: "/metrics", method: .get) { $0 }
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("text/plain") == true)
                return String(buffer: response.body)
            }
            let ada = try await client.user("ada")
            let before = try await scrape()
            _ = try await client.postRental(ada.token)
            _ = try await client.postRental(ada.token)
            let bad = try await client.send(.post, "/v1/rentals", json: ["title": ""], token: ada.token)
            #expect(bad.status == .unprocessableContent)
            let empty = try await client.send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: ada.token)
            #expect(empty.code == "cart_empty")
            let after = try await scrape()

            let posted = #"lender_commands_total{command="postRental",outcome="ok"}"#
            // At least: other tests in this process post rentals too.
            #expect(Self.sample(after, posted) - Self.sample(before, posted) >= 2, "\(after)")
            let refused = #"lender_commands_total{command="checkout",outcome="cart_empty"}"#
            #expect(Self.sample(after, refused) - Self.sample(before, refused) >= 1, "commands across streams too")
            #expect(Self.sample(after, "lender_events_appended_total") - Self.sample(before, "lender_events_appended_total") >= 2)
            #expect(after.contains("hb_requests"), "requests by route and status")
            #expect(after.contains("/v1/rentals"))
            #expect(after.contains("http_server_request_duration"), "latency histograms")
            #expect(after.contains("lender_pool_connections_in_use"))
            #expect(after.contains("lender_pool_waiting"))
            #expect(after.contains(#"lender_projection_lag_events{projection="items"} 0"#), "inline views are never behind")
            #expect(Self.sample(after, "lender_log_head_position") >= 3)
        }
    }
}
