import Foundation
import Marketplace
import Testing

let owner = UserID()
let alice = UserID()
let bob = UserID()
let carol = UserID()
let here = Location(lat: 27.7172, lng: 85.3240, place: "Kathmandu")

func day(_ text: String) -> Day { Day(text)! }

/// The clock's day the rules are decided on, before every fixture's days.
let rulesDay = day("2026-11-28")

let rental = RentalPosted(
    itemID: ItemID(), ownerID: owner, title: "Road bike", description: "Fast", category: .bikes, dailyPriceCents: 1500,
    location: here, availableFrom: day("2026-12-01"), availableUntil: day("2026-12-31"))

func bid(_ id: BidID, by bidder: UserID, from: String = "2026-12-05", until: String = "2026-12-07") -> ItemEvent {
    .bidPlaced(BidPlaced(bidID: id, bidderID: bidder, dailyPriceCents: 1400, from: day(from), until: day(until), message: nil))
}

@Suite("Item decider: posting and revising")
struct ItemPostingTests {
    let post = PostRental(
        title: "Drill", description: "Cordless", category: .tools, dailyPriceCents: 700, location: here,
        availableFrom: day("2026-12-01"), availableUntil: day("2026-12-10"))

    @Test func aRentalIsPostedByItsOwner() throws {
        let events = try given(.item).when(.postRental(post, today: rulesDay), by: alice).thenEvents()
        guard case .rentalPosted(let posted) = events.first, events.count == 1 else {
            Issue.record("expected RentalPosted, got \(events)")
            return
        }
        #expect(posted.ownerID == alice)
        #expect(posted.itemID == post.itemID)
        #expect(ItemDecider.fold(events).item?.status == .available)
    }

    @Test func everyInvalidFieldIsReportedAtOnce() throws {
        var bad = post
        bad.title = "   "
        bad.dailyPriceCents = 0
        bad.location = Location(lat: 91, lng: -181, place: "nowhere")
        bad.availableFrom = day("2026-12-10")
        bad.availableUntil = day("2026-12-01")
        let error = try given(.item).when(.postRental(bad, today: rulesDay), by: alice).thenError()
        #expect(error.kind == .invalid)
        #expect(Set(error.fields.map(\.field)) == ["title", "dailyPriceCents", "location.lat", "location.lng", "availableUntil"])
    }

    @Test func titleAndPriceBounds() {
        var long = post
        long.title = String(repeating: "x", count: 121)
        given(.item).when(.postRental(long, today: rulesDay), by: alice).thenRefused(.invalid, "validation_failed")
        var expensive = post
        expensive.dailyPriceCents = 1_000_000
        given(.item).when(.postRental(expensive, today: rulesDay), by: alice).thenRefused(.invalid, "validation_failed")
        var edge = post
        edge.title = String(repeating: "x", count: 120)
        edge.dailyPriceCents = 999_999
        given(.item).when(.postRental(edge, today: rulesDay), by: alice).thenAccepted()
        // A title is counted without the white space around it, ASCII or not.
        for blank in ["   ", "\t", "\u{3000}\u{3000}", " \u{A0}\n"] {
            var empty = post
            empty.title = blank
            given(.item).when(.postRental(empty, today: rulesDay), by: alice).thenRefused(.invalid, "validation_failed")
        }
        for padded in [
            " " + String(repeating: "x", count: 120) + " ", "\u{3000}" + String(repeating: "x", count: 120) + "\u{2003}", "é",
            String(repeating: "x", count: 120) + "\u{A0}", " " + String(repeating: "x", count: 120),
        ] {
            var fits = post
            fits.title = padded
            given(.item).when(.postRental(fits, today: rulesDay), by: alice).thenAccepted("\(padded)")
        }
        var overlong = post
        overlong.title = "\u{3000}" + String(repeating: "x", count: 121)
        given(.item).when(.postRental(overlong, today: rulesDay), by: alice).thenRefused(.invalid, "validation_failed")
        // A letter under a flood of combining marks (issue 48), in a title or a description.
        var zalgo = post
        zalgo.title = "Drill " + String(repeating: "a" + String(repeating: "\u{0336}", count: 5), count: 3)
        given(.item).when(.postRental(zalgo, today: rulesDay), by: alice).thenRefused(.invalid, "validation_failed")
        zalgo = post
        zalgo.description = "x" + String(repeating: "\u{0489}", count: 200)
        given(.item).when(.postRental(zalgo, today: rulesDay), by: alice).thenRefused(.invalid, "validation_failed")
        var accented = post
        accented.title = "Xe đạp Việt Nam ệ"
        given(.item).when(.postRental(accented, today: rulesDay), by: alice).thenAccepted()
    }

