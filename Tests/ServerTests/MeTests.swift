import Foundation
import HummingbirdTesting
import Server
import Testing
import TestSupport

@Suite("The signed-in user's commands")
struct MeTests {
    @Test func aProfileIsUpdatedWithinTheRules() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let updated = try await client.send(
                .patch, "/v1/me", json: ["displayName": "Ada L.", "country": "NP", "defaultShareCents": 5000], token: ada.token)
            #expect(updated.status == .ok)
            #expect(updated.body["displayName"] as? String == "Ada L.")
            #expect(updated.body["defaultShareCents"] as? Int == 5000)
            #expect((updated.body["position"] as? Int ?? 0) > 0)
            let bad = try await client.send(.patch, "/v1/me", json: ["defaultShareCents": 3000], token: ada.token)
            #expect(bad.status == .unprocessableContent)
            #expect((bad.body["errors"] as? [[String: Any]])?.first?["code"] as? String == "invalid_share")
            #expect(try await client.send(.patch, "/v1/me", json: ["displayName": "x"]).status == .unauthorized)
        }
    }

    @Test func aBlockedUserCannotBidOnTheBlockersItems() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let troll = try await client.user("troll")
            let itemID = try #require(try await client.postRental(owner.token)["id"] as? String)

            let blocked = try await client.send(.post, "/v1/me/blocks", json: ["userId": troll.id], token: owner.token)
            #expect(blocked.status == .ok)
            #expect((blocked.body["blocked"] as? [String])?.map { $0.lowercased() } == [troll.id.lowercased()])
            let refused = try await client.bid(itemID, troll.token)
            #expect(refused.status == .forbidden)
            #expect(refused.body["code"] as? String == "blocked_by_owner")

            let selfBlock = try await client.send(.post, "/v1/me/blocks", json: ["userId": owner.id], token: owner.token)
            #expect(selfBlock.status == .unprocessableContent)
            #expect(selfBlock.body["code"] as? String == "cannot_block_self")

            let unblocked = try await client.send(.delete, "/v1/me/blocks/\(troll.id)", token: owner.token)
            #expect((unblocked.body["blocked"] as? [String]) == [])
            #expect(try await client.bid(itemID, troll.token).status == .created)
        }
    }
}
