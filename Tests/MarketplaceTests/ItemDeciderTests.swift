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

/// Given `history`, when `actor` gives `command`: the events decided, or the rule broken.
func given(_ history: [ItemEvent], when command: ItemCommand, by actor: UserID) -> Result<[ItemEvent], DomainError> {
    Result { try ItemDecider.decide(command, ItemDecider.fold(history), actor: actor) }.mapError { $0 as! DomainError }
}

func expectRefused(
    _ result: Result<[ItemEvent], DomainError>, _ kind: DomainError.Kind, _ code: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    switch result {
    case .success(let events): Issue.record("expected \(code), got \(events)", sourceLocation: sourceLocation)
    case .failure(let error):
        #expect(error.kind == kind, sourceLocation: sourceLocation)
        #expect(error.code == code, sourceLocation: sourceLocation)
    }
}

@Suite("Item decider: posting and revising")
struct ItemPostingTests {
    let post = PostRental(
        title: "Drill", description: "Cordless", category: .tools, dailyPriceCents: 700, location: here,
        availableFrom: day("2026-12-01"), availableUntil: day("2026-12-10"))

    @Test func aRentalIsPostedByItsOwner() throws {
        let events = try given([], when: .postRental(post), by: alice).get()
        guard case .rentalPosted(let posted) = events.first, events.count == 1 else {
            Issue.record("expected RentalPosted, got \(events)")
            return
        }
        #expect(posted.ownerID == alice)
        #expect(posted.itemID == post.itemID)
        #expect(ItemDecider.fold(events).item?.status == .available)
    }

    @Test func everyInvalidFieldIsReportedAtOnce() {
        var bad = post
        bad.title = "   "
        bad.dailyPriceCents = 0
        bad.location = Location(lat: 91, lng: -181, place: "nowhere")
        bad.availableFrom = day("2026-12-10")
        bad.availableUntil = day("2026-12-01")
        guard case .failure(let error) = given([], when: .postRental(bad), by: alice) else {
            Issue.record("expected a validation error")
            return
        }
        #expect(error.kind == .invalid)
        #expect(Set(error.fields.map(\.field)) == ["title", "dailyPriceCents", "location.lat", "location.lng", "availableUntil"])
    }

    @Test func titleAndPriceBounds() {
        var long = post
        long.title = String(repeating: "x", count: 121)
        expectRefused(given([], when: .postRental(long), by: alice), .invalid, "validation_failed")
        var expensive = post
        expensive.dailyPriceCents = 1_000_000
        expectRefused(given([], when: .postRental(expensive), by: alice), .invalid, "validation_failed")
        var edge = post
        edge.title = String(repeating: "x", count: 120)
        edge.dailyPriceCents = 999_999
        #expect((try? given([], when: .postRental(edge), by: alice).get()) != nil)
        // A title is counted without the white space around it, ASCII or not.
        for blank in ["   ", "\t", "\u{3000}\u{3000}", " \u{A0}\n"] {
            var empty = post
            empty.title = blank
            expectRefused(given([], when: .postRental(empty), by: alice), .invalid, "validation_failed")
        }
        for padded in [
            " " + String(repeating: "x", count: 120) + " ", "\u{3000}" + String(repeating: "x", count: 120) + "\u{2003}", "é",
            String(repeating: "x", count: 120) + "\u{A0}", " " + String(repeating: "x", count: 120),
        ] {
            var fits = post
            fits.title = padded
            #expect((try? given([], when: .postRental(fits), by: alice).get()) != nil, "\(padded)")
        }
        var overlong = post
        overlong.title = "\u{3000}" + String(repeating: "x", count: 121)
        expectRefused(given([], when: .postRental(overlong), by: alice), .invalid, "validation_failed")
        // A letter under a flood of combining marks (issue 48), in a title or a description.
        var zalgo = post
        zalgo.title = "Drill " + String(repeating: "a" + String(repeating: "\u{0336}", count: 5), count: 3)
        expectRefused(given([], when: .postRental(zalgo), by: alice), .invalid, "validation_failed")
        zalgo = post
        zalgo.description = "x" + String(repeating: "\u{0489}", count: 200)
        expectRefused(given([], when: .postRental(zalgo), by: alice), .invalid, "validation_failed")
        var accented = post
        accented.title = "Xe đạp Việt Nam ệ"
        #expect((try? given([], when: .postRental(accented), by: alice).get()) != nil)
    }

    @Test func anItemIsPostedOnce() {
        expectRefused(given([.rentalPosted(rental)], when: .postRental(post), by: owner), .conflict, "item_exists")
    }