    @Test func anItemIsPostedOnce() {
        given(.item, [.rentalPosted(rental)]).when(.postRental(post, today: rulesDay), by: owner).thenRefused(.conflict, "item_exists")
    }

    @Test func aRequestNeedsAPeriodInOrderAndOneDayIsAPeriod() throws {
        let request = PostRequest(
            title: "Need a tent", description: "", category: .sports, maxDailyPriceCents: 900,
            neededFrom: day("2026-12-03"), neededUntil: day("2026-12-03"), location: here)
        #expect(try given(.item).when(.postRequest(request, today: rulesDay), by: alice).thenEvents().count == 1)
        var backwards = request
        backwards.neededUntil = day("2026-12-02")
        given(.item).when(.postRequest(backwards, today: rulesDay), by: alice).thenRefused(.invalid, "validation_failed")
        var free = request
        free.maxDailyPriceCents = 0
        given(.item).when(.postRequest(free, today: rulesDay), by: alice).thenRefused(.invalid, "validation_failed")
    }

    @Test func onlyTheOwnerRevisesAnAvailableItem() throws {
        let history: [ItemEvent] = [.rentalPosted(rental)]
        given(.item, history).when(.revise(ReviseItem(title: "Mine now"), today: rulesDay), by: alice).thenRefused(.forbidden, "not_owner")
        given(.item, history).when(.revise(ReviseItem(), today: rulesDay), by: owner).thenRefused(.invalid, "validation_failed")
        let events = try given(.item, history).when(.revise(ReviseItem(priceCents: 1200), today: rulesDay), by: owner).thenEvents()
        #expect(ItemDecider.fold(history + events).item?.priceCents == 1200)
        let withdrawn = history + [.withdrawn(ItemWithdrawn())]
        given(.item, withdrawn).when(.revise(ReviseItem(title: "x"), today: rulesDay), by: owner).thenRefused(.conflict, "item_not_available")
        given(.item).when(.revise(ReviseItem(title: "x"), today: rulesDay), by: owner).thenRefused(.notFound, "item_not_found")
    }

    @Test func withdrawingRejectsEveryPendingBid() throws {
        let (a, b, c) = (BidID(), BidID(), BidID())
        let history: [ItemEvent] = [
            .rentalPosted(rental), bid(a, by: alice), bid(b, by: bob), bid(c, by: carol), .bidWithdrawn(BidWithdrawn(bidID: c)),
        ]
        given(.item, history).when(.withdraw, by: alice).thenRefused(.forbidden, "not_owner")
        let events = try given(.item, history).when(.withdraw, by: owner).thenEvents()
        #expect(events == [
            .withdrawn(ItemWithdrawn()),
            .bidRejected(BidRejected(bidID: a, reason: "item_withdrawn")),
            .bidRejected(BidRejected(bidID: b, reason: "item_withdrawn")),
        ])
        let after = ItemDecider.fold(history + events)
        #expect(after.item?.status == .withdrawn)
        given(.item, history + events).when(.withdraw, by: owner).thenRefused(.conflict, "item_not_available")
    }
}

@Suite("Item decider: bids")
struct ItemBidTests {
    let posted: [ItemEvent] = [.rentalPosted(rental)]

