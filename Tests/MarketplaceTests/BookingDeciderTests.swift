import Foundation
import Marketplace
import Testing

/// Rentals booked by date (SPEC §12.1), given events, when a command, on a day passed in.
@Suite("Item decider: bookings by date")
struct BookingDeciderTests {
    let posted: [ItemEvent] = [.rentalPosted(rental)]

    func approve(_ id: BidID, on today: String = "2026-11-28") -> ItemCommand { .approveBid(id, today: day(today)) }

    func booked(_ id: BidID, by renter: UserID, from: String, until: String) -> [ItemEvent] {
        [
            bid(id, by: renter, from: from, until: until), .bidApproved(BidApproved(bidID: id)),
            .bookingConfirmed(
                BookingConfirmed(
                    bookingID: id, ownerID: owner, renterID: renter, from: day(from), until: day(until), dailyPriceCents: 1400)),
        ]
    }

    @Test func approvalBooksTheDaysAndRejectsOnlyTheOverlappingBids() throws {
        let (a, b, c) = (BidID(), BidID(), BidID())
        let history = posted + [
            bid(a, by: alice, from: "2026-12-03", until: "2026-12-05"), bid(b, by: bob, from: "2026-12-05", until: "2026-12-06"),
            bid(c, by: carol, from: "2026-12-20", until: "2026-12-22"),
        ]
        let events = try given(.item, history).when(approve(a), by: owner).thenEvents()
        #expect(events == [
            .bidApproved(BidApproved(bidID: a)),
            .bookingConfirmed(
                BookingConfirmed(
                    bookingID: a, ownerID: owner, renterID: alice, from: day("2026-12-03"), until: day("2026-12-05"),
                    dailyPriceCents: 1400)),
            .bidRejected(BidRejected(bidID: b, reason: "dates_taken")),
        ])
        let after = try #require(ItemDecider.fold(history + events).item)
        #expect(after.status == .available, "a rental stays in the market")
        #expect(after.bid(c)?.status == .pending)
        // The disjoint bid is approved too: a second booking on other days.
        let second = try given(.item, history + events).when(approve(c), by: owner).thenEvents()
        #expect(second.count == 2)
        #expect(ItemDecider.fold(history + events + second).item?.bookings.count == 2)
    }

    @Test func aBidOverBookedOrBlockedDaysIsRefusedWithTheConflicts() throws {
        let a = BidID()
        let blackout = BlackoutAdded(blackoutID: BlackoutID(), from: day("2026-12-10"), until: day("2026-12-12"))
        let history = posted + booked(a, by: alice, from: "2026-12-03", until: "2026-12-05") + [.blackoutAdded(blackout)]
        let over = PlaceBid(dailyPriceCents: 1400, from: day("2026-12-05"), until: day("2026-12-11"), payWith: .balance)
        let error = try given(.item, history).when(.placeBid(over, today: rulesDay), by: bob).thenError()
        #expect(error.kind == .conflict)
        #expect(error.code == "dates_unavailable")
        #expect(error.conflicts == [
            Period(from: day("2026-12-03"), until: day("2026-12-05")), Period(from: day("2026-12-10"), until: day("2026-12-12")),
        ])
        let free = PlaceBid(dailyPriceCents: 1400, from: day("2026-12-06"), until: day("2026-12-09"), payWith: .balance)
        given(.item, history).when(.placeBid(free, today: rulesDay), by: bob).thenAccepted()
        // A request is reserved whole, and knows no calendar.
        let request = RequestPosted(
            itemID: ItemID(), ownerID: owner, title: "Tent", description: "", category: .sports, maxDailyPriceCents: nil,
            neededFrom: day("2026-12-03"), neededUntil: day("2026-12-09"), location: here)
        given(.item, [.requestPosted(request)])
            .when(.addBlackout(BlackoutID(), Period(from: day("2026-12-03"), until: day("2026-12-04")), today: rulesDay), by: owner)
            .thenRefused(.conflict, "not_a_rental")
    }

    @Test func approvingDaysThatBecameUnavailableOrHaveBegunIsRefused() throws {
        let (a, b) = (BidID(), BidID())
        // Placed before the blackout came: still pending, over days now blocked.
        let history = posted + [
            bid(a, by: alice, from: "2026-12-03", until: "2026-12-05"),
            .blackoutAdded(BlackoutAdded(blackoutID: BlackoutID(), from: day("2026-12-04"), until: day("2026-12-04"))),
            bid(b, by: bob, from: "2026-12-20", until: "2026-12-21"),
        ]
        given(.item, history).when(approve(a), by: owner).thenRefused(.conflict, "dates_unavailable")
        given(.item, history).when(approve(b, on: "2026-12-21"), by: owner).thenRefused(.conflict, "dates_passed")
        // On its first day it is not too late.
        given(.item, history).when(approve(b, on: "2026-12-20"), by: owner).thenAccepted()
    }

    @Test func aBlackoutNeverCoversABookingAndRejectsThePendingBidsOnItsDays() throws {
        let (a, b, c) = (BidID(), BidID(), BidID())
        let history = posted + booked(a, by: alice, from: "2026-12-03", until: "2026-12-05") + [
            bid(b, by: bob, from: "2026-12-10", until: "2026-12-11"), bid(c, by: carol, from: "2026-12-20", until: "2026-12-21"),
        ]
        let id = BlackoutID()
        given(.item, history).when(.addBlackout(id, Period(from: day("2026-12-05"), until: day("2026-12-08")), today: rulesDay), by: owner)
            .thenRefused(.conflict, "dates_booked")
        given(.item, history).when(.addBlackout(id, Period(from: day("2026-12-09"), until: day("2026-12-12")), today: rulesDay), by: alice)
            .thenRefused(.forbidden, "not_owner")
        given(.item, history).when(.addBlackout(id, Period(from: day("2026-12-12"), until: day("2026-12-09")), today: rulesDay), by: owner)
            .thenRefused(.invalid, "validation_failed")
        let events = try given(.item, history)
            .when(.addBlackout(id, Period(from: day("2026-12-09"), until: day("2026-12-12")), today: rulesDay), by: owner)
            .thenEvents()
        #expect(events == [
            .blackoutAdded(BlackoutAdded(blackoutID: id, from: day("2026-12-09"), until: day("2026-12-12"))),
            .bidRejected(BidRejected(bidID: b, reason: "dates_blocked")),
        ])
        // The same blackout again is nothing new; removed, its days are free again.
        given(.item, history + events)
            .when(.addBlackout(id, Period(from: day("2026-12-09"), until: day("2026-12-12")), today: rulesDay), by: owner)
            .then([])
        let removed = try given(.item, history + events).when(.removeBlackout(id), by: owner).thenEvents()
        given(.item, history + events + removed).when(.removeBlackout(id), by: owner).thenRefused(.notFound, "blackout_not_found")
        let free = PlaceBid(dailyPriceCents: 1400, from: day("2026-12-09"), until: day("2026-12-12"), payWith: .balance)
        given(.item, history + events + removed).when(.placeBid(free, today: rulesDay), by: bob).thenAccepted()
    }

    @Test func theWindowIsRevisedButNeverLeavesOutABooking() throws {
        let a = BidID()
        let history = posted + booked(a, by: alice, from: "2026-12-10", until: "2026-12-12")
        given(.item, history).when(.revise(ReviseItem(availableFrom: .some(day("2026-12-11"))), today: rulesDay), by: owner)
            .thenRefused(.conflict, "dates_booked")
        given(.item, history).when(.revise(ReviseItem(availableUntil: .some(day("2026-12-11"))), today: rulesDay), by: owner)
            .thenRefused(.conflict, "dates_booked")
        given(.item, history)
            .when(
                .revise(ReviseItem(availableFrom: .some(day("2026-12-20")), availableUntil: .some(day("2026-12-19"))), today: rulesDay),
                by: owner)
            .thenRefused(.invalid, "validation_failed")
        let events = try given(.item, history)
            .when(.revise(ReviseItem(availableFrom: .some(day("2026-12-10")), availableUntil: .some(nil)), today: rulesDay), by: owner)
            .thenEvents()
        #expect(events == [.windowRevised(ItemWindowRevised(availableFrom: day("2026-12-10"), availableUntil: nil))])
        let item = try #require(ItemDecider.fold(history + events).item)
        #expect(item.windowFrom == day("2026-12-10"))
        #expect(item.windowUntil == nil)
        // Open at the end now: a bid in February fits.
        let late = PlaceBid(dailyPriceCents: 1400, from: day("2027-02-01"), until: day("2027-02-02"), payWith: .balance)
        given(.item, history + events).when(.placeBid(late, today: rulesDay), by: bob).thenAccepted()
    }

    @Test func aNarrowedWindowRejectsThePendingBidsItLeavesOutAndNoneIsBookedOutsideIt() throws {
        let (a, b) = (BidID(), BidID())
        let history = posted + [
            bid(a, by: alice, from: "2026-12-03", until: "2026-12-05"), bid(b, by: bob, from: "2026-12-20", until: "2026-12-22"),
        ]
        let events = try given(.item, history).when(.revise(ReviseItem(availableUntil: .some(day("2026-12-10"))), today: rulesDay), by: owner)
            .thenEvents()
        #expect(events == [
            .windowRevised(ItemWindowRevised(availableFrom: day("2026-12-01"), availableUntil: day("2026-12-10"))),
            .bidRejected(BidRejected(bidID: b, reason: "outside_window")),
        ])
        // A bid pending outside the window (as an older log may hold) is not booked.
        var stale = ItemDecider.fold(history)
        if case .posted(var item) = stale {
            item.windowUntil = day("2026-12-10")
            stale = .posted(item)
        }
        #expect(given(.item, state: stale).when(approve(b), by: owner).error != nil)
    }

    @Test func aRentalWithAConfirmedBookingIsNotWithdrawnAndBlackoutsAreBounded() throws {
        let a = BidID()
        let history = posted + booked(a, by: alice, from: "2026-12-10", until: "2026-12-12")
        given(.item, history).when(.withdraw, by: owner).thenRefused(.conflict, "dates_booked")
        let done = history + [.bookingCompleted(BookingCompleted(bookingID: a, ownerID: owner, renterID: alice))]
        given(.item, done).when(.withdraw, by: owner).thenAccepted("once it is over, it may go")
        var many = posted
        for index in 0..<ItemDecider.maxBlackouts {
            let first = day("2027-01-01").adding(days: index * 2)
            many.append(.blackoutAdded(BlackoutAdded(blackoutID: BlackoutID(), from: first, until: first)))
        }
        given(.item, many)
            .when(.addBlackout(BlackoutID(), Period(from: day("2026-12-01"), until: day("2026-12-01")), today: rulesDay), by: owner)
            .thenRefused(.conflict, "too_many_blackouts")
    }

    @Test func dayArithmeticStopsAtTheEndsOfTheCalendar() {
        #expect(day("9999-12-01").adding(days: 89) == day("9999-12-31"))
        #expect(day("0001-01-05").adding(days: -10) == day("0001-01-01"))
        #expect(day("2026-02-27").adding(days: 2) == day("2026-03-01"))
        #expect(Period(from: day("2026-12-30"), until: day("2027-01-02")).days == 4)
    }

    @Test func theOwnerCompletesABookingOnceItsLastDayHasPassed() throws {
        let a = BidID()
        let history = posted + booked(a, by: alice, from: "2026-12-10", until: "2026-12-12")
        let complete = { (today: String) in ItemCommand.completeBooking(a, today: day(today)) }
        given(.item, history).when(complete("2026-12-12"), by: owner).thenRefused(.conflict, "booking_not_ended")
        given(.item, history).when(complete("2026-12-13"), by: alice).thenRefused(.forbidden, "not_owner")
        given(.item, history).when(complete("2026-12-13"), by: bob).thenRefused(.notFound, "booking_not_found")
        given(.item, history).when(.completeBooking(BidID(), today: day("2026-12-13")), by: owner)
            .thenRefused(.notFound, "booking_not_found")
        let events = try given(.item, history).when(complete("2026-12-13"), by: owner).thenEvents()
        #expect(events == [.bookingCompleted(BookingCompleted(bookingID: a, ownerID: owner, renterID: alice, completedOn: day("2026-12-13")))])
        let item = try #require(ItemDecider.fold(history + events).item)
        #expect(item.booking(a)?.status == .completed)
        #expect(item.completedDeals.map(\.bidID) == [a], "a completed booking is a deal its parties may review")
        given(.item, history + events).when(complete("2026-12-14"), by: owner).thenRefused(.conflict, "booking_not_confirmed")
    }

    @Test func aBookingsReviewsAreHeldUntilBothAreWrittenOrTheWindowCloses() throws {
        let a = BidID()
        let confirmed = posted + booked(a, by: alice, from: "2026-12-10", until: "2026-12-12")
        let review = { (stars: Int) in ItemCommand.reviewBooking(a, WriteReview(stars: stars), today: day("2026-12-20")) }
        given(.item, confirmed).when(review(5), by: alice).thenRefused(.conflict, "booking_not_completed")
        let completed = confirmed + [
            .bookingCompleted(BookingCompleted(bookingID: a, ownerID: owner, renterID: alice, completedOn: day("2026-12-13")))
        ]
        given(.item, completed).when(review(5), by: bob).thenRefused(.notFound, "booking_not_found")
        given(.item, completed).when(review(0), by: alice).thenRefused(.invalid, "validation_failed")
        let first = try given(.item, completed).when(review(5), by: alice).thenEvents()
        #expect(first == [
            .reviewWritten(ReviewWritten(bidID: a, authorID: alice, subjectID: owner, role: .bidder, stars: 5, text: "", held: true))
        ])
        given(.item, completed + first).when(review(4), by: alice).thenRefused(.conflict, "already_reviewed")
        let second = try given(.item, completed + first).when(review(3), by: owner).thenEvents()
        #expect(second.last == .reviewsPublished(ReviewsPublished(bookingID: a)), "the second review publishes both")
        // Alone, the first is published when the jobs close the window, 14 days on.
        let jobs = { (today: String) in ItemCommand.runJobs(today: day(today), staleBids: []) }
        given(.item, completed + first).when(jobs("2026-12-26"), by: .system).then([])
        let closing = try given(.item, completed + first).when(jobs("2026-12-27"), by: .system).thenEvents()
        #expect(closing == [
            .reviewWindowClosed(ReviewWindowClosed(bookingID: a)), .reviewsPublished(ReviewsPublished(bookingID: a)),
        ])
        given(.item, completed + first + closing).when(review(3), by: owner).thenRefused(.conflict, "review_window_closed")
        // Closed on the 14th day, before the jobs have run that day.
        let lastDay = ItemCommand.reviewBooking(a, WriteReview(stars: 3), today: day("2026-12-26"))
        given(.item, completed + first).when(lastDay, by: owner).thenAccepted()
        let fourteenth = ItemCommand.reviewBooking(a, WriteReview(stars: 3), today: day("2026-12-27"))
        given(.item, completed + first).when(fourteenth, by: owner).thenRefused(.conflict, "review_window_closed")
        given(.item, completed).when(jobs("2026-12-27"), by: alice).thenRefused(.forbidden, "not_allowed")
        // The item's route is for requests and the second release's deals.
        given(.item, completed).when(.review(WriteReview(stars: 5)), by: alice).thenRefused(.conflict, "review_the_booking")
    }

    /// A second release's log: a rental reserved whole, closed and relisted, reads as a
    /// booking of the approved bid's days, completed; the rental never left the market.
    @Test func aSecondReleaseReservationOfARentalReadsAsABooking() throws {
        let (a, b) = (BidID(), BidID())
        let reserved = posted + [
            bid(a, by: alice, from: "2026-12-03", until: "2026-12-05"), .bidApproved(BidApproved(bidID: a)),
            .reserved(ItemReserved(bidID: a, bidderID: alice)),
        ]
        let item = try #require(ItemDecider.fold(reserved).item)
        #expect(item.status == .available)
        #expect(item.bookings.map(\.period) == [Period(from: day("2026-12-03"), until: day("2026-12-05"))])
        given(.item, reserved)
            .when(
                .placeBid(PlaceBid(dailyPriceCents: 1, from: day("2026-12-04"), until: day("2026-12-04"), payWith: .balance), today: rulesDay),
                by: bob)
            .thenRefused(.conflict, "dates_unavailable")
        let relisted = reserved + [.closed(ItemClosed()), .relisted(ItemRelisted())]
        let after = try #require(ItemDecider.fold(relisted).item)
        #expect(after.status == .available)
        #expect(after.booking(a)?.status == .completed)
        #expect(after.completedDeals.map(\.bidID) == [a])
        // And it books on: another bid, other days.
        let more = relisted + [bid(b, by: bob, from: "2026-12-10", until: "2026-12-11")]
        #expect(try given(.item, more).when(approve(b), by: owner).thenEvents().count == 2)
    }
}
