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

@Suite("A market refresh answers the items that left it, with their status")
struct MarketRefreshTests {
    @Test func aRefreshAnswersItemsThatLeftTheMarketWithTheirStatus() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let since = ISO8601DateFormatter().string(from: Date().addingTimeInterval(-1))
            let kept = try await client.postRental(ada.token, title: "Kept").id
            let gone = try await client.postRental(ada.token, title: "Gone").id
            _ = try await client.send(.post, "/v1/items/\(gone)/withdraw", token: ada.token)
            let market = try await client.send(.get, "/v1/market", token: ada.token)
            #expect(try market.decode(Page<ItemResource>.self).data.map(\.id) == [kept])
            let refresh = try await client.send(.get, "/v1/market?updatedSince=\(since)", token: ada.token)
            let items = try refresh.decode(Page<ItemResource>.self).data
            let status = Dictionary(uniqueKeysWithValues: items.map { ($0.id, $0.status) })
            #expect(status[gone] == "withdrawn", "\(refresh)")
            #expect(status[kept] == "available")
        }
    }
}