    func place(from: String = "2026-12-05", until: String = "2026-12-07", blocked: Bool = false) -> ItemCommand {
        .placeBid(
            PlaceBid(dailyPriceCents: 1400, from: day(from), until: day(until), isBlockedByOwner: blocked, payWith: .balance),
            today: rulesDay)
    }

    @Test func aBidIsPlacedByAnotherUser() throws {
        let events = try given(.item, posted).when(place(), by: alice).thenEvents()
        guard case .bidPlaced(let placed) = events.first else {
            Issue.record("expected BidPlaced")
            return
        }
        #expect(placed.bidderID == alice)
        #expect(ItemDecider.fold(posted + events).item?.pendingBids.count == 1)
    }

    @Test func theOwnerCannotBid() {
        given(.item, posted).when(place(), by: owner).thenRefused(.forbidden, "cannot_bid_on_own_item")
    }

    @Test func aBlockedUserCannotBid() {
        given(.item, posted).when(place(blocked: true), by: alice).thenRefused(.forbidden, "blocked_by_owner")
    }

    @Test func onlyAnAvailableItemTakesBids() {
        let withdrawn = posted + [.withdrawn(ItemWithdrawn())]
        given(.item, withdrawn).when(place(), by: alice).thenRefused(.conflict, "item_not_available")
        given(.item).when(place(), by: alice).thenRefused(.notFound, "item_not_found")
    }

    @Test func aBidsPeriodIsInOrderAndInsideTheWindow() {
        given(.item, posted).when(place(from: "2026-12-07", until: "2026-12-05"), by: alice).thenRefused(.invalid, "validation_failed")
        given(.item, posted).when(place(from: "2026-11-30", until: "2026-12-02"), by: alice).thenRefused(.invalid, "outside_window")
        given(.item, posted).when(place(from: "2026-12-30", until: "2027-01-02"), by: alice).thenRefused(.invalid, "outside_window")
        given(.item, posted).when(place(from: "2026-12-01", until: "2026-12-31"), by: alice).thenAccepted()
    }

    @Test func aRequestsBidsFallInsideItsNeed() {
        let request = RequestPosted(
            itemID: ItemID(), ownerID: owner, title: "Tent", description: "", category: .sports, maxDailyPriceCents: nil,
            neededFrom: day("2026-12-03"), neededUntil: day("2026-12-04"), location: here)
        given(.item, [.requestPosted(request)]).when(place(from: "2026-12-03", until: "2026-12-05"), by: alice)
            .thenRefused(.invalid, "outside_window")
        given(.item, [.requestPosted(request)]).when(place(from: "2026-12-03", until: "2026-12-04"), by: alice).thenAccepted()
    }

    @Test func oneBidderHasOnePendingBidPerItem() throws {
        let first = BidID()
        let history = posted + [bid(first, by: alice)]
        given(.item, history).when(place(), by: alice).thenRefused(.conflict, "pending_bid_exists")
        given(.item, history).when(place(), by: bob).thenAccepted()
        let withdrawn = history + [.bidWithdrawn(BidWithdrawn(bidID: first))]
        given(.item, withdrawn).when(place(), by: alice).thenAccepted()
    }

    @Test func onlyTheBidderWithdrawsAPendingBid() throws {
        let id = BidID()
        let history = posted + [bid(id, by: alice)]
        given(.item, history).when(.withdrawBid(id), by: bob).thenRefused(.forbidden, "not_your_bid")
        given(.item, history).when(.withdrawBid(BidID()), by: alice).thenRefused(.notFound, "bid_not_found")
        let events = try given(.item, history).when(.withdrawBid(id), by: alice).thenEvents()
        #expect(events == [.bidWithdrawn(BidWithdrawn(bidID: id))])
        given(.item, history + events).when(.withdrawBid(id), by: alice).thenRefused(.conflict, "bid_not_pending")
    }

