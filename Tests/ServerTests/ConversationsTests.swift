import Foundation
import HummingbirdTesting
import Marketplace
import Projections
import ServerTestSupport
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

extension TestClientProtocol {
    /// A rental by `owner` with a bid by `bidder`: the item and the bid.
    func bidOn(owner: String, bidder: String) async throws -> (item: ItemID, bid: BidID) {
        let item = try await postRental(owner).id
        let placed = try await bid(item, bidder)
        #expect(placed.status == .created, "\(placed)")
        return (item, try placed.decode(BidResource.self).id)
    }

    /// A request by `owner` with a bid by `bidder`: the item and the bid. (Approving a bid on a
    /// rental books days and leaves the rental available; only a request is reserved and completed.)
    func bidOnRequest(owner: String, bidder: String, title: String = "Tent") async throws -> (item: ItemID, bid: BidID) {
        let item = try await postRequest(owner, title: title).id
        let placed = try await bid(item, bidder)
        #expect(placed.status == .created, "\(placed)")
        return (item, try placed.decode(BidResource.self).id)
    }

    /// A request by `owner`, met by `bidder`: bid, approved, completed after its days.
    func completedDeal(owner: String, bidder: String, title: String = "Tent", clock: TestClock) async throws
        -> (item: ItemID, bid: BidID)
    {
        let deal = try await bidOnRequest(owner: owner, bidder: bidder, title: title)
        #expect(try await send(.post, "/v1/bids/\(deal.bid)/approve", token: owner).status == .ok)
        #expect(try await complete(deal.item, owner, clock: clock).status == .ok)
        return deal
    }
}

@Suite("Reviews, conversations and the feed")
struct ConversationsTests {
    @Test func eachSideOfACompletedDealReviewsTheOtherOnce() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            let renter = try await client.user("renter")
            let stranger = try await client.user("stranger")
            let deal = try await client.bidOnRequest(owner: owner.token, bidder: renter.token)
            let review = API.ReviewBody(stars: 5, text: "Smooth ride")
            let before = try await eventCount(admin)

            let pending = try await client.send(.post, "/v1/items/\(deal.item)/reviews", body: review, token: renter.token)
            #expect(pending.status == .forbidden && pending.code == "not_a_party", "a pending bid is no deal: \(pending)")
            #expect(try await client.send(.post, "/v1/bids/\(deal.bid)/approve", token: owner.token).status == .ok)
            let reserved = try await client.send(.post, "/v1/items/\(deal.item)/reviews", body: review, token: renter.token)
            #expect(reserved.status == .conflict && reserved.code == "deal_not_completed", "\(reserved)")
            let early = try await client.send(.post, "/v1/items/\(deal.item)/reviews", body: review, token: owner.token)
            #expect(early.status == .conflict && early.code == "deal_not_completed", "\(early)")
            #expect(try await client.complete(deal.item, owner.token, clock: clock).status == .ok)
            let afterCompletion = try await eventCount(admin)
            #expect(afterCompletion == before + 3, "approved, reserved, closed: the refusals wrote nothing")

            let outsider = try await client.send(.post, "/v1/items/\(deal.item)/reviews", body: review, token: stranger.token)
            #expect(outsider.status == .forbidden && outsider.code == "not_a_party", "\(outsider)")
            for (body, field, code) in [
                (["stars": 0] as [String: Any], "stars", "invalid_stars"), (["stars": 6], "stars", "invalid_stars"),
                (["stars": 4, "text": String(repeating: "x", count: 2001)], "text", "too_long"),
                (["text": "no stars"], "stars", "required"),
            ] {
                let refused = try await client.send(.post, "/v1/items/\(deal.item)/reviews", json: body, token: renter.token)
                #expect(refused.status == .unprocessableContent, "\(body)")
                #expect(refused.fieldCodes[field] == code, "\(body): \(refused)")
            }
            #expect(try await eventCount(admin) == afterCompletion, "no refusal wrote anything")

