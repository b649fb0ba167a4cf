import Foundation
import Hummingbird
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import Server
import ServerTestSupport
import Synchronization
import Testing
import TestSupport

/// Rentals booked by date over HTTP (SPEC §12.1): bookings, the calendar, blackouts, the
/// window, and completion on a clock the test sets.
@Suite("Bookings by date over HTTP")
struct BookingsTests {
    func bid(_ client: any TestClientProtocol, _ item: ItemID, _ token: String, _ from: String, _ until: String) async throws
        -> Reply
    {
        try await client.send(
            .post, "/v1/items/\(item)/bids", body: API.BidBody(dailyPriceCents: 1400, from: from, until: until), token: token)
    }

    @Test func approvalBooksTheDaysTheRentalStaysInTheMarketAndOnlyOverlappingBidsAreRejected() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, _ in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            let eve = try await client.user("eve")
            let drill = try await client.postRental(owner.token, title: "Drill").id
            let adas = try await bid(client, drill, ada.token, "2026-12-03", "2026-12-05").decode(BidResource.self).id
            let bobs = try await bid(client, drill, bob.token, "2026-12-05", "2026-12-06").decode(BidResource.self).id
            let eves = try await bid(client, drill, eve.token, "2026-12-20", "2026-12-22").decode(BidResource.self).id

            let approved = try await client.send(.post, "/v1/bids/\(adas)/approve", token: owner.token)
            #expect(approved.status == .ok, "\(approved)")
            #expect(try await client.send(.get, "/v1/items/\(drill)", token: owner.token).json["status"] as? String == "available")
            let bobsBid = try await client.send(.get, "/v1/items/\(drill)/bids", token: bob.token).decode(Page<BidResource>.self)
            #expect(bobsBid.data.map(\.id) == [bobs])
            #expect(bobsBid.data.first?.status == "rejected")
            #expect(bobsBid.data.first?.reason == "dates_taken")
            let evesBid = try await client.send(.get, "/v1/items/\(drill)/bids", token: eve.token).decode(Page<BidResource>.self)
            #expect(evesBid.data.first?.status == "pending")
            let market = try await client.send(.get, "/v1/market?q=Drill", token: eve.token).decode(Page<ItemResource>.self)
            #expect(market.data.map(\.id) == [drill], "a booked rental stays in the market")