    @Test func onlyTheOwnerRejectsAPendingBid() throws {
        let id = BidID()
        let history = posted + [bid(id, by: alice)]
        given(.item, history).when(.rejectBid(id, reason: nil), by: alice).thenRefused(.forbidden, "not_owner")
        let events = try given(.item, history).when(.rejectBid(id, reason: "too cheap"), by: owner).thenEvents()
        #expect(ItemDecider.fold(history + events).item?.bid(id)?.reason == "too cheap")
        given(.item, history + events).when(.rejectBid(id, reason: nil), by: owner).thenRefused(.conflict, "bid_not_pending")
    }

    @Test func approvingARequestsBidReservesItAndRejectsEveryOtherPendingBid() throws {
        let request = RequestPosted(
            itemID: ItemID(), ownerID: owner, title: "Tent", description: "", category: .sports, maxDailyPriceCents: nil,
            neededFrom: day("2026-12-03"), neededUntil: day("2026-12-09"), location: here)
        let (a, b, c) = (BidID(), BidID(), BidID())
        let history: [ItemEvent] = [
            .requestPosted(request), bid(a, by: alice), bid(b, by: bob), bid(c, by: carol), .bidWithdrawn(BidWithdrawn(bidID: c)),
        ]
        given(.item, history).when(.approveBid(a, today: rulesDay), by: alice).thenRefused(.forbidden, "not_owner")
        let events = try given(.item, history).when(.approveBid(a, today: rulesDay), by: owner).thenEvents()
        #expect(events == [
            .bidApproved(BidApproved(bidID: a)),
            .reserved(ItemReserved(bidID: a, bidderID: alice)),
            .bidRejected(BidRejected(bidID: b, reason: "another_bid_approved")),
        ])
        let after = ItemDecider.fold(history + events)
        #expect(after.item?.status == .reserved)
        #expect(after.item?.bids.filter { $0.status == .approved }.map(\.id) == [a])
        // At most one approved bid per reservation.
        given(.item, history + events).when(.approveBid(b, today: rulesDay), by: owner).thenRefused(.conflict, "item_not_available")
        given(.item, history).when(.approveBid(c, today: rulesDay), by: owner).thenRefused(.conflict, "bid_not_pending")
        // A request completes the second release's way, after the deal's last day (7 December);
        // it is not relisted.
        let after7th = day("2026-12-08")
        given(.item, history).when(.complete(today: after7th), by: owner).thenRefused(.conflict, "item_not_reserved")
        given(.item, history + events).when(.complete(today: after7th), by: alice).thenRefused(.forbidden, "not_owner")
        given(.item, history + events).when(.complete(today: rulesDay), by: owner).thenRefused(.conflict, "deal_not_ended")
        given(.item, history + events).when(.complete(today: day("2026-12-07")), by: owner).thenRefused(.conflict, "deal_not_ended")
        let closed = history + events + (try given(.item, history + events).when(.complete(today: after7th), by: owner).thenEvents())
        #expect(ItemDecider.fold(closed).item?.status == .closed)
        #expect(ItemDecider.fold(closed).item?.completedDeals.map(\.bidID) == [a])
    }

    @Test func aRentalIsNeitherCompletedNorRelisted() {
        given(.item, posted).when(.complete(today: rulesDay), by: owner).thenRefused(.conflict, "not_a_request")
        given(.item, posted).when(.relist, by: owner).thenRefused(.conflict, "not_a_request")
    }

    @Test func aClosedRequestIsNotRelisted() throws {
        let request = RequestPosted(
            itemID: ItemID(), ownerID: owner, title: "Tent", description: "", category: .sports, maxDailyPriceCents: nil,
            neededFrom: day("2026-12-03"), neededUntil: day("2026-12-04"), location: here)
        let id = BidID()
        let closed: [ItemEvent] = [
            .requestPosted(request), bid(id, by: alice, from: "2026-12-03", until: "2026-12-04"),
            .bidApproved(BidApproved(bidID: id)), .reserved(ItemReserved(bidID: id, bidderID: alice)), .closed(ItemClosed()),
        ]
        given(.item, closed).when(.relist, by: owner).thenRefused(.conflict, "item_not_relistable")
    }
}