            let written = try await client.send(.post, "/v1/items/\(deal.item)/reviews", body: review, token: renter.token)
            #expect(written.status == .created, "\(written)")
            let renterReview = try written.decode(ReviewResource.self)
            #expect(renterReview.stars == 5 && renterReview.role == "bidder" && renterReview.subjectId == owner.id)
            #expect(renterReview.authorHandle == "renter" && renterReview.text == "Smooth ride")
            let again = try await client.send(.post, "/v1/items/\(deal.item)/reviews", body: API.ReviewBody(stars: 1), token: renter.token)
            #expect(again.status == .conflict && again.code == "already_reviewed", "\(again)")
            let ownerReview = try await client.send(
                .post, "/v1/items/\(deal.item)/reviews", body: API.ReviewBody(stars: 2), token: owner.token)
            #expect(ownerReview.status == .created, "\(ownerReview)")
            #expect(try ownerReview.decode(ReviewResource.self).subjectId == renter.id)

            let item = try await client.send(.get, "/v1/items/\(deal.item)", token: stranger.token).decode(ItemResource.self)
            #expect(item.rating == 5.0 && item.reviewCount == 1, "the renter's review rates the item, the owner's does not")
            let ownerProfile = try await client.send(.get, "/v1/users/\(owner.id)", token: stranger.token).decode(PublicProfile.self)
            #expect(ownerProfile.rating == 5.0 && ownerProfile.reviewCount == 1)
            #expect(try await client.me(renter.token).rating == 2.0)
            #expect(try await client.me(stranger.token).rating == nil, "no review, no rating")
            let aboutOwner = try await client.send(.get, "/v1/users/\(owner.id)/reviews", token: stranger.token)
                .decode(Page<ReviewResource>.self)
            #expect(aboutOwner.data.map(\.stars) == [5])
            let ofItem = try await client.send(.get, "/v1/items/\(deal.item)/reviews", token: stranger.token)
                .decode(Page<ReviewResource>.self)
            #expect(ofItem.data.map(\.authorId) == [renter.id])