    @Test func aRequestNeedsAPeriodInOrderAndOneDayIsAPeriod() throws {
        let request = PostRequest(
            title: "Need a tent", description: "", category: .sports, maxDailyPriceCents: 900,
            neededFrom: day("2026-12-03"), neededUntil: day("2026-12-03"), location: here)
        #expect(try given([], when: .postRequest(request), by: alice).get().count == 1)
        var backwards = request
        backwards.neededUntil = day("2026-12-02")
        expectRefused(given([], when: .postRequest(backwards), by: alice), .invalid, "validation_failed")
        var free = request
        free.maxDailyPriceCents = 0
        expectRefused(given([], when: .postRequest(free), by: alice), .invalid, "validation_failed")
    }

    @Test func onlyTheOwnerRevisesAnAvailableItem() throws {
        let history: [ItemEvent] = [.rentalPosted(rental)]
        expectRefused(given(history, when: .revise(ReviseItem(title: "Mine now")), by: alice), .forbidden, "not_owner")
        expectRefused(given(history, when: .revise(ReviseItem()), by: owner), .invalid, "validation_failed")
        let events = try given(history, when: .revise(ReviseItem(priceCents: 1200)), by: owner).get()
        #expect(ItemDecider.fold(history + events).item?.priceCents == 1200)
        let withdrawn = history + [.withdrawn(ItemWithdrawn())]
        expectRefused(given(withdrawn, when: .revise(ReviseItem(title: "x")), by: owner), .conflict, "item_not_available")
        expectRefused(given([], when: .revise(ReviseItem(title: "x")), by: owner), .notFound, "item_not_found")
    }

    @Test func withdrawingRejectsEveryPendingBid() throws {
        let (a, b, c) = (BidID(), BidID(), BidID())
        let history: [ItemEvent] = [
            .rentalPosted(rental), bid(a, by: alice), bid(b, by: bob), bid(c, by: carol), .bidWithdrawn(BidWithdrawn(bidID: c)),
        ]
        expectRefused(given(history, when: .withdraw, by: alice), .forbidden, "not_owner")
        let events = try given(history, when: .withdraw, by: owner).get()
        #expect(events == [
            .withdrawn(ItemWithdrawn()),
            .bidRejected(BidRejected(bidID: a, reason: "item_withdrawn")),
            .bidRejected(BidRejected(bidID: b, reason: "item_withdrawn")),
        ])
        let after = ItemDecider.fold(history + events)
        #expect(after.item?.status == .withdrawn)
        expectRefused(given(history + events, when: .withdraw, by: owner), .conflict, "item_not_available")
    }
}

@Suite("Item decider: bids")
struct ItemBidTests {
    let posted: [ItemEvent] = [.rentalPosted(rental)]

    func place(from: String = "2026-12-05", until: String = "2026-12-07", blocked: Bool = false) -> ItemCommand {
        .placeBid(PlaceBid(dailyPriceCents: 1400, from: day(from), until: day(until), isBlockedByOwner: blocked, payWith: .balance))
    }

    @Test func aBidIsPlacedByAnotherUser() throws {
        let events = try given(posted, when: place(), by: alice).get()
        guard case .bidPlaced(let placed) = events.first else {
            Issue.record("expected BidPlaced")
            return
        }
        #expect(placed.bidderID == alice)
        #expect(ItemDecider.fold(posted + events).item?.pendingBids.count == 1)
    }

    @Test func theOwnerCannotBid() {
        expectRefused(given(posted, when: place(), by: owner), .forbidden, "cannot_bid_on_own_item")
    }

    @Test func aBlockedUserCannotBid() {
        expectRefused(given(posted, when: place(blocked: true), by: alice), .forbidden, "blocked_by_owner")
    }

    @Test func onlyAnAvailableItemTakesBids() {
        let withdrawn = posted + [.withdrawn(ItemWithdrawn())]
        expectRefused(given(withdrawn, when: place(), by: alice), .conflict, "item_not_available")
        expectRefused(given([], when: place(), by: alice), .notFound, "item_not_found")
    }

    @Test func aBidsPeriodIsInOrderAndInsideTheWindow() {
        expectRefused(given(posted, when: place(from: "2026-12-07", until: "2026-12-05"), by: alice), .invalid, "validation_failed")
        expectRefused(given(posted, when: place(from: "2026-11-30", until: "2026-12-02"), by: alice), .invalid, "outside_window")
        expectRefused(given(posted, when: place(from: "2026-12-30", until: "2027-01-02"), by: alice), .invalid, "outside_window")
        #expect((try? given(posted, when: place(from: "2026-12-01", until: "2026-12-31"), by: alice).get()) != nil)
    }

    @Test func aRequestsBidsFallInsideItsNeed() {
        let request = RequestPosted(
            itemID: ItemID(), ownerID: owner, title: "Tent", description: "", category: .sports, maxDailyPriceCents: nil,
            neededFrom: day("2026-12-03"), neededUntil: day("2026-12-04"), location: here)
        expectRefused(given([.requestPosted(request)], when: place(from: "2026-12-03", until: "2026-12-05"), by: alice), .invalid, "outside_window")
        #expect((try? given([.requestPosted(request)], when: place(from: "2026-12-03", until: "2026-12-04"), by: alice).get()) != nil)
    }

