import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Postgres
import ServerTestSupport
import Testing
import TestSupport

@Suite("Database outages")
struct OutageTests {
    @Test func whileTheDatabaseRefusesConnectionsRequestsGet503QuicklyAndServiceComesBackByItself() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            _ = try await client.postRental(ada.token)
            let database = try await admin.query("SELECT current_database() AS d").single().decode("d", as: String.self)

            // The outage, from the cluster's own database: no new connection to ours, every one cut.
            let cluster = PostgresPool(configuration: try TestDatabase.adminConfiguration(), options: .init(size: 1), logger: TestDatabase.logger)
            defer { Task { await cluster.shutdown() } }
            _ = try await cluster.query("ALTER DATABASE \(unsafeRaw: database) ALLOW_CONNECTIONS false")
            _ = try await cluster.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = \(database)")
            let clock = ContinuousClock()
            for (method, uri, json) in [
                (HTTPRequest.Method.get, "/v1/market", nil), (.get, "/v1/me", nil),
                (.post, "/v1/rentals", ["title": "Lamp", "category": "furniture", "dailyPriceCents": 300, "location": ["lat": 1.0, "lng": 2.0]] as [String: Any]?),
                (.get, "/health/ready", nil),
            ] {
                let started = clock.now
                let response = try await client.send(method, uri, json: json, token: ada.token)
                #expect(response.status == .serviceUnavailable, "\(uri): \(response.status) \(response)")
                #expect(clock.now - started < .seconds(7), "\(uri) answered within seconds")
                if uri != "/health/ready" {
                    #expect(response.code == "database_unavailable")
                    #expect(response.headers[.retryAfter] != nil)
                }
            }

            // Back: the server recovers by itself, within seconds.
            _ = try await cluster.query("ALTER DATABASE \(unsafeRaw: database) ALLOW_CONNECTIONS true")
            let back = clock.now
            var status = HTTPResponse.Status.serviceUnavailable
            while clock.now - back < .seconds(15) {
                status = try await client.send(.get, "/v1/market", token: ada.token).status
                if status == .ok { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(status == .ok)
            _ = try await client.postRental(ada.token)  // fails the test unless the item is created
            #expect(try await client.send(.get, "/health/ready").status == .ok)
        }
    }
}
