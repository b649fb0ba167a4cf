import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import Server
import Testing
import TestSupport
@testable import UseCases

extension TestClientProtocol {
    /// A registered, logged-in user: their id and token.
    func user(_ handle: String) async throws -> (id: String, token: String) {
        let id = try #require(try await register(handle)["id"] as? String)
        return (id, try await login(handle))
    }

    func postRental(_ token: String, title: String = "Road bike") async throws -> [String: Any] {
        let response = try await send(
            .post, "/v1/rentals",
            json: [
                "title": title, "description": "Fast", "category": "bikes", "dailyPriceCents": 1500,
                "location": ["lat": 27.7, "lng": 85.3, "place": "Kathmandu"], "availableFrom": "2026-12-01",
                "availableUntil": "2026-12-31",
            ], token: token)
        #expect(response.status == .created, "\(response.body)")
        return response.body
    }

    func bid(_ item: String, _ token: String) async throws -> (status: HTTPResponse.Status, body: [String: Any]) {
        let response = try await send(
            .post, "/v1/items/\(item)/bids", json: ["dailyPriceCents": 1400, "from": "2026-12-05", "until": "2026-12-07"],
            token: token)
        return (response.status, response.body)
    }
}

@Suite("Items and bids over HTTP")
struct ItemsTests {
    @Test func postBidApproveAndReadTheViews() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let bob = try await client.user("bob")

            let item = try await client.postRental(owner.token)
            let itemID = try #require(item["id"] as? String)
            #expect(item["status"] as? String == "available")
            #expect(item["ownerHandle"] as? String == "owner")
            #expect(item["dailyPriceCents"] as? Int == 1500)
            #expect(item["availableUntil"] as? String == "2026-12-31")
            #expect((item["position"] as? Int ?? 0) > 0)

            let aliceBid = try await client.bid(itemID, alice.token)
            #expect(aliceBid.status == .created)
            #expect(aliceBid.body["bidderHandle"] as? String == "alice")
            let bobBid = try await client.bid(itemID, bob.token)
            #expect(bobBid.status == .created)

            let approved = try await client.send(
                .post, "/v1/bids/\(aliceBid.body["id"] as! String)/approve", token: owner.token)
            #expect(approved.status == .ok, "\(approved.body)")
            #expect(approved.body["status"] as? String == "approved")

            let view = try await client.send(.get, "/v1/items/\(itemID)", token: bob.token)
            #expect(view.body["status"] as? String == "reserved")
            #expect(view.body["bidCount"] as? Int == 2)
            let bobNow = try await admin.query(
                "SELECT status, reason FROM bids_view WHERE bid_id = \(UUID(uuidString: bobBid.body["id"] as! String)!)"
            ).single()
            #expect(try bobNow.decode("status", as: String.self) == "rejected")
            #expect(try bobNow.decode("reason", as: String.self) == "another_bid_approved")