    @Test func oneBidderHasOnePendingBidPerItem() throws {
        let first = BidID()
        let history = posted + [bid(first, by: alice)]
        expectRefused(given(history, when: place(), by: alice), .conflict, "pending_bid_exists")
        #expect((try? given(history, when: place(), by: bob).get()) != nil)
        let withdrawn = history + [.bidWithdrawn(BidWithdrawn(bidID: first))]
        #expect((try? given(withdrawn, when: place(), by: alice).get()) != nil)
    }

    @Test func onlyTheBidderWithdrawsAPendingBid() throws {
        let id = BidID()
        let history = posted + [bid(id, by: alice)]
        expectRefused(given(history, when: .withdrawBid(id), by: bob), .forbidden, "not_your_bid")
        expectRefused(given(history, when: .withdrawBid(BidID()), by: alice), .notFound, "bid_not_found")
        let events = try given(history, when: .withdrawBid(id), by: alice).get()
        #expect(events == [.bidWithdrawn(BidWithdrawn(bidID: id))])
        expectRefused(given(history + events, when: .withdrawBid(id), by: alice), .conflict, "bid_not_pending")
    }

    @Test func onlyTheOwnerRejectsAPendingBid() throws {
        let id = BidID()
        let history = posted + [bid(id, by: alice)]
        expectRefused(given(history, when: .rejectBid(id, reason: nil), by: alice), .forbidden, "not_owner")
        let events = try given(history, when: .rejectBid(id, reason: "too cheap"), by: owner).get()
        #expect(ItemDecider.fold(history + events).item?.bid(id)?.reason == "too cheap")
        expectRefused(given(history + events, when: .rejectBid(id, reason: nil), by: owner), .conflict, "bid_not_pending")
    }

    @Test func approvingARequestsBidReservesItAndRejectsEveryOtherPendingBid() throws {
        let request = RequestPosted(
            itemID: ItemID(), ownerID: owner, title: "Tent", description: "", category: .sports, maxDailyPriceCents: nil,
            neededFrom: day("2026-12-03"), neededUntil: day("2026-12-09"), location: here)
        let (a, b, c) = (BidID(), BidID(), BidID())
        let history: [ItemEvent] = [
            .requestPosted(request), bid(a, by: alice), bid(b, by: bob), bid(c, by: carol), .bidWithdrawn(BidWithdrawn(bidID: c)),
        ]
        expectRefused(given(history, when: .approveBid(a, today: rulesDay), by: alice), .forbidden, "not_owner")
        let events = try given(history, when: .approveBid(a, today: rulesDay), by: owner).get()
        #expect(events == [
            .bidApproved(BidApproved(bidID: a)),
            .reserved(ItemReserved(bidID: a, bidderID: alice)),
            .bidRejected(BidRejected(bidID: b, reason: "another_bid_approved")),
        ])
        let after = ItemDecider.fold(history + events)
        #expect(after.item?.status == .reserved)
        #expect(after.item?.bids.filter { $0.status == .approved }.map(\.id) == [a])
        // At most one approved bid per reservation.
        expectRefused(given(history + events, when: .approveBid(b, today: rulesDay), by: owner), .conflict, "item_not_available")
        expectRefused(given(history, when: .approveBid(c, today: rulesDay), by: owner), .conflict, "bid_not_pending")
        // A request completes the second release's way, after the deal's last day (7 December);
        // it is not relisted.
        let after7th = day("2026-12-08")
        expectRefused(given(history, when: .complete(today: after7th), by: owner), .conflict, "item_not_reserved")
        expectRefused(given(history + events, when: .complete(today: after7th), by: alice), .forbidden, "not_owner")
        expectRefused(given(history + events, when: .complete(today: rulesDay), by: owner), .conflict, "deal_not_ended")
        expectRefused(given(history + events, when: .complete(today: day("2026-12-07")), by: owner), .conflict, "deal_not_ended")
        let closed = history + events + (try given(history + events, when: .complete(today: after7th), by: owner).get())
        #expect(ItemDecider.fold(closed).item?.status == .closed)
        #expect(ItemDecider.fold(closed).item?.completedDeals.map(\.bidID) == [a])
    }

    @Test func aRentalIsNeitherCompletedNorRelisted() {
        expectRefused(given(posted, when: .complete(today: rulesDay), by: owner), .conflict, "not_a_request")
        expectRefused(given(posted, when: .relist, by: owner), .conflict, "not_a_request")
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
        expectRefused(given(closed, when: .relist, by: owner), .conflict, "item_not_relistable")
    }
}
