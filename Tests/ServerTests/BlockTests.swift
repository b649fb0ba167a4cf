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

@Suite("A block holds against racing bids and names a real user")
struct BlockTests {
    /// Bids racing a block: none of the blocked bidder's bids on the owner's items may commit
    /// after the block (each bid's append expects the owner's stream as it read it).
    @Test func noBidOfABlockedUserCommitsAfterTheBlock() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            var items = [ItemID]()
            for index in 0..<12 { items.append(try await client.postRental(ada.token, title: "Thing \(index)").id) }
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for item in items {
                    group.addTask { Int(try await client.bid(item, bob.token).status.code) }
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(5))
                    let blocked = try await client.send(
                        .post, "/v1/me/blocks", body: API.BlockBody(userId: bob.id.rawValue), token: ada.token)
                    return Int(blocked.status.code)
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(Set(statuses).isSubset(of: [200, 201, 204, 403]), "\(statuses)")
            let late = try await count(
                admin,
                """
                SELECT count(*) FROM events b
                WHERE b.type = 'BidPlaced' AND b.data ->> 'bidderID' = \(bob.id.description)
                  AND b.position > (SELECT position FROM events WHERE type = 'UserBlocked')
                """)
            #expect(late == 0, "bids of the blocked user committed after the block")
            // After the block, every bid is refused.
            let after = try await client.bid(items[0], bob.token)
            #expect(after.status == .forbidden)
            #expect(after.code == "blocked_by_owner")
        }
    }

    @Test func blockingAUserWhoDoesNotExistIs404AndStoresNothing() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let before = try await eventCount(admin)
            let response = try await client.send(
                .post, "/v1/me/blocks", body: API.BlockBody(userId: UUID(uuidString: "6f1c1b4e-7e5a-4c5e-9a53-0a8f2f4d3c11")!),
                token: ada.token)
            #expect(response.status == .notFound)
            #expect(response.code == "user_not_found")
            #expect(try await eventCount(admin) == before)
        }
    }
}