            // The booking, for its two parties: each sees the other's e-mail; anyone else, nothing.
            let forOwner = try await client.send(.get, "/v1/bookings/\(adas)", token: owner.token)
            #expect(forOwner.status == .ok, "\(forOwner)")
            let booking = try forOwner.decode(BookingResource.self)
            #expect(booking.itemId == drill)
            #expect(booking.itemTitle == "Drill")
            #expect(booking.ownerHandle == "owner")
            #expect(booking.renterId == ada.id)
            #expect(booking.renterHandle == "ada")
            #expect((booking.from, booking.until, booking.days) == ("2026-12-03", "2026-12-05", 3))
            #expect(booking.totalCents == 3 * 1400)
            #expect(booking.status == "confirmed")
            #expect(booking.contactEmail == "ada@example.org")
            #expect(try await client.send(.get, "/v1/bookings/\(adas)", token: ada.token).decode(BookingResource.self).contactEmail
                == "owner@example.org")
            let stranger = try await client.send(.get, "/v1/bookings/\(adas)", token: eve.token)
            #expect(stranger.status == .notFound)
            #expect(stranger.problem?.code == "booking_not_found")

            // Days booked are refused to any later bid, naming the booking's days.
            let late = try await bid(client, drill, bob.token, "2026-12-04", "2026-12-08")
            #expect(late.status == .conflict)
            #expect(late.problem?.code == "dates_unavailable")
            let conflicts = late.json["conflicts"] as? [[String: String]]
            #expect(conflicts == [["from": "2026-12-03", "until": "2026-12-05"]])

            // A second booking on other days; the lists of each side.
            #expect(try await client.send(.post, "/v1/bids/\(eves)/approve", token: owner.token).status == .ok)
            let mine = try await client.send(.get, "/v1/me/bookings?role=owner&limit=1", token: owner.token)
                .decode(Page<BookingResource>.self)
            #expect(mine.data.map(\.id) == [adas], "upcoming, by first day")
            let next = try await client.send(
                .get, "/v1/me/bookings?role=owner&limit=1&cursor=\(try #require(mine.nextCursor))", token: owner.token
            ).decode(Page<BookingResource>.self)
            #expect(next.data.map(\.id) == [eves])
            #expect(next.nextCursor == nil)
            #expect(try await client.send(.get, "/v1/me/bookings", token: ada.token).decode(Page<BookingResource>.self).data.map(\.id) == [adas])
            #expect(try await client.send(.get, "/v1/me/bookings?role=owner", token: ada.token).decode(Page<BookingResource>.self).data.isEmpty)
            let badRole = try await client.send(.get, "/v1/me/bookings?role=guest&when=later", token: ada.token)
            #expect(badRole.status == .unprocessableContent)
            #expect(Set(badRole.problem?.errors?.map(\.field) ?? []) == ["role", "when"])

            // A bid whose first day has come is too late to approve.
            let bobsLater = try await bid(client, drill, bob.token, "2026-12-10", "2026-12-11").decode(BidResource.self).id
            clock.set("2026-12-11")
            let passed = try await client.send(.post, "/v1/bids/\(bobsLater)/approve", token: owner.token)
            #expect(passed.status == .conflict)
            #expect(passed.problem?.code == "dates_passed")

            // A rental is not completed or relisted the second release's way.
            for action in ["complete", "relist"] {
                let refused = try await client.send(.post, "/v1/items/\(drill)/\(action)", token: owner.token)
                #expect(refused.status == .conflict)
                #expect(refused.problem?.code == "not_a_request")
            }
        }
    }

    @Test func theOwnerCompletesABookingAfterItsLastDayAndItCountsAsADeal() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let drill = try await client.postRental(owner.token, title: "Drill").id
            let adas = try await bid(client, drill, ada.token, "2026-12-03", "2026-12-05").decode(BidResource.self).id
            #expect(try await client.send(.post, "/v1/bids/\(adas)/approve", token: owner.token).status == .ok)
            let notYet = try await client.send(.post, "/v1/bookings/\(adas)/reviews", body: API.ReviewBody(stars: 5), token: ada.token)
            #expect(notYet.problem?.code == "booking_not_completed")
            clock.set("2026-12-05")
            let early = try await client.send(.post, "/v1/bookings/\(adas)/complete", token: owner.token)
            #expect(early.status == .conflict)
            #expect(early.problem?.code == "booking_not_ended")
            clock.set("2026-12-06")
            let byRenter = try await client.send(.post, "/v1/bookings/\(adas)/complete", token: ada.token)
            #expect(byRenter.status == .forbidden)
            #expect(byRenter.problem?.code == "not_owner")
            let done = try await client.send(.post, "/v1/bookings/\(adas)/complete", token: owner.token)
            #expect(done.status == .ok, "\(done)")
            let completed = try done.decode(BookingResource.self)
            #expect(completed.status == "completed")
            #expect(completed.completedAt != nil)
            #expect(completed.position != nil)
            let twice = try await client.send(.post, "/v1/bookings/\(adas)/complete", token: owner.token)
            #expect(twice.problem?.code == "booking_not_confirmed")
            for user in [owner, ada] {
                let profile = try await client.send(.get, "/v1/users/\(user.id)", token: ada.token).decode(PublicProfile.self)
                #expect(profile.completedDeals == 1)
            }
            // Past now: listed under `past`, not `upcoming`.
            #expect(try await client.send(.get, "/v1/me/bookings?when=past", token: ada.token).decode(Page<BookingResource>.self).data.map(\.id) == [adas])
            #expect(try await client.send(.get, "/v1/me/bookings", token: ada.token).decode(Page<BookingResource>.self).data.isEmpty)
            // Reviews: on the booking's route, by its two parties only, held until both have written.
            let oldRoute = try await client.send(.post, "/v1/items/\(drill)/reviews", body: API.ReviewBody(stars: 5), token: ada.token)
            #expect(oldRoute.problem?.code == "review_the_booking")
            let stranger = try await client.user("eve")
            let byStranger = try await client.send(
                .post, "/v1/bookings/\(adas)/reviews", body: API.ReviewBody(stars: 1), token: stranger.token)
            #expect(byStranger.status == .notFound)
            let badStars = try await client.send(.post, "/v1/bookings/\(adas)/reviews", body: API.ReviewBody(stars: 6), token: ada.token)
            #expect(badStars.status == .unprocessableContent)
            let held = try await client.send(
                .post, "/v1/bookings/\(adas)/reviews", body: API.ReviewBody(stars: 5, text: "Great"), token: ada.token)
            #expect(held.status == .created, "\(held)")
            #expect(held.json["published"] as? Bool == false)
            #expect(
                try await client.send(.post, "/v1/bookings/\(adas)/reviews", body: API.ReviewBody(stars: 4), token: ada.token).problem?.code
                    == "already_reviewed")
            let hidden = try await client.send(.get, "/v1/items/\(drill)/reviews", token: stranger.token).decode(Page<ReviewResource>.self)
            #expect(hidden.data.isEmpty, "not listed until published")
            #expect(try await client.send(.get, "/v1/items/\(drill)", token: stranger.token).decode(ItemResource.self).reviewCount == 0)
            let ownerFeed = try await client.send(.get, "/v1/me/feed?after=0&limit=100", token: owner.token).text
            #expect(!ownerFeed.contains("review_received"), "a held review's stars are not told")
            let answer = try await client.send(.post, "/v1/bookings/\(adas)/reviews", body: API.ReviewBody(stars: 3), token: owner.token)
            #expect(answer.json["published"] as? Bool == true)
            let shown = try await client.send(.get, "/v1/items/\(drill)/reviews", token: stranger.token).decode(Page<ReviewResource>.self)
            #expect(shown.data.map(\.stars) == [5])
            let item = try await client.send(.get, "/v1/items/\(drill)", token: stranger.token).decode(ItemResource.self)
            #expect((item.reviewCount, item.rating) == (1, 5.0))
            #expect(try await client.send(.get, "/v1/users/\(ada.id)", token: stranger.token).decode(PublicProfile.self).rating == 3.0)
            // Published, each subject hears of the review about them; a rebuild makes the same views.
            let adaFeed = try await client.send(.get, "/v1/me/feed?after=0&limit=100", token: ada.token).text
            #expect(adaFeed.contains("review_received"))
            #expect(try runLender(["replay", "--verify"], database: try await ownerURL(admin)).contains("no differences"))
        }
    }

    @Test func theCalendarShowsEveryDayOnceAndNamesNoRenter() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            // The fixture's window: 1 to 31 December.
            let drill = try await client.postRental(owner.token, title: "Drill").id
            let adas = try await bid(client, drill, ada.token, "2026-12-03", "2026-12-05").decode(BidResource.self).id
            #expect(try await client.send(.post, "/v1/bids/\(adas)/approve", token: owner.token).status == .ok)
            let bobs = try await bid(client, drill, bob.token, "2026-12-10", "2026-12-12").decode(BidResource.self).id

            // Blackouts: by the owner only, never over a booking; the pending bids on them rejected.
            let notOwner = try await client.send(
                .post, "/v1/items/\(drill)/blackouts", body: API.BlackoutBody(from: "2026-12-11", until: "2026-12-12"), token: ada.token)
            #expect(notOwner.status == .forbidden)
            #expect(notOwner.problem?.code == "not_owner")
            let overBooking = try await client.send(
                .post, "/v1/items/\(drill)/blackouts", body: API.BlackoutBody(from: "2026-12-05", until: "2026-12-06"), token: owner.token)
            #expect(overBooking.status == .conflict)
            #expect(overBooking.problem?.code == "dates_booked")
            let blackout = try await client.send(
                .post, "/v1/items/\(drill)/blackouts", body: API.BlackoutBody(from: "2026-12-11", until: "2026-12-12"), token: owner.token)
            #expect(blackout.status == .created, "\(blackout)")
            #expect(blackout.json["from"] as? String == "2026-12-11")
            #expect(blackout.json["position"] is NSNumber)
            let blackoutID = try #require(blackout.json["id"] as? String)
            let bobsBid = try await client.send(.get, "/v1/items/\(drill)/bids", token: bob.token).decode(Page<BidResource>.self)
            #expect(bobsBid.data.first { $0.id == bobs }?.reason == "dates_blocked")

            let calendar = try await client.send(
                .get, "/v1/items/\(drill)/availability?from=2026-11-29&until=2027-01-02", token: bob.token)
            #expect(calendar.status == .ok, "\(calendar)")
            let availability = try calendar.decode(Availability.self)
            #expect((availability.from, availability.until) == ("2026-11-29", "2027-01-02"))
            #expect(availability.ranges.map { "\($0.from) \($0.until) \($0.state.rawValue)" } == [
                "2026-11-29 2026-11-30 outside", "2026-12-01 2026-12-02 free", "2026-12-03 2026-12-05 booked",
                "2026-12-06 2026-12-10 free", "2026-12-11 2026-12-12 blocked", "2026-12-13 2026-12-31 free",
                "2027-01-01 2027-01-02 outside",
            ])
            #expect(!calendar.text.contains("ada"), "names no renter")
            // By default, 90 days from today.
            let byDefault = try await client.send(.get, "/v1/items/\(drill)/availability", token: bob.token).decode(Availability.self)
            #expect((byDefault.from, byDefault.until) == ("2026-11-28", "2027-02-25"))

            // Malformed, reversed and too long ranges.
            for (query, code) in [
                ("from=2026-12-01&until=2027-12-02", "range_too_long"), ("from=2026-12-10&until=2026-12-01", "validation_failed"),
                ("from=tomorrow", "validation_failed"), ("until=2026-02-30", "validation_failed"),
            ] {
                let refused = try await client.send(.get, "/v1/items/\(drill)/availability?\(query)", token: bob.token)
                #expect(refused.status == .unprocessableContent, "\(query): \(refused)")
                #expect(refused.problem?.code == code, "\(query)")
            }
            #expect(
                try await client.send(.get, "/v1/items/\(drill)/availability?from=2026-12-01&until=2027-12-01", token: bob.token)
                    .status == .ok, "366 days")
            // At the calendar's end: the default 90 days stop at 9999-12-31.
            let farEnd = try await client.send(.get, "/v1/items/\(drill)/availability?from=9999-12-01", token: bob.token)
            #expect(farEnd.status == .ok, "\(farEnd)")
            #expect(farEnd.json["until"] as? String == "9999-12-31")
            // The market's period: both days, in order, at most a year.
            for query in ["availableFrom=2026-12-01", "availableFrom=2026-12-05&availableUntil=2026-12-01", "availableFrom=x&availableUntil=y"] {
                let refused = try await client.send(.get, "/v1/market?\(query)", token: bob.token)
                #expect(refused.status == .unprocessableContent, "\(query)")
                #expect(refused.problem?.code == "invalid_period", "\(query): \(refused)")
            }
            let free = try await client.send(
                .get, "/v1/market?availableFrom=2026-12-04&availableUntil=2026-12-06", token: bob.token).decode(Page<ItemResource>.self)
            #expect(!free.data.contains { $0.id == drill }, "booked on the 4th and 5th")
            let later = try await client.send(
                .get, "/v1/market?availableFrom=2026-12-06&availableUntil=2026-12-09", token: bob.token).decode(Page<ItemResource>.self)
            #expect(later.data.map(\.id) == [drill])
            // A refresh hears of a rental whose free days changed: its row moves on (the answer's
            // times are to the second, so the row's position tells).
            let positionSQL: PostgresQuery = "SELECT position FROM items_view WHERE item_id = \(drill.rawValue)"
            let before = try await admin.query(positionSQL).single().decode("position", as: Int64.self)
            let another = try await client.send(
                .post, "/v1/items/\(drill)/blackouts", body: API.BlackoutBody(from: "2026-12-28", until: "2026-12-29"), token: owner.token)
            #expect(another.status == .created)
            let touched = try await admin.query(positionSQL).single().decode("position", as: Int64.self)
            #expect(touched == (another.json["position"] as? NSNumber)?.int64Value && touched > before, "updatedSince returns it")
            let badCursor = try await client.send(.get, "/v1/me/bookings?cursor=eyJhdCI6MCwiaWQiOiIwMDAwMDAwMC0wMDAwLTAwMDAtMDAwMC0wMDAwMDAwMDAwMDAifQ", token: ada.token)
            #expect(badCursor.status == .unprocessableContent, "\(badCursor)")

            // The blackout removed, its days free; a bid over them fits again.
            #expect(try await client.send(.delete, "/v1/items/\(drill)/blackouts/\(blackoutID)", token: owner.token).status == .ok)
            let gone = try await client.send(.delete, "/v1/items/\(drill)/blackouts/\(blackoutID)", token: owner.token)
            #expect(gone.problem?.code == "blackout_not_found")
            #expect(try await bid(client, drill, bob.token, "2026-12-11", "2026-12-12").status == .created)

            // The window: revised, never to leave out a booking; null opens an end.
            let excludes = try await client.send(
                .patch, "/v1/items/\(drill)", body: API.RevisionBody(availableFrom: "2026-12-04"), token: owner.token)
            #expect(excludes.status == .conflict)
            #expect(excludes.problem?.code == "dates_booked")
            let opened = try await client.send(
                .patch, "/v1/items/\(drill)", json: ["availableFrom": "2026-12-02", "availableUntil": NSNull()], token: owner.token)
            #expect(opened.status == .ok, "\(opened)")
            #expect(opened.json["availableFrom"] as? String == "2026-12-02")
            #expect(opened.json["availableUntil"] is NSNull)
            let after = try await client.send(
                .get, "/v1/items/\(drill)/availability?from=2026-12-01&until=2027-01-02", token: bob.token
            ).decode(Availability.self)
            #expect(after.ranges.first?.state == .outside)
            #expect(after.ranges.last?.state == .free)
            // A request has no calendar.
            let request = try await client.postRequest(ada.token, title: "Ladder").id
            #expect(try await client.send(.get, "/v1/items/\(request)/availability", token: bob.token).problem?.code == "not_a_rental")
            let requestWindow = try await client.send(
                .patch, "/v1/items/\(request)", body: API.RevisionBody(availableFrom: "2026-12-10"), token: ada.token)
            #expect(requestWindow.status == .unprocessableContent)
            #expect(requestWindow.problem?.errors?.first?.code == "not_for_this_kind")
        }
    }

    /// A request keeps the second release's whole reservation, completion and contact e-mails.
    @Test func aRequestIsStillReservedAndCompletedWhole() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, _ in
            let ada = try await client.user("ada")
            let rita = try await client.user("rita")
            let bob = try await client.user("bob")
            let ladder = try await client.postRequest(ada.token, title: "Ladder").id
            let offer = try await bid(client, ladder, rita.token, "2026-12-10", "2026-12-11").decode(BidResource.self).id
            let other = try await bid(client, ladder, bob.token, "2026-12-10", "2026-12-10").decode(BidResource.self).id
            #expect(try await client.send(.post, "/v1/bids/\(offer)/approve", token: ada.token).status == .ok)
            let item = try await client.send(.get, "/v1/items/\(ladder)", token: ada.token)
            #expect(item.json["status"] as? String == "reserved")
            #expect(item.json["contactEmail"] as? String == "rita@example.org")
            let bobs = try await client.send(.get, "/v1/items/\(ladder)/bids", token: bob.token).decode(Page<BidResource>.self)
            #expect(bobs.data.first { $0.id == other }?.reason == "another_bid_approved")
            #expect(try await client.complete(ladder, ada.token, clock: clock).status == .ok)
            #expect(try await client.send(.get, "/v1/items/\(ladder)", token: ada.token).json["status"] as? String == "closed")
            #expect(try await client.send(.get, "/v1/bookings/\(offer)", token: ada.token).status == .notFound, "no booking")
        }
    }
}
