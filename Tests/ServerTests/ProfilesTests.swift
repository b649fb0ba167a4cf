import Foundation
import HummingbirdTesting
import Server
import Testing
import TestSupport

@Suite("Profiles")
struct ProfilesTests {
    @Test func thePrivateProfileShowsPostsBidsAndBidsReceived() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let itemID = try #require(try await client.postRental(owner.token)["id"] as? String)
            _ = try await client.bid(itemID, alice.token)

            let mine = try await client.send(.get, "/v1/me", token: owner.token)
            #expect(mine.status == .ok)
            #expect(mine.body["email"] as? String == "owner@example.org")
            #expect(mine.body["balanceCents"] as? Int == 0)
            #expect((mine.body["posts"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [itemID])
            #expect((mine.body["bidsReceived"] as? [[String: Any]])?.count == 1)
            #expect((mine.body["bids"] as? [Any])?.isEmpty == true)

            let hers = try await client.send(.get, "/v1/me", token: alice.token)
            #expect((hers.body["bids"] as? [[String: Any]])?.first?["status"] as? String == "pending")
            #expect((hers.body["posts"] as? [Any])?.isEmpty == true)
            #expect(try await client.send(.get, "/v1/me").status == .unauthorized)
        }
    }

    @Test func thePublicProfileCountsPostsAndCompletedDealsAndHidesTheEmail() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let itemID = try #require(try await client.postRental(owner.token)["id"] as? String)
            _ = try await client.postRental(owner.token, title: "Second bike")
            let bid = try #require(try await client.bid(itemID, alice.token).body["id"] as? String)
            _ = try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token)
            _ = try await client.send(.post, "/v1/items/\(itemID)/complete", token: owner.token)

            let ownerProfile = try await client.send(.get, "/v1/users/\(owner.id)", token: alice.token)
            #expect(ownerProfile.status == .ok)
            #expect(ownerProfile.body["handle"] as? String == "owner")
            #expect(ownerProfile.body["postCount"] as? Int == 2)
            #expect(ownerProfile.body["completedDeals"] as? Int == 1)
            #expect(ownerProfile.body["email"] == nil, "a public profile has no e-mail field at all")
            let aliceProfile = try await client.send(.get, "/v1/users/\(alice.id)", token: owner.token)
            #expect(aliceProfile.body["completedDeals"] as? Int == 1)
            #expect(aliceProfile.body["postCount"] as? Int == 0)
            let ownerMe = try await client.send(.get, "/v1/me", token: owner.token)
            #expect((ownerMe.body["approvalsGiven"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [bid])
            let aliceMe = try await client.send(.get, "/v1/me", token: alice.token)
            #expect((aliceMe.body["approvalsReceived"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [bid])
            #expect((aliceMe.body["approvalsGiven"] as? [Any])?.isEmpty == true)
            #expect(try await client.send(.get, "/v1/users/\(UUID())", token: owner.token).status == .notFound)
        }
    }
}
