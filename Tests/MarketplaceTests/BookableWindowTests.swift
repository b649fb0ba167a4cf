import Marketplace
import Testing

/// The days a rental could be on (issue 46): from yesterday to 730 days after the clock's day,
/// which every command giving such days passes in. The deciders enforce it, before any other
/// rule, naming each day out of it: `in_the_past` ("<yesterday> or later") and `too_far_ahead`
/// ("<today + 730> or earlier").
@Suite("Item decider: the days a rental could be on")
struct BookableWindowTests {
    let today = Day("2026-11-28")!
    var yesterday: Day { today.adding(days: -1) }
    var lastDay: Day { today.adding(days: 730) }
    /// The day before yesterday, and the day after the last: the first days out of it.
    var tooEarly: Day { today.adding(days: -2) }
    var tooLate: Day { today.adding(days: 731) }

    let owner = UserID()
    let renter = UserID()
    let place = Location(lat: 27.7172, lng: 85.3240, place: "Kathmandu")

    var inThePast: FieldError { FieldError(field: "from", code: "in_the_past", message: "2026-11-27 or later") }
    var tooFarAhead: FieldError { FieldError(field: "until", code: "too_far_ahead", message: "2028-11-27 or earlier") }

    func named(_ problem: FieldError, _ field: String) -> FieldError {
        FieldError(field: field, code: problem.code, message: problem.message)
    }

    /// A rental open every day, and a request for the coming week.
    var rental: [ItemEvent] {
        [
            .rentalPosted(
                RentalPosted(
                    itemID: ItemID(), ownerID: owner, title: "Drill", description: "", category: .tools, dailyPriceCents: 700,
                    location: place))
        ]
    }
    var request: [ItemEvent] {
        [
            .requestPosted(
                RequestPosted(
                    itemID: ItemID(), ownerID: owner, title: "Tent", description: "", category: .sports, neededFrom: today,
                    neededUntil: today.adding(days: 7), location: place))
        ]
    }

    func decide(_ command: ItemCommand, on history: [ItemEvent] = [], by actor: UserID) throws -> [ItemEvent] {
        try ItemDecider.decide(command, ItemDecider.fold(history), actor: actor)
    }

    /// The decider's refusal, or nil (recorded as an issue) when it accepts.
    func refusal(_ command: ItemCommand, on history: [ItemEvent] = [], by actor: UserID) -> DomainError? {
        do {
            let events = try decide(command, on: history, by: actor)
            Issue.record("accepted: \(events)")
            return nil
        } catch let error as DomainError {
            return error
        } catch {
            Issue.record("not a DomainError: \(error)")
            return nil
        }
    }

    func posting(from: Day?, until: Day?) -> PostRental {
        PostRental(
            title: "Drill", description: "", category: .tools, dailyPriceCents: 700, location: place, availableFrom: from,
            availableUntil: until)
    }

    func needing(from: Day, until: Day) -> PostRequest {
        PostRequest(title: "Tent", description: "", category: .sports, neededFrom: from, neededUntil: until, location: place)
    }

    func bid(from: Day, until: Day) -> PlaceBid {
        PlaceBid(dailyPriceCents: 100, from: from, until: until, payWith: .balance)
    }

    @Test func theMessagesNameTheWindowsEnds() {
        #expect(yesterday == Day("2026-11-27")!)
        #expect(lastDay == Day("2028-11-27")!)
        #expect(ItemDecider.bookableProblems(tooEarly, field: "from", today: today) == [inThePast])
        #expect(ItemDecider.bookableProblems(tooLate, field: "until", today: today) == [tooFarAhead])
        #expect(ItemDecider.bookableProblems(yesterday, field: "from", today: today).isEmpty)
        #expect(ItemDecider.bookableProblems(lastDay, field: "until", today: today).isEmpty)
        #expect(ItemDecider.bookableProblems(nil, field: "from", today: today).isEmpty)
    }

    // MARK: Posting a rental

    @Test func aRentalsWindowIsBookable() throws {
        let past = refusal(.postRental(posting(from: tooEarly, until: nil), today: today), by: owner)
        #expect(past?.code == "validation_failed")
        #expect(past?.kind == .invalid)
        #expect(past?.fields == [named(inThePast, "availableFrom")])
        let ahead = refusal(.postRental(posting(from: nil, until: tooLate), today: today), by: owner)
        #expect(ahead?.code == "validation_failed")
        #expect(ahead?.fields == [named(tooFarAhead, "availableUntil")])
        let both = refusal(.postRental(posting(from: tooEarly, until: tooLate), today: today), by: owner)
        #expect(both?.fields == [named(inThePast, "availableFrom"), named(tooFarAhead, "availableUntil")])
        #expect(try decide(.postRental(posting(from: yesterday, until: lastDay), today: today), by: owner).count == 1)
    }