            // A second deal with the same owner (a request cannot be relisted): a second request,
            // met by the stranger; a new deal, so a new review each, and the first one stands.
            let second = try await client.completedDeal(owner: owner.token, bidder: stranger.token, title: "Stove", clock: clock)
            let oldRenter = try await client.send(
                .post, "/v1/items/\(deal.item)/reviews", body: API.ReviewBody(stars: 3), token: renter.token)
            #expect(oldRenter.code == "already_reviewed", "the first deal is still reviewed: \(oldRenter)")
            let notTheirs = try await client.send(
                .post, "/v1/items/\(second.item)/reviews", body: API.ReviewBody(stars: 3), token: renter.token)
            #expect(notTheirs.status == .forbidden && notTheirs.code == "not_a_party", "the first renter has no part in the second deal: \(notTheirs)")
            #expect(try await client.send(
                .post, "/v1/items/\(second.item)/reviews", body: API.ReviewBody(stars: 3), token: stranger.token).status == .created)
            #expect(try await client.send(
                .post, "/v1/items/\(second.item)/reviews", body: API.ReviewBody(stars: 4), token: owner.token).status == .created)
            let first = try await client.send(.get, "/v1/items/\(deal.item)", token: stranger.token).decode(ItemResource.self)
            #expect(first.rating == 5.0 && first.reviewCount == 1, "the second deal's reviews do not rate the first item")
            let rated = try await client.send(.get, "/v1/items/\(second.item)", token: renter.token).decode(ItemResource.self)
            #expect(rated.rating == 3.0 && rated.reviewCount == 1)
            let rerated = try await client.send(.get, "/v1/users/\(owner.id)", token: renter.token).decode(PublicProfile.self)
            #expect(rerated.rating == 4.0 && rerated.reviewCount == 2, "both deals rate the owner")
            #expect(try await client.me(stranger.token).rating == 4.0)
            let paged = try await client.send(.get, "/v1/users/\(owner.id)/reviews?limit=1", token: renter.token)
                .decode(Page<ReviewResource>.self)
            #expect(paged.data.map(\.stars) == [3], "newest first")
            let rest = try await client.send(
                .get, "/v1/users/\(owner.id)/reviews?limit=1&cursor=\(try #require(paged.nextCursor))", token: renter.token)
            #expect(try rest.decode(Page<ReviewResource>.self).data.map(\.stars) == [5])
        }
    }

    /// The same review sent twelve times at once (each its own request, no key): one lands,
    /// the others are told it is done; the rating counts it once.
    @Test func aReviewSentManyTimesAtOnceLandsOnce() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            let renter = try await client.user("renter")
            let deal = try await client.completedDeal(owner: owner.token, bidder: renter.token, clock: clock)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<12 {
                    group.addTask {
                        try await client.send(.post, "/v1/items/\(deal.item)/reviews", body: API.ReviewBody(stars: 4), token: renter.token)
                            .status.code
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.sorted() == [201] + Array(repeating: 409, count: 11), "\(statuses)")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'ReviewWritten'") == 1)
            let item = try await client.send(.get, "/v1/items/\(deal.item)", token: owner.token).decode(ItemResource.self)
            #expect(item.reviewCount == 1 && item.rating == 4.0)
        }
    }

    @Test func onlyTheOwnerAndTheBidderTalkOnABid() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let bidder = try await client.user("bidder")
            let stranger = try await client.user("stranger")
            let deal = try await client.bidOn(owner: owner.token, bidder: bidder.token)
            let path = "/v1/bids/\(deal.bid)/messages"
            let asked = try await client.send(.post, path, body: API.MessageBody(text: "Is the saddle adjustable?"), token: bidder.token)
            #expect(asked.status == .created, "\(asked)")
            #expect(try asked.decode(MessageResource.self).authorId == bidder.id)
            #expect(try await client.send(.post, path, body: API.MessageBody(text: "Yes."), token: owner.token).status == .created)

            let before = try await eventCount(admin)
            let intruder = try await client.send(.post, path, body: API.MessageBody(text: "Hello"), token: stranger.token)
            #expect(intruder.status == .forbidden && intruder.code == "not_a_party", "\(intruder)")
            let peek = try await client.send(.get, path, token: stranger.token)
            #expect(peek.status == .forbidden && peek.code == "not_a_party", "messages are invisible to a third user: \(peek)")
            #expect(!String(decoding: peek.data, as: UTF8.self).contains("saddle"))
            for (body, code) in [
                (["text": "   "] as [String: Any], "empty"), (["text": String(repeating: "y", count: 2001)], "too_long"),
                ([:], "required"), (["text": 7], "malformed_body"),
            ] {
                let refused = try await client.send(.post, path, json: body, token: bidder.token)
                #expect(refused.status == .unprocessableContent || refused.status == .badRequest, "\(body): \(refused)")
                #expect(refused.fieldCodes["text"] == code || refused.code == code, "\(body): \(refused)")
            }
            let missing = try await client.send(
                .post, "/v1/bids/\(BidID())/messages", body: API.MessageBody(text: "Hi"), token: bidder.token)
            #expect(missing.status == .notFound, "\(missing)")
            #expect(try await client.send(
                .post, "/v1/me/blocks", body: API.BlockBody(userId: bidder.id.rawValue), token: owner.token).status == .ok)
            let blocked = try await client.send(.post, path, body: API.MessageBody(text: "Please?"), token: bidder.token)
            #expect(blocked.status == .forbidden && blocked.code == "blocked", "\(blocked)")
            #expect(try await eventCount(admin) == before + 1, "only the block was written")

            let conversation = try await client.send(.get, path, token: bidder.token).decode(Page<MessageResource>.self)
            #expect(conversation.data.map(\.text) == ["Yes.", "Is the saddle adjustable?"], "newest first")
            let first = try await client.send(.get, "\(path)?limit=1", token: owner.token).decode(Page<MessageResource>.self)
            let older = try await client.send(.get, "\(path)?limit=1&cursor=\(try #require(first.nextCursor))", token: owner.token)
                .decode(Page<MessageResource>.self)
            #expect(first.data.map(\.text) + older.data.map(\.text) == ["Yes.", "Is the saddle adjustable?"])
            #expect(older.nextCursor == nil)
        }
    }

    /// The six kinds of notice, each to the user it concerns and to nobody else, in log order;
    /// then the live stream: the backlog, a notice as it happens, and a reconnection with
    /// `Last-Event-ID` that neither loses nor repeats one.
    @Test func theFeedTellsEachUserWhatConcernsThemLiveAndResumable() async throws {
        let clock = TestClock()
        try await withServer(testing: .live, heartbeat: .milliseconds(300), today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            let renter = try await client.user("renter")
            let loser = try await client.user("loser")
            let stranger = try await client.user("stranger")
            let deal = try await client.bidOnRequest(owner: owner.token, bidder: renter.token)
            #expect(try await client.bid(deal.item, loser.token).status == .created)
            #expect(try await client.send(
                .post, "/v1/bids/\(deal.bid)/messages", body: API.MessageBody(text: "When?"), token: owner.token).status == .created)
            #expect(try await client.send(.post, "/v1/bids/\(deal.bid)/approve", token: owner.token).status == .ok)
            #expect(try await client.complete(deal.item, owner.token, clock: clock).status == .ok)
            #expect(try await client.send(
                .post, "/v1/items/\(deal.item)/reviews", body: API.ReviewBody(stars: 4), token: owner.token).status == .created)

            let borrower = try await client.user("borrower")
            try await client.fund(borrower.token, 5000)
            let (loan, lenders) = try await client.fundedLoan(borrower: borrower.token, lenders: 1, amount: 2500)
            let repaid = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", body: API.RepaymentBody(amountCents: 2500, payWith: .balance), token: borrower.token)
            #expect(repaid.status == .created || repaid.status == .ok, "\(repaid)")

            func feed(_ token: String, after: Int64 = 0) async throws -> [Notice] {
                let reply = try await client.send(.get, "/v1/me/feed?after=\(after)", token: token)
                #expect(reply.status == .ok, "\(reply)")
                return try reply.decode(Page<Notice>.self).data
            }
            let ownersFeed = try await feed(owner.token)
            #expect(ownersFeed.map(\.kind) == ["bid_received", "bid_received"])
            #expect(ownersFeed.map(\.fromUserId) == [renter.id, loser.id] && ownersFeed.first?.title == "Tent")
            let rentersFeed = try await feed(renter.token)
            #expect(rentersFeed.map(\.kind) == ["message_received", "bid_approved", "review_received"], "\(rentersFeed)")
            #expect(rentersFeed.last?.stars == 4 && rentersFeed.first?.fromHandle == "owner")
            #expect(try await feed(loser.token).map(\.kind) == ["bid_rejected"])
            #expect(try await feed(stranger.token).isEmpty, "nothing concerned the stranger")
            let lendersFeed = try await feed(lenders[0])
            #expect(lendersFeed.map(\.kind) == ["loan_funded", "loan_repaid", "balance_credited"], "\(lendersFeed)")
            #expect(lendersFeed.last?.amountCents == 2500 && lendersFeed.last?.loanId == loan)
            #expect(lendersFeed.map(\.position) == lendersFeed.map(\.position).sorted(), "in log order")
            #expect(try await feed(renter.token, after: rentersFeed[0].position).count == 2, "after a position")
            // By default newest first, paged by `cursor` as every list is (issue 47).
            func page(_ query: String) async throws -> Page<Notice> {
                let reply = try await client.send(.get, "/v1/me/feed?\(query)", token: lenders[0])
                #expect(reply.status == .ok, "\(query): \(reply)")
                return try reply.decode(Page<Notice>.self)
            }
            let newest = try await page("limit=2")
            #expect(newest.data.map(\.kind) == ["balance_credited", "loan_repaid"])
            let older = try await page("limit=2&cursor=\(try #require(newest.nextCursor))")
            #expect(older.data.map(\.kind) == ["loan_funded"] && older.nextCursor == nil)
            // Catching up from a position reads oldest first, and its cursor goes on that way.
            let caughtUp = try await page("after=0&limit=2")
            #expect(caughtUp.data.map(\.kind) == ["loan_funded", "loan_repaid"])
            let rest = try await page("limit=2&cursor=\(try #require(caughtUp.nextCursor))")
            #expect(rest.data.map(\.kind) == ["balance_credited"] && rest.nextCursor == nil)
            for query in ["after=0&cursor=\(try #require(newest.nextCursor))", "cursor=bm9wZQ", "cursor=%25%25"] {
                let refused = try await client.send(.get, "/v1/me/feed?\(query)", token: lenders[0])
                #expect(refused.status == .unprocessableContent && refused.fieldCodes["cursor"] == "invalid_cursor", "\(query)")
            }
            let refused = try await client.send(.get, "/v1/me/feed?after=x", token: renter.token)
            #expect(refused.status == .unprocessableContent)
            let refusedStream = try await client.send(.get, "/v1/me/feed/stream?after=-1", token: renter.token)
            #expect(refusedStream.status == .unprocessableContent && refusedStream.fieldCodes["after"] == "invalid_position")
            #expect(try await client.send(.get, "/v1/me/feed/stream").status == .unauthorized)

            // Live: the backlog after the first notice, then a message as it is written.
            let port = try #require(client.port)
            let reader = try EventStreamTests.StreamReader(port: port, path: "/v1/me/feed/stream", token: renter.token,
                                                          lastEventID: rentersFeed[0].position)
            let backlog = await Self.read(reader) { Self.ids($0).count >= 2 }
            #expect(Self.ids(backlog) == rentersFeed.dropFirst().map(\.position), "\(backlog)")
            #expect(try await client.send(
                .post, "/v1/bids/\(deal.bid)/messages", body: API.MessageBody(text: "Thanks!"), token: owner.token).status == .created)
            _ = try await client.send(
                .post, "/v1/bids/\(deal.bid)/messages", body: API.MessageBody(text: "Not for the stranger"), token: renter.token)
            let live = await Self.read(reader) { Self.ids($0).count >= 1 }
            let liveIDs = Self.ids(live)
            #expect(liveIDs.count == 1 && live.contains("event: message_received"), "\(live)")
            #expect(!live.contains("Not for the stranger"), "the renter's own message is not a notice to them")
            let quiet = await Self.read(reader) { $0.contains(": heartbeat") }
            #expect(quiet.contains(": heartbeat"))
            reader.close()

            // Gone while one more happens; back with the last id it saw: exactly the one it missed.
            _ = try await client.send(.post, "/v1/bids/\(deal.bid)/messages", body: API.MessageBody(text: "Missed?"), token: owner.token)
            // As an EventSource reconnects: to the URL it opened (`after=0` here), with the last id it saw.
            let resumed = try EventStreamTests.StreamReader(port: port, path: "/v1/me/feed/stream?after=0", token: renter.token,
                                                           lastEventID: try #require(liveIDs.last))
            let missed = await Self.read(resumed) { Self.ids($0).count >= 1 }
            resumed.close()
            let all = try await feed(renter.token)
            #expect(Self.ids(missed) == [try #require(all.last?.position)], "\(missed)")
            #expect(all.count == rentersFeed.count + 2)
        }
    }

    /// A forgotten person has no feed: nothing they were told stays, and nothing more is
    /// written for them (a repayment still credits a forgotten lender's balance).
    @Test func aForgottenPersonHasNoFeed() async throws {
        try await withServer { client, admin in
            let borrower = try await client.user("borrower")
            try await client.fund(borrower.token, 5000)
            let (loan, lenders) = try await client.fundedLoan(borrower: borrower.token, lenders: 1, amount: 2500)
            let lender = try await client.me(lenders[0]).id
            #expect(try await count(admin, "SELECT count(*) FROM feed_view WHERE user_id = \(lender.rawValue)") == 1, "loan_funded")
            let closed = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: lenders[0])
            #expect(closed.status == .noContent, "\(closed)")
            let repaid = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", body: API.RepaymentBody(amountCents: 2500, payWith: .balance), token: borrower.token)
            #expect(repaid.status == .created || repaid.status == .ok, "\(repaid)")
            #expect(try await count(admin, "SELECT count(*) FROM feed_view WHERE user_id = \(lender.rawValue)") == 0)
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'BalanceCredited'") == 1, "credited all the same")
        }
    }

    /// One event may concern many users (a loan's lenders): a page of the live feeds' reader
    /// that ends among them is followed by one that starts with the next user, not the next position.
    @Test func aPageOfNoticesEndingWithinAPositionLosesNoUser() async throws {
        try await withServerDatabase { _, admin in
            let users = (0..<3).map { _ in UUID() }.sorted { $0.uuidString.lowercased() < $1.uuidString.lowercased() }
            for user in users {
                try await admin.query(
                    "INSERT INTO feed_view (user_id, position, kind, created_at) VALUES (\(user), 7, 'loan_funded', now())")
            }
            try await admin.query(
                "INSERT INTO feed_view (user_id, position, kind, created_at) VALUES (\(users[0]), 8, 'loan_repaid', now())")
            let views = ConversationsView(admin)
            let first = try await views.notices(after: (0, UUID()), limit: 2)
            let last = try #require(first.last)
            let rest = try await views.notices(after: (last.notice.position, last.user.rawValue), limit: 2)
            #expect((first + rest).map { "\($0.notice.position) \($0.user)" } == users.map { "7 \(UserID($0))" } + ["8 \(UserID(users[0]))"])
        }
    }

    /// What a stream reader has read until `done`, on a thread of its own (a blocking read).
    /// A live stream ends when its reader's session does (a logout), and the auditors' when
    /// the role is revoked: checked once a heartbeat (issue 48).
    @Test func aLiveStreamEndsWithItsSessionOrRole() async throws {
        try await withServer(testing: .live, heartbeat: .milliseconds(200)) { client, admin in
            let ada = try await client.user("ada")
            let port = try #require(client.port)
            // The chunked body's last chunk: the server ended the stream.
            let ended: @Sendable (String) -> Bool = { $0.hasPrefix("0\r\n\r\n") || $0.contains("\r\n0\r\n\r\n") }
            let feed = try EventStreamTests.StreamReader(port: port, path: "/v1/me/feed/stream", token: ada.token)
            defer { feed.close() }
            #expect(await Self.read(feed) { $0.contains(": heartbeat") }.contains(": heartbeat"), "open, and beating")
            #expect(try await client.send(.delete, "/v1/sessions/current", token: ada.token).status == .noContent)
            let clock = ContinuousClock()
            let loggedOut = clock.now
            let afterLogout = await Self.read(feed, until: ended)
            #expect(ended(afterLogout), "the feed ended with the session: \(afterLogout.debugDescription.suffix(300))")
            #expect(clock.now - loggedOut < .seconds(5))

            let auditor = try await client.user("auditor")
            try await admin.query("INSERT INTO auditors (user_id) VALUES (\(auditor.id.rawValue))")
            let log = try EventStreamTests.StreamReader(port: port, path: "/v1/events/stream", token: auditor.token)
            defer { log.close() }
            #expect(await Self.read(log) { $0.contains(": heartbeat") }.contains(": heartbeat"))
            try await admin.query("DELETE FROM auditors WHERE user_id = \(auditor.id.rawValue)")
            #expect(ended(await Self.read(log, until: ended)), "the log's stream ended with the role")
        }
    }

    static func read(_ reader: EventStreamTests.StreamReader, until done: @escaping @Sendable (String) -> Bool) async -> String {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: reader.read(until: done)) }
        }
    }

    static func ids(_ text: String) -> [Int64] {
        text.split(whereSeparator: \.isNewline).compactMap { line in
            line.hasPrefix("id: ") ? Int64(line.dropFirst(4).trimmingCharacters(in: .whitespaces)) : nil
        }
    }
}