            // The inline views are the log folded: same status, bids and bid states.
            let store = EventStore(pool: admin, logger: TestDatabase.logger)
            let gateway = CommandGateway(store: store, logger: TestDatabase.logger)
            let (state, _) = try await gateway.load(StreamID("item", itemID), .item)
            let folded = try #require(state.item)
            #expect(folded.status.rawValue == view.body["status"] as? String)
            #expect(folded.bids.count == view.body["bidCount"] as? Int)
            let viewBids = try await admin.query(
                "SELECT bid_id, status FROM bids_view WHERE item_id = \(UUID(uuidString: itemID)!)"
            ).reduce(into: [UUID: String]()) { $0[try $1.decode("bid_id")] = try $1.decode("status") }
            #expect(viewBids == Dictionary(uniqueKeysWithValues: folded.bids.map { ($0.id.rawValue, $0.status.rawValue) }))
            // And they moved with it, in the same transactions.
            let checkpoint = try await admin.query(
                "SELECT min(position) AS low FROM projection_checkpoints WHERE name IN ('users', 'items')"
            ).single().decode("low", as: Int64.self)
            #expect(checkpoint == (try await store.headPosition()))
        }
    }

    @Test func twentyConcurrentApprovalsOverHTTPYieldOneWinner() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let itemID = try #require(try await client.postRental(owner.token)["id"] as? String)
            var bids = [String]()
            for index in 0..<20 {
                let bidder = try await client.user("bidder_\(index)")
                bids.append(try #require(try await client.bid(itemID, bidder.token).body["id"] as? String))
            }
            let statuses = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String?).self) { group in
                for bid in bids {
                    group.addTask {
                        let response = try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token)
                        return (response.status, response.body["code"] as? String)
                    }
                }
                return try await group.reduce(into: [(HTTPResponse.Status, String?)]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0.0 == .ok }.count == 1)
            #expect(statuses.filter { $0.0 == .conflict && $0.1 == "item_not_available" }.count == 19)
            let view = try await client.send(.get, "/v1/items/\(itemID)", token: owner.token)
            #expect(view.body["status"] as? String == "reserved")
        }
    }

    @Test func theWholeLifecycle() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let bob = try await client.user("bob")
            let itemID = try #require(try await client.postRental(owner.token)["id"] as? String)

            let revised = try await client.send(.patch, "/v1/items/\(itemID)", json: ["title": "Gravel bike", "dailyPriceCents": 1200], token: owner.token)
            #expect(revised.status == .ok)
            #expect(revised.body["title"] as? String == "Gravel bike")
            #expect(revised.body["dailyPriceCents"] as? Int == 1200)
            #expect(try await client.send(.patch, "/v1/items/\(itemID)", json: ["title": "Mine"], token: alice.token).status == .forbidden)

            let aliceBid = try #require(try await client.bid(itemID, alice.token).body["id"] as? String)
            let bobBid = try #require(try await client.bid(itemID, bob.token).body["id"] as? String)
            // Only the bidder withdraws; only the owner rejects.
            #expect(try await client.send(.post, "/v1/bids/\(bobBid)/withdraw", token: alice.token).status == .forbidden)
            let withdrawn = try await client.send(.post, "/v1/bids/\(bobBid)/withdraw", token: bob.token)
            #expect(withdrawn.body["status"] as? String == "withdrawn")
            #expect(try await client.send(.post, "/v1/bids/\(aliceBid)/reject", token: alice.token).status == .forbidden)

            let approved = try await client.send(.post, "/v1/bids/\(aliceBid)/approve", token: owner.token)
            #expect(approved.body["status"] as? String == "approved")
            let completed = try await client.send(.post, "/v1/items/\(itemID)/complete", token: owner.token)
            #expect(completed.body["status"] as? String == "closed")
            let relisted = try await client.send(.post, "/v1/items/\(itemID)/relist", token: owner.token)
            #expect(relisted.body["status"] as? String == "available")

            // Relisted and bid on again, then withdrawn: the pending bid is rejected with it.
            let again = try #require(try await client.bid(itemID, bob.token).body["id"] as? String)
            let gone = try await client.send(.post, "/v1/items/\(itemID)/withdraw", token: owner.token)
            #expect(gone.body["status"] as? String == "withdrawn")
            let rejected = try await client.send(.post, "/v1/bids/\(again)/reject", json: ["reason": "too late"], token: owner.token)
            #expect(rejected.status == .conflict)
            #expect(rejected.body["code"] as? String == "bid_not_pending")
            let relistWithdrawn = try await client.send(.post, "/v1/items/\(itemID)/relist", token: owner.token)
            #expect(relistWithdrawn.body["code"] as? String == "item_not_relistable")
        }
    }

    @Test func anOwnerRejectsABidWithOrWithoutAReason() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let itemID = try #require(try await client.postRental(owner.token)["id"] as? String)
            let first = try #require(try await client.bid(itemID, try await client.user("alice").token).body["id"] as? String)
            let second = try #require(try await client.bid(itemID, try await client.user("bob").token).body["id"] as? String)
            let withReason = try await client.send(.post, "/v1/bids/\(first)/reject", json: ["reason": "too cheap"], token: owner.token)
            #expect(withReason.status == .ok)
            #expect(withReason.body["reason"] as? String == "too cheap")
            let bare = try await client.send(.post, "/v1/bids/\(second)/reject", token: owner.token)
            #expect(bare.status == .ok)
            #expect(bare.body["status"] as? String == "rejected")
            #expect(try await client.send(.post, "/v1/bids/\(UUID())/reject", token: owner.token).status == .notFound)
        }
    }

    @Test func theOwnerSeesEveryBidABidderOnlyTheirOwnPageByPage() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let itemID = try #require(try await client.postRental(owner.token)["id"] as? String)
            var bidders = [(id: String, token: String)]()
            for index in 0..<5 {
                let bidder = try await client.user("bidder_\(index)")
                bidders.append(bidder)
                #expect(try await client.bid(itemID, bidder.token).status == .created)
            }
            var seen = [String]()
            var cursor: String? = nil
            repeat {
                let query = "limit=2" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try await client.send(.get, "/v1/items/\(itemID)/bids?\(query)", token: owner.token)
                #expect(page.status == .ok)
                let data = page.body["data"] as? [[String: Any]] ?? []
                #expect(data.count <= 2)
                seen += data.compactMap { $0["id"] as? String }
                cursor = page.body["nextCursor"] as? String
            } while cursor != nil
            #expect(seen.count == 5)
            #expect(Set(seen).count == 5)

            let mine = try await client.send(.get, "/v1/items/\(itemID)/bids", token: bidders[2].token)
            let mineData = mine.body["data"] as? [[String: Any]] ?? []
            #expect(mineData.count == 1)
            #expect((mineData.first?["bidderId"] as? String)?.lowercased() == bidders[2].id.lowercased())
            let stranger = try await client.user("stranger")
            #expect((try await client.send(.get, "/v1/items/\(itemID)/bids", token: stranger.token).body["data"] as? [Any])?.isEmpty == true)

            #expect(try await client.send(.get, "/v1/items/\(itemID)/bids?limit=0", token: owner.token).status == .unprocessableContent)
            #expect(try await client.send(.get, "/v1/items/\(itemID)/bids?limit=101", token: owner.token).status == .unprocessableContent)
            #expect(try await client.send(.get, "/v1/items/\(itemID)/bids?cursor=garbage", token: owner.token).status == .unprocessableContent)
        }
    }

    @Test func contactEmailsAppearOnlyAfterApprovalAndOnlyToTheTwoParties() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let bob = try await client.user("bob")
            let itemID = try #require(try await client.postRental(owner.token)["id"] as? String)
            let aliceBid = try #require(try await client.bid(itemID, alice.token).body["id"] as? String)
            _ = try await client.bid(itemID, bob.token)

            for token in [owner.token, alice.token, bob.token] {
                #expect(try await client.send(.get, "/v1/items/\(itemID)", token: token).body["contactEmail"] is NSNull)
            }
            #expect(try await client.send(.post, "/v1/bids/\(aliceBid)/approve", token: owner.token).status == .ok)
            #expect(try await client.send(.get, "/v1/items/\(itemID)", token: owner.token).body["contactEmail"] as? String == "alice@example.org")
            #expect(try await client.send(.get, "/v1/items/\(itemID)", token: alice.token).body["contactEmail"] as? String == "owner@example.org")
            #expect(try await client.send(.get, "/v1/items/\(itemID)", token: bob.token).body["contactEmail"] is NSNull)
            let stranger = try await client.user("stranger")
            #expect(try await client.send(.get, "/v1/items/\(itemID)", token: stranger.token).body["contactEmail"] is NSNull)
        }
    }

    @Test func stateRulesAnswer409OverHTTP() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let itemID = try #require(try await client.postRental(owner.token)["id"] as? String)
            let early = try await client.send(.post, "/v1/items/\(itemID)/complete", token: owner.token)
            #expect(early.status == .conflict)
            #expect(early.body["code"] as? String == "item_not_reserved")
            let bid = try #require(try await client.bid(itemID, alice.token).body["id"] as? String)
            _ = try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token)
            let revise = try await client.send(.patch, "/v1/items/\(itemID)", json: ["title": "Late"], token: owner.token)
            #expect(revise.status == .conflict)
            #expect(revise.body["code"] as? String == "item_not_available")
            let lateBid = try await client.bid(itemID, try await client.user("bob").token)
            #expect(lateBid.status == .conflict)
            #expect(lateBid.body["code"] as? String == "item_not_available")
            let again = try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token)
            #expect(again.status == .conflict)
        }
    }

    @Test func twentyConcurrentBidsOverHTTPAllLand() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let itemID = try #require(try await client.postRental(owner.token)["id"] as? String)
            var tokens = [String]()
            for index in 0..<20 { tokens.append(try await client.user("bidder_\(index)").token) }
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for token in tokens { group.addTask { try await client.bid(itemID, token).status } }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(statuses.allSatisfy { $0 == .created })
            let view = try await client.send(.get, "/v1/items/\(itemID)", token: owner.token)
            #expect(view.body["bidCount"] as? Int == 20)
        }
    }

    @Test func invalidPostingsListEveryField() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let response = try await client.send(
                .post, "/v1/rentals",
                json: ["title": "", "category": "boats", "location": ["lat": 12], "availableFrom": "2026-02-30"],
                token: owner.token)
            #expect(response.status == .unprocessableContent)
            let fields = Set((response.body["errors"] as? [[String: Any]] ?? []).compactMap { $0["field"] as? String })
            #expect(fields == ["category", "location", "availableFrom", "dailyPriceCents", "title"], "the empty title too, with the rest")
            let badPrice = try await client.send(
                .post, "/v1/rentals",
                json: ["title": "x", "category": "bikes", "dailyPriceCents": 0, "location": ["lat": 100, "lng": 0]],
                token: owner.token)
            #expect(badPrice.status == .unprocessableContent)
            let domainFields = Set((badPrice.body["errors"] as? [[String: Any]] ?? []).compactMap { $0["field"] as? String })
            #expect(domainFields == ["dailyPriceCents", "location.lat"])
            let items = try await admin.query("SELECT count(*) AS n FROM items_view").single().decode("n", as: Int.self)
            #expect(items == 0)
        }
    }

    @Test func rulesAreEnforcedOverHTTP() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let itemID = try #require(try await client.postRental(owner.token)["id"] as? String)

            #expect(try await client.send(.post, "/v1/rentals", json: [:]).status == .unauthorized)
            let own = try await client.bid(itemID, owner.token)
            #expect(own.status == .forbidden)
            #expect(own.body["code"] as? String == "cannot_bid_on_own_item")
            #expect(try await client.bid(itemID, alice.token).status == .created)
            let twice = try await client.bid(itemID, alice.token)
            #expect(twice.status == .conflict)
            #expect(twice.body["code"] as? String == "pending_bid_exists")
            let outside = try await client.send(
                .post, "/v1/items/\(itemID)/bids", json: ["dailyPriceCents": 1400, "from": "2027-01-05", "until": "2027-01-07"],
                token: try await client.user("bob").token)
            #expect(outside.status == .unprocessableContent)
            #expect(outside.body["code"] as? String == "outside_window")
            let unknown = try await client.send(.get, "/v1/items/\(UUID())", token: alice.token)
            #expect(unknown.status == .notFound)
            #expect(unknown.body["code"] as? String == "item_not_found")
            #expect(try await client.send(.get, "/v1/items/not-a-uuid", token: alice.token).status == .notFound)
        }
    }
}
