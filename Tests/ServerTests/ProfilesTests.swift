import Foundation
import HummingbirdTesting
import Marketplace
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
        let clock = TestClock()
        try await withServer(today: clock.today) { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            // A request: approving a bid on a rental books days, only a request's deal completes.
            let itemID = try await client.postRequest(owner.token).id
            _ = try await client.postRental(owner.token, title: "Second bike")
            let bid = try await client.bid(itemID, alice.token).decode(BidResource.self).id
            #expect(try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token).status == .ok)
            #expect(try await client.complete(itemID, owner.token, clock: clock).status == .ok)

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

    /// Two deals with the same owner count two for the owner and one for each bidder who got
    /// one; a bid rejected because another was approved counts nothing. (This was a rental
    /// relisted and rented again; a rental no longer completes and a request cannot be
    /// relisted, so the second deal is a second request by the same owner.)
    @Test func aSecondDealCountsOnlyForItsOwnParties() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let bob = try await client.user("bob")
            let first = try await client.postRequest(owner.token, title: "Tent").id
            let second = try await client.postRequest(owner.token, title: "Stove").id
            let aliceBid = try await client.bid(first, alice.token).decode(BidResource.self).id
            let bobsLosingBid = try await client.bid(first, bob.token).decode(BidResource.self).id
            let bobBid = try await client.bid(second, bob.token).decode(BidResource.self).id
            for (itemID, bid) in [(first, aliceBid), (second, bobBid)] {
                #expect(try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token).status == .ok)
                #expect(try await client.complete(itemID, owner.token, clock: clock).status == .ok)
            }
            let bobsBids = try await client.me(bob.token).bids
            #expect(bobsBids.first { $0.id == bobsLosingBid }?.status == "rejected", "\(bobsBids)")
            func deals(_ user: UserID) async throws -> Int {
                try await client.send(.get, "/v1/users/\(user)", token: owner.token).decode(PublicProfile.self).completedDeals
            }
            #expect(try await deals(owner.id) == 2)
            #expect(try await deals(alice.id) == 1)
            #expect(try await deals(bob.id) == 1)
        }
    }

    /// `GET /v1/me` shows the newest 20 of each list and links to the rest; following the
    /// links reads every one exactly once, and a page is only ever the caller's own.
    @Test func theProfileShowsTheNewestTwentyOfEachListAndLinksToTheRest() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            var posted: [ItemID] = []
            for index in 0..<23 { posted.append(try await client.postRental(owner.token, title: "Bike \(index)").id) }
            var bids: [BidID] = []
            for item in posted.prefix(22) { bids.append(try await client.bid(item, alice.token).decode(BidResource.self).id) }
            for bid in bids.prefix(21) {
                #expect(try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token).status == .ok)
            }

            let me = try await client.me(owner.token)
            #expect(me.posts.map(\.id) == Array(posted.reversed().prefix(20)))
            #expect(me.bidsReceived.map(\.id) == Array(bids.reversed().prefix(20)))
            #expect(me.approvalsGiven.count == 20)
            #expect(me.bids.isEmpty && me.links.bids == nil && me.links.loans == nil)

            // Following each link to its end gathers the whole list, newest first, once.
            func all<Element: Codable & Sendable>(
                _ first: [Element], _ link: String?, _ id: (Element) -> UUID, token: String? = nil
            ) async throws -> [UUID] {
                var ids = first.map(id)
                var next = link
                while let path = next {
                    let reply = try await client.send(.get, path, token: token ?? owner.token)
                    #expect(reply.status == .ok, "\(path): \(reply)")
                    let page = try reply.decode(Page<Element>.self)
                    ids += page.data.map(id)
                    next = page.nextCursor.map { path.replacing(/cursor=[^&]*/, with: "cursor=\($0)") }
                }
                return ids
            }
            #expect(try await all(me.posts, me.links.posts, \.id.rawValue) == posted.reversed().map(\.rawValue))
            #expect(try await all(me.bidsReceived, me.links.bidsReceived, \.id.rawValue) == bids.reversed().map(\.rawValue))
            #expect(try await all(me.approvalsGiven, me.links.approvalsGiven, \.id.rawValue) == bids.prefix(21).reversed().map(\.rawValue))
            let hers = try await client.me(alice.token)
            #expect(
                try await all(hers.approvalsReceived, hers.links.approvalsReceived, \.id.rawValue, token: alice.token)
                    == bids.prefix(21).reversed().map(\.rawValue))

            // A small page, a status filter, and the caller's own list only.
            let two = try await client.send(.get, "/v1/me/bids?limit=2&status=approved", token: alice.token).decode(Page<BidResource>.self)
            #expect(two.data.map(\.id) == Array(bids.prefix(21).reversed().prefix(2)))
            let pending = try await client.send(.get, "/v1/me/bids?status=pending", token: alice.token).decode(Page<BidResource>.self)
            #expect(pending.data.map(\.id) == [bids[21]])
            let none = try await client.send(.get, "/v1/me/posts", token: alice.token).decode(Page<ItemResource>.self)
            #expect(none.data.isEmpty && none.nextCursor == nil)
            let bad = try await client.send(.get, "/v1/me/bids/received?limit=0&cursor=nope&status=lost", token: owner.token)
            #expect(bad.status == .unprocessableContent)
            #expect(bad.fieldCodes == ["limit": "out_of_range", "cursor": "invalid_cursor", "status": "invalid_status"])
            #expect(try await client.send(.get, "/v1/me/loans").status == .unauthorized)
        }
    }
}
