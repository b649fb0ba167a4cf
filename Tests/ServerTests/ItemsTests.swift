import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import Server
import ServerTestSupport
import Testing
import TestSupport
@testable import UseCases

extension TestClientProtocol {
    /// A bid of 1400 a day for the days given; the answer, which may be a refusal.
    fileprivate func bid(_ item: ItemID, _ token: String, from: String, until: String) async throws -> Reply {
        try await send(.post, "/v1/items/\(item)/bids", body: API.BidBody(dailyPriceCents: 1400, from: from, until: until), token: token)
    }
}

@Suite("Items and bids over HTTP")
struct ItemsTests {
    /// Two resources as JSON, equal field for field but for `position` (the command's own).
    static func sameButPosition(_ answered: [String: Any], _ stored: [String: Any]) -> Bool {
        var (answered, stored) = (answered, stored)
        answered["position"] = nil
        stored["position"] = nil
        return NSDictionary(dictionary: answered) == NSDictionary(dictionary: stored)
    }

    /// A posting answers from its event, not by reading the view back: the answer must be
    /// what reading it gives, field for field (but `position`, the command's own), for a
    /// rental with a window and odd numbers and for a request; a repeat with the same key
    /// answers the same again.
    @Test func aPostingAnswersWhatReadingItGives() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let postings: [(String, [String: Any])] = [
                (
                    "/v1/rentals",
                    [
                        "title": "Drill \"pro\" ✓", "description": "18 V\nwith case", "category": "tools", "dailyPriceCents": 1999,
                        "location": ["lat": 27.712099152614083, "lng": -0.1, "place": "Patan"],
                        "availableFrom": "2026-12-01", "availableUntil": "2026-12-31",
                    ]
                ),
                ("/v1/rentals", ["title": "Tent", "category": "sports", "dailyPriceCents": 1, "location": ["lat": -33.8688, "lng": 151]]),
                (
                    "/v1/requests",
                    [
                        "title": "Ladder", "category": "tools", "maxDailyPriceCents": 500, "neededFrom": "2026-12-10",
                        "neededUntil": "2026-12-12", "location": ["lat": 1e-7, "lng": 85.324, "place": ""],
                    ]
                ),
                ("/v1/requests", ["title": "Van", "category": "other", "neededFrom": "2026-12-10", "neededUntil": "2026-12-10", "location": ["lat": 0, "lng": 0]]),
            ]
            for (index, (path, body)) in postings.enumerated() {
                let key = "posting-\(index)"
                let posted = try await client.send(.post, path, json: body, token: owner.token, idempotencyKey: key)
                #expect(posted.status == .created, "\(path) \(index): \(posted)")
                let answered = posted.json
                let id = try #require(answered["id"] as? String)
                #expect(answered["position"] is NSNumber)
                let stored = try await client.send(.get, "/v1/items/\(id)", token: owner.token).json
                #expect(Self.sameButPosition(answered, stored), "\(path): \(answered) against \(stored)")
                let repeated = try await client.send(.post, path, json: body, token: owner.token, idempotencyKey: key)
                #expect(Self.sameButPosition(repeated.json, stored))
            }
        }
    }

    /// A bid answers, the moment it is placed, what the owner's list of bids then reads, field
    /// for field (but `position`): with a message of odd bytes and without one; a repeat
    /// with the same key answers the same bid again.
    @Test func aBidAnswersWhatReadingItGives() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let item = try await client.postRental(owner.token)
            let bodies = [
                API.BidBody(dailyPriceCents: 1234, from: "2026-12-02", until: "2026-12-09", message: "Fine \"bike\" ✓\nthanks"),
                API.BidBody(dailyPriceCents: 1, from: "2026-12-10", until: "2026-12-10"),
            ]
            for (index, body) in bodies.enumerated() {
                // One pending bid a bidder.
                let bidder = try await client.user("bidder\(index)")
                let key = "bid-\(index)"
                let placed = try await client.send(.post, "/v1/items/\(item.id)/bids", body: body, token: bidder.token, idempotencyKey: key)
                #expect(placed.status == .created, "\(index): \(placed)")
                let answered = placed.json
                let id = try #require(answered["id"] as? String)
                #expect(answered["position"] is NSNumber)
                let list = try await client.send(.get, "/v1/items/\(item.id)/bids", token: owner.token)
                let rows = try #require(list.json["data"] as? [[String: Any]])
                let stored = try #require(rows.first { $0["id"] as? String == id }, "\(rows)")
                #expect(Self.sameButPosition(answered, stored), "\(answered) against \(stored)")
                let repeated = try await client.send(.post, "/v1/items/\(item.id)/bids", body: body, token: bidder.token, idempotencyKey: key)
                #expect(Self.sameButPosition(repeated.json, stored))
            }
        }
    }

    @Test func postBidApproveAndReadTheViews() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let bob = try await client.user("bob")

            let item = try await client.postRental(owner.token)
            let itemID = item.id
            #expect(item.status == "available")
            #expect(item.ownerHandle == "owner")
            #expect(item.dailyPriceCents == 1500)
            #expect(item.availableUntil == "2026-12-31")
            #expect((item.position ?? 0) > 0)

            let aliceReply = try await client.bid(itemID, alice.token)
            #expect(aliceReply.status == .created)
            let aliceBid = try aliceReply.decode(BidResource.self)
            #expect(aliceBid.bidderHandle == "alice")
            let bobReply = try await client.bid(itemID, bob.token)
            #expect(bobReply.status == .created)
            let bobBid = try bobReply.decode(BidResource.self)
            // Carol's days do not overlap Alice's.
            let carolReply = try await client.bid(itemID, try await client.user("carol").token, from: "2026-12-10", until: "2026-12-12")
            #expect(carolReply.status == .created, "\(carolReply)")
            let carolBid = try carolReply.decode(BidResource.self)

            let approved = try await client.send(.post, "/v1/bids/\(aliceBid.id)/approve", token: owner.token)
            #expect(approved.status == .ok, "\(approved)")
            #expect(try approved.decode(BidResource.self).status == "approved")

            // A rental is booked by date: it stays available; only the overlapping bid is rejected.
            let view = try await client.send(.get, "/v1/items/\(itemID)", token: bob.token).decode(ItemResource.self)
            #expect(view.status == "available")
            #expect(view.bidCount == 3)
            let bobNow = try await admin.query(
                "SELECT status, reason FROM bids_view WHERE bid_id = \(bobBid.id.rawValue)"
            ).single()
            #expect(try bobNow.decode("status", as: String.self) == "rejected")
            #expect(try bobNow.decode("reason", as: String.self) == "dates_taken")
            let carolNow = try await admin.query(
                "SELECT status FROM bids_view WHERE bid_id = \(carolBid.id.rawValue)"
            ).single()
            #expect(try carolNow.decode("status", as: String.self) == "pending")

            // The inline views are the log folded: same status, bids and bid states.
            let store = EventStore(pool: admin, logger: TestDatabase.logger)
            let gateway = CommandGateway(store: store, logger: TestDatabase.logger)
            let (state, _) = try await gateway.load(StreamID("item", itemID), .item)
            let folded = try #require(state.item)
            #expect(folded.status.rawValue == view.status)
            #expect(folded.bids.count == view.bidCount)
            let viewBids = try await admin.query(
                "SELECT bid_id, status FROM bids_view WHERE item_id = \(itemID.rawValue)"
            ).reduce(into: [UUID: String]()) { $0[try $1.decode("bid_id")] = try $1.decode("status") }
            #expect(viewBids == Dictionary(uniqueKeysWithValues: folded.bids.map { ($0.id.rawValue, $0.status.rawValue) }))
            // And they moved with it, in the same transactions.
            let checkpoint = try await admin.query(
                "SELECT min(position) AS low FROM projection_checkpoints WHERE name IN ('users', 'items')"
            ).single().decode("low", as: Int64.self)
            #expect(checkpoint == (try await store.headPosition()))
        }
    }

    /// Twenty bids on the same days of one rental, approved at once: one booking; the winner
    /// rejected the rest (`dates_taken`), so their approvals find them no longer pending.
    @Test func twentyConcurrentApprovalsOverHTTPYieldOneWinner() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let itemID = try await client.postRental(owner.token).id
            var bids = [BidID]()
            for index in 0..<20 {
                let bidder = try await client.user("bidder_\(index)")
                bids.append(try await client.bid(itemID, bidder.token).decode(BidResource.self).id)
            }
            let statuses = try await withThrowingTaskGroup(of: (BidID, HTTPResponse.Status, String?).self) { group in
                for bid in bids {
                    group.addTask {
                        let response = try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token)
                        return (bid, response.status, response.code)
                    }
                }
                return try await group.reduce(into: [(BidID, HTTPResponse.Status, String?)]()) { $0.append($1) }
            }
            let winners = statuses.filter { $0.1 == .ok }.map { $0.0 }
            #expect(winners.count == 1)
            #expect(statuses.filter { $0.1 == .conflict && $0.2 == "bid_not_pending" }.count == 19, "\(statuses)")
            let view = try await client.send(.get, "/v1/items/\(itemID)", token: owner.token).decode(ItemResource.self)
            #expect(view.status == "available")
            let rows = try await client.send(.get, "/v1/items/\(itemID)/bids?limit=100", token: owner.token).decode(Page<BidResource>.self).data
            #expect(rows.count == 20)
            #expect(rows.filter { $0.status == "approved" }.map(\.id) == winners)
            #expect(rows.filter { $0.status == "rejected" && $0.reason == "dates_taken" }.count == 19)
            let winner = try #require(winners.first)
            #expect(try await client.send(.get, "/v1/bookings/\(winner)", token: owner.token).status == .ok)
        }
    }

    @Test func theWholeLifecycle() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let bob = try await client.user("bob")
            let itemID = try await client.postRental(owner.token).id

            let revised = try await client.send(
                .patch, "/v1/items/\(itemID)", body: API.RevisionBody(title: "Gravel bike", dailyPriceCents: 1200), token: owner.token)
            #expect(revised.status == .ok)
            let revision = try revised.decode(ItemResource.self)
            #expect(revision.title == "Gravel bike")
            #expect(revision.dailyPriceCents == 1200)
            #expect(
                try await client.send(.patch, "/v1/items/\(itemID)", body: API.RevisionBody(title: "Mine"), token: alice.token).status
                    == .forbidden)

            let aliceBid = try await client.bid(itemID, alice.token).decode(BidResource.self).id
            let bobBid = try await client.bid(itemID, bob.token).decode(BidResource.self).id
            // Only the bidder withdraws; only the owner rejects.
            #expect(try await client.send(.post, "/v1/bids/\(bobBid)/withdraw", token: alice.token).status == .forbidden)
            let withdrawn = try await client.send(.post, "/v1/bids/\(bobBid)/withdraw", token: bob.token)
            #expect(try withdrawn.decode(BidResource.self).status == "withdrawn")
            #expect(try await client.send(.post, "/v1/bids/\(aliceBid)/reject", token: alice.token).status == .forbidden)

            // Approval books the rental's days; the rental itself is neither completed nor relisted.
            let approved = try await client.send(.post, "/v1/bids/\(aliceBid)/approve", token: owner.token)
            #expect(try approved.decode(BidResource.self).status == "approved")
            #expect(try await client.send(.get, "/v1/items/\(itemID)", token: owner.token).decode(ItemResource.self).status == "available")
            for action in ["complete", "relist"] {
                let refused = try await client.send(.post, "/v1/items/\(itemID)/\(action)", token: owner.token)
                #expect(refused.status == .conflict, "\(action)")
                #expect(refused.code == "not_a_request", "\(action): \(refused)")
            }

            // Bid on again, on other days; a rental with a booking to come is not withdrawn from
            // under its renter.
            let booked = try await client.bid(itemID, bob.token)
            #expect(booked.status == .conflict)
            #expect(booked.code == "dates_unavailable")
            let again = try await client.bid(itemID, bob.token, from: "2026-12-10", until: "2026-12-12").decode(BidResource.self).id
            let kept = try await client.send(.post, "/v1/items/\(itemID)/withdraw", token: owner.token)
            #expect(kept.status == .conflict)
            #expect(kept.code == "dates_booked")
            // Another rental, bid on and withdrawn: the pending bid is rejected with it.
            let lamp = try await client.postRental(owner.token, title: "Lamp").id
            let onLamp = try await client.bid(lamp, bob.token).decode(BidResource.self).id
            let gone = try await client.send(.post, "/v1/items/\(lamp)/withdraw", token: owner.token)
            #expect(try gone.decode(ItemResource.self).status == "withdrawn")
            let rejected = try await client.send(
                .post, "/v1/bids/\(onLamp)/reject", body: API.RejectionBody(reason: "too late"), token: owner.token)
            #expect(rejected.status == .conflict)
            #expect(rejected.code == "bid_not_pending")
            _ = again

            // A request is reserved whole, completed, and never relisted.
            let need = try await client.postRequest(owner.token).id
            let offer = try await client.bid(need, alice.token).decode(BidResource.self).id
            #expect(try await client.send(.post, "/v1/bids/\(offer)/approve", token: owner.token).status == .ok)
            #expect(try await client.send(.get, "/v1/items/\(need)", token: owner.token).decode(ItemResource.self).status == "reserved")
            let duringTheDeal = try await client.send(.post, "/v1/items/\(need)/complete", token: owner.token)
            #expect(duringTheDeal.status == .conflict && duringTheDeal.code == "deal_not_ended", "\(duringTheDeal)")
            let completed = try await client.complete(need, owner.token, clock: clock)
            #expect(try completed.decode(ItemResource.self).status == "closed")
            let relistClosed = try await client.send(.post, "/v1/items/\(need)/relist", token: owner.token)
            #expect(relistClosed.status == .conflict)
            #expect(relistClosed.code == "item_not_relistable")
        }
    }

    @Test func anOwnerRejectsABidWithOrWithoutAReason() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let itemID = try await client.postRental(owner.token).id
            let first = try await client.bid(itemID, try await client.user("alice").token).decode(BidResource.self).id
            let second = try await client.bid(itemID, try await client.user("bob").token).decode(BidResource.self).id
            let withReason = try await client.send(
                .post, "/v1/bids/\(first)/reject", body: API.RejectionBody(reason: "too cheap"), token: owner.token)
            #expect(withReason.status == .ok)
            #expect(try withReason.decode(BidResource.self).reason == "too cheap")
            let bare = try await client.send(.post, "/v1/bids/\(second)/reject", token: owner.token)
            #expect(bare.status == .ok)
            #expect(try bare.decode(BidResource.self).status == "rejected")
            #expect(try await client.send(.post, "/v1/bids/\(UUID())/reject", token: owner.token).status == .notFound)
        }
    }

    @Test func theOwnerSeesEveryBidABidderOnlyTheirOwnPageByPage() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let itemID = try await client.postRental(owner.token).id
            var bidders = [(id: UserID, token: String)]()
            for index in 0..<5 {
                let bidder = try await client.user("bidder_\(index)")
                bidders.append(bidder)
                #expect(try await client.bid(itemID, bidder.token).status == .created)
            }
            var seen = [BidID]()
            var cursor: String? = nil
            repeat {
                let query = "limit=2" + (cursor.map { "&cursor=\($0)" } ?? "")
                let reply = try await client.send(.get, "/v1/items/\(itemID)/bids?\(query)", token: owner.token)
                #expect(reply.status == .ok)
                let page = try reply.decode(Page<BidResource>.self)
                #expect(page.data.count <= 2)
                seen += page.data.map(\.id)
                cursor = page.nextCursor
            } while cursor != nil
            #expect(seen.count == 5)
            #expect(Set(seen).count == 5)

            let mine = try await client.send(.get, "/v1/items/\(itemID)/bids", token: bidders[2].token).decode(Page<BidResource>.self)
            #expect(mine.data.count == 1)
            #expect(mine.data.first?.bidderId == bidders[2].id)
            let stranger = try await client.user("stranger")
            #expect(try await client.send(.get, "/v1/items/\(itemID)/bids", token: stranger.token).decode(Page<BidResource>.self).data.isEmpty)

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
            // A request, reserved whole: its item shows the e-mails.
            let itemID = try await client.postRequest(owner.token).id
            let aliceBid = try await client.bid(itemID, alice.token).decode(BidResource.self).id
            _ = try await client.bid(itemID, bob.token)

            // Hidden is an explicit null, not a missing key: read from the JSON itself.
            for token in [owner.token, alice.token, bob.token] {
                #expect(try await client.send(.get, "/v1/items/\(itemID)", token: token).json["contactEmail"] is NSNull)
            }
            #expect(try await client.send(.post, "/v1/bids/\(aliceBid)/approve", token: owner.token).status == .ok)
            #expect(try await client.send(.get, "/v1/items/\(itemID)", token: owner.token).decode(ItemResource.self).contactEmail == "alice@example.org")
            #expect(try await client.send(.get, "/v1/items/\(itemID)", token: alice.token).decode(ItemResource.self).contactEmail == "owner@example.org")
            #expect(try await client.send(.get, "/v1/items/\(itemID)", token: bob.token).json["contactEmail"] is NSNull)
            let stranger = try await client.user("stranger")
            #expect(try await client.send(.get, "/v1/items/\(itemID)", token: stranger.token).json["contactEmail"] is NSNull)

            // A rental's booking carries them instead; its item shows none, even to the two parties.
            let rental = try await client.postRental(owner.token).id
            let booked = try await client.bid(rental, alice.token).decode(BidResource.self).id
            #expect(try await client.send(.post, "/v1/bids/\(booked)/approve", token: owner.token).status == .ok)
            for token in [owner.token, alice.token] {
                #expect(try await client.send(.get, "/v1/items/\(rental)", token: token).json["contactEmail"] is NSNull)
            }
            let forOwner = try await client.send(.get, "/v1/bookings/\(booked)", token: owner.token)
            #expect(forOwner.status == .ok, "\(forOwner)")
            #expect(try forOwner.decode(BookingResource.self).contactEmail == "alice@example.org")
            #expect(try await client.send(.get, "/v1/bookings/\(booked)", token: alice.token).decode(BookingResource.self).contactEmail == "owner@example.org")
            #expect(try await client.send(.get, "/v1/bookings/\(booked)", token: stranger.token).status == .notFound)
        }
    }

    @Test func stateRulesAnswer409OverHTTP() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let bob = try await client.user("bob")
            // A request: reserved whole by its approval.
            let itemID = try await client.postRequest(owner.token).id
            let early = try await client.send(.post, "/v1/items/\(itemID)/complete", token: owner.token)
            #expect(early.status == .conflict)
            #expect(early.code == "item_not_reserved")
            let bid = try await client.bid(itemID, alice.token).decode(BidResource.self).id
            #expect(try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token).status == .ok)
            let revise = try await client.send(.patch, "/v1/items/\(itemID)", body: API.RevisionBody(title: "Late"), token: owner.token)
            #expect(revise.status == .conflict)
            #expect(revise.code == "item_not_available")
            let lateBid = try await client.bid(itemID, bob.token)
            #expect(lateBid.status == .conflict)
            #expect(lateBid.code == "item_not_available")
            let again = try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token)
            #expect(again.status == .conflict)

            // A rental: booked by date, and still open to revision and to bids on other days.
            let rental = try await client.postRental(owner.token).id
            let rentalComplete = try await client.send(.post, "/v1/items/\(rental)/complete", token: owner.token)
            #expect(rentalComplete.status == .conflict)
            #expect(rentalComplete.code == "not_a_request")
            let first = try await client.bid(rental, alice.token).decode(BidResource.self).id
            let overlapping = try await client.bid(rental, bob.token).decode(BidResource.self).id
            #expect(try await client.send(.post, "/v1/bids/\(first)/approve", token: owner.token).status == .ok)
            #expect(
                try await client.send(.patch, "/v1/items/\(rental)", body: API.RevisionBody(title: "Still open"), token: owner.token).status
                    == .ok)
            let rejectedApproval = try await client.send(.post, "/v1/bids/\(overlapping)/approve", token: owner.token)
            #expect(rejectedApproval.status == .conflict)
            #expect(rejectedApproval.code == "bid_not_pending")
            let carol = try await client.user("carol").token
            let overBooked = try await client.bid(rental, carol)
            #expect(overBooked.status == .conflict)
            #expect(overBooked.code == "dates_unavailable")
            #expect(try await client.bid(rental, carol, from: "2026-12-08", until: "2026-12-09").status == .created)
        }
    }

    @Test func twentyConcurrentBidsOverHTTPAllLand() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let itemID = try await client.postRental(owner.token).id
            var tokens = [String]()
            for index in 0..<20 { tokens.append(try await client.user("bidder_\(index)").token) }
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for token in tokens { group.addTask { try await client.bid(itemID, token).status } }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(statuses.allSatisfy { $0 == .created })
            let view = try await client.send(.get, "/v1/items/\(itemID)", token: owner.token).decode(ItemResource.self)
            #expect(view.bidCount == 20)
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
            let fields = Set((response.problem?.errors ?? []).map(\.field))
            #expect(fields == ["category", "location", "availableFrom", "dailyPriceCents", "title"], "the empty title too, with the rest")
            let badPrice = try await client.send(
                .post, "/v1/rentals",
                json: ["title": "x", "category": "bikes", "dailyPriceCents": 0, "location": ["lat": 100, "lng": 0]],
                token: owner.token)
            #expect(badPrice.status == .unprocessableContent)
            let domainFields = Set((badPrice.problem?.errors ?? []).map(\.field))
            #expect(domainFields == ["dailyPriceCents", "location.lat"])
            let items = try await admin.query("SELECT count(*) AS n FROM items_view").single().decode("n", as: Int.self)
            #expect(items == 0)
        }
    }

    @Test func rulesAreEnforcedOverHTTP() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let itemID = try await client.postRental(owner.token).id

            #expect(try await client.send(.post, "/v1/rentals", json: [:]).status == .unauthorized)
            let own = try await client.bid(itemID, owner.token)
            #expect(own.status == .forbidden)
            #expect(own.code == "cannot_bid_on_own_item")
            #expect(try await client.bid(itemID, alice.token).status == .created)
            let twice = try await client.bid(itemID, alice.token)
            #expect(twice.status == .conflict)
            #expect(twice.code == "pending_bid_exists")
            let outside = try await client.send(
                .post, "/v1/items/\(itemID)/bids", body: API.BidBody(dailyPriceCents: 1400, from: "2027-01-05", until: "2027-01-07"),
                token: try await client.user("bob").token)
            #expect(outside.status == .unprocessableContent)
            #expect(outside.code == "outside_window")
            let unknown = try await client.send(.get, "/v1/items/\(UUID())", token: alice.token)
            #expect(unknown.status == .notFound)
            #expect(unknown.code == "item_not_found")
            #expect(try await client.send(.get, "/v1/items/not-a-uuid", token: alice.token).status == .notFound)
        }
    }
}