    /// As the edge named them: the days first, with the problems of the posting's title,
    /// description and price; not its period, location or deposit, judged once the days are.
    @Test func aRentalsDaysAreNamedWithItsOtherGivenFields() {
        var post = posting(from: lastDay, until: tooLate)
        post.title = String(repeating: "x", count: 121)
        post.dailyPriceCents = 0
        post.location = Location(lat: 91, lng: 0, place: "nowhere")
        let error = refusal(.postRental(post, today: today), by: owner)
        #expect(
            error?.fields == [
                named(tooFarAhead, "availableUntil"),
                FieldError(field: "title", code: "invalid_title", message: "1 to 120 characters, one line"),
                FieldError(field: "dailyPriceCents", code: "invalid_price", message: "1 to 999999 cents"),
            ])
        // Backwards but bookable: the period is judged.
        let backwards = refusal(.postRental(posting(from: lastDay, until: yesterday), today: today), by: owner)
        #expect(backwards?.fields.map(\.code) == ["invalid_period"])
    }

    // MARK: Posting a request

    @Test func aRequestsDaysAreBookable() throws {
        let past = refusal(.postRequest(needing(from: tooEarly, until: today), today: today), by: owner)
        #expect(past?.code == "validation_failed")
        #expect(past?.fields == [named(inThePast, "neededFrom")])
        let ahead = refusal(.postRequest(needing(from: today, until: tooLate), today: today), by: owner)
        #expect(ahead?.code == "validation_failed")
        #expect(ahead?.fields == [named(tooFarAhead, "neededUntil")])
        var untitled = needing(from: tooEarly, until: tooLate)
        untitled.title = " "
        let error = refusal(.postRequest(untitled, today: today), by: owner)
        #expect(error?.fields.map(\.field) == ["neededFrom", "neededUntil", "title"])
        #expect(try decide(.postRequest(needing(from: yesterday, until: lastDay), today: today), by: owner).count == 1)
    }

    // MARK: Bidding

    @Test func aBidsDaysAreBookable() throws {
        let past = refusal(.placeBid(bid(from: tooEarly, until: yesterday), today: today), on: rental, by: renter)
        #expect(past?.code == "validation_failed")
        #expect(past?.fields == [inThePast])
        let ahead = refusal(.placeBid(bid(from: lastDay, until: tooLate), today: today), on: rental, by: renter)
        #expect(ahead?.code == "validation_failed")
        #expect(ahead?.fields == [tooFarAhead])
        #expect(try decide(.placeBid(bid(from: yesterday, until: yesterday), today: today), on: rental, by: renter).count == 1)
        #expect(try decide(.placeBid(bid(from: lastDay, until: lastDay), today: today), on: rental, by: renter).count == 1)
        // On a request too.
        let onRequest = refusal(.placeBid(bid(from: tooEarly, until: today), today: today), on: request, by: renter)
        #expect(onRequest?.fields == [inThePast])
    }

    /// Judged before the item is: a bid's bad days are named whatever the item, as the edge did.
    @Test func aBidsDaysAreJudgedBeforeItsItem() {
        let error = refusal(.placeBid(bid(from: tooEarly, until: tooLate), today: today), by: renter)
        #expect(error?.code == "validation_failed")
        #expect(error?.fields == [inThePast, tooFarAhead])
        let own = refusal(.placeBid(bid(from: today, until: tooLate), today: today), on: rental, by: owner)
        #expect(own?.code == "validation_failed")
    }

    // MARK: Revising a rental's window

    @Test func aRevisedWindowIsBookable() throws {
        let past = refusal(.revise(ReviseItem(availableFrom: .some(tooEarly)), today: today), on: rental, by: owner)
        #expect(past?.code == "validation_failed")
        #expect(past?.fields == [named(inThePast, "availableFrom")])
        let ahead = refusal(.revise(ReviseItem(availableUntil: .some(tooLate)), today: today), on: rental, by: owner)
        #expect(ahead?.code == "validation_failed")
        #expect(ahead?.fields == [named(tooFarAhead, "availableUntil")])
        let events = try decide(
            .revise(ReviseItem(availableFrom: .some(yesterday), availableUntil: .some(lastDay)), today: today), on: rental,
            by: owner)
        #expect(events == [.windowRevised(ItemWindowRevised(availableFrom: yesterday, availableUntil: lastDay))])
        // An end opened (null) is no day to judge.
        #expect(try decide(.revise(ReviseItem(availableUntil: .some(nil)), today: today), on: rental, by: owner).isEmpty)
        // Judged before who revises: anyone's bad day is named, as the edge did.
        let theirs = refusal(.revise(ReviseItem(availableFrom: .some(tooEarly)), today: today), on: rental, by: renter)
        #expect(theirs?.code == "validation_failed")
    }

    // MARK: Blackouts

    @Test func aBlackoutsDaysAreBookable() throws {
        let past = refusal(
            .addBlackout(BlackoutID(), Period(from: tooEarly, until: today), today: today), on: rental, by: owner)
        #expect(past?.code == "validation_failed")
        #expect(past?.fields == [inThePast])
        let ahead = refusal(
            .addBlackout(BlackoutID(), Period(from: today, until: tooLate), today: today), on: rental, by: owner)
        #expect(ahead?.code == "validation_failed")
        #expect(ahead?.fields == [tooFarAhead])
        let events = try decide(
            .addBlackout(BlackoutID(), Period(from: yesterday, until: lastDay), today: today), on: rental, by: owner)
        #expect(events.count == 1)
    }
}
