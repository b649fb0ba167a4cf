import Foundation
import HummingbirdTesting
import Projections
import Server
import ServerTestSupport
import Testing
import TestSupport

@Suite("Profiles")
struct ProfilesTests {
    @Test func thePrivateProfileShowsPostsBidsAndBidsReceived() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let itemID = try await client.postRental(owner.token).id
            _ = try await client.bid(itemID, alice.token)

            let reply = try await client.send(.get, "/v1/me", token: owner.token)
            #expect(reply.status == .ok)
            let mine = try reply.decode(PrivateProfile.self)
            #expect(mine.email == "owner@example.org")
            #expect(mine.balanceCents == 0)
            #expect(mine.posts.map(\.id) == [itemID])
            #expect(mine.bidsReceived.count == 1)
            #expect(mine.bids.isEmpty)

            let hers = try await client.me(alice.token)
            #expect(hers.bids.first?.status == "pending")
            #expect(hers.posts.isEmpty)
            #expect(try await client.send(.get, "/v1/me").status == .unauthorized)
        }
    }

    @Test func thePublicProfileCountsPostsAndCompletedDealsAndHidesTheEmail() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let itemID = try await client.postRental(owner.token).id
            _ = try await client.postRental(owner.token, title: "Second bike")
            let bid = try await client.bid(itemID, alice.token).decode(BidResource.self).id
            _ = try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token)
            _ = try await client.send(.post, "/v1/items/\(itemID)/complete", token: owner.token)

            let ownerReply = try await client.send(.get, "/v1/users/\(owner.id)", token: alice.token)
            #expect(ownerReply.status == .ok)
            let ownerProfile = try ownerReply.decode(PublicProfile.self)
            #expect(ownerProfile.handle == "owner")
            #expect(ownerProfile.postCount == 2)
            #expect(ownerProfile.completedDeals == 1)
            // Not even a null: the key itself must be absent, which a typed read cannot see.
            #expect(ownerReply.json["email"] == nil, "a public profile has no e-mail field at all")
            let aliceProfile = try await client.send(.get, "/v1/users/\(alice.id)", token: owner.token).decode(PublicProfile.self)
            #expect(aliceProfile.completedDeals == 1)
            #expect(aliceProfile.postCount == 0)
            #expect(try await client.me(owner.token).approvalsGiven.map(\.id) == [bid])
            let aliceMe = try await client.me(alice.token)
            #expect(aliceMe.approvalsReceived.map(\.id) == [bid])
            #expect(aliceMe.approvalsGiven.isEmpty)
            #expect(try await client.send(.get, "/v1/users/\(UUID())", token: owner.token).status == .notFound)
        }
    }
}
