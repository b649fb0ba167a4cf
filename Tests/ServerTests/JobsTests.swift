import Foundation
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import ServerTestSupport
import Testing
import TestSupport

/// The time-driven work (SPEC §12.1), run by `lender jobs run --as-of` as it would be on a
/// later day: bids expire, postings past their window expire, bookings complete.
@Suite("The jobs")
struct JobsTests {
    @Test func theJobsExpireBidsAndPostingsAndCompleteBookingsOnceEvenRunTwiceAtOnce() async throws {
        // The real clock, and days from it: the jobs run as the `lender` processes see today.
        try await withServer(today: { Day(Date()) }) { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            // Available from 3 days on for a month; booked on days 5 to 7.
            let drill = try await client.send(
                .post, "/v1/rentals",
                body: API.RentalBody(
                    title: "Drill", category: .tools, dailyPriceCents: 1400, location: API.LocationInput(lat: 27.7, lng: 85.3),
                    availableFrom: dayFromToday(3), availableUntil: dayFromToday(33)
                ), token: owner.token
            ).decode(ItemResource.self).id
            let booked = try await client.send(
                .post, "/v1/items/\(drill)/bids", body: API.BidBody(dailyPriceCents: 1400, from: dayFromToday(5), until: dayFromToday(7)),
                token: ada.token
            ).decode(BidResource.self).id
            #expect(try await client.send(.post, "/v1/bids/\(booked)/approve", token: owner.token).status == .ok)
            let late = try await client.send(
                .post, "/v1/items/\(drill)/bids",
                body: API.BidBody(dailyPriceCents: 1400, from: dayFromToday(22), until: dayFromToday(23)),
                token: bob.token
            ).decode(BidResource.self).id
            let database = try await ownerURL(admin)

            // Today: nothing is due.
            let today = try runLender(["jobs", "run"], database: database)
            #expect(today.contains("0 bids expired, 0 postings expired, 0 bookings completed"), "\(today)")
            _ = try runLender(["jobs", "run", "--as-of", dayFromToday(-1)], database: database, expectedStatus: 64)

            // On day 8, twice at once: Bob's bid is a week old by then, Ada's booking has ended;
            // each is done once.
            let asOf = dayFromToday(8)
            async let first = runLenderAside(["jobs", "run", "--as-of", asOf], database: database)
            async let second = runLenderAside(["jobs", "run", "--as-of", asOf], database: database)
            let outputs = try await [first, second]
            // One run wrote the item; the other found it done (or nothing due any more).
            #expect(outputs.filter { $0.contains("1 bids expired") && $0.contains("1 bookings completed") }.count == 1, "\(outputs)")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'BookingCompleted'") == 1)
            #expect(
                try await count(admin, "SELECT count(*) FROM events WHERE type = 'BidRejected' AND data ->> 'reason' = 'expired'") == 1)
            let bobs = try await client.send(.get, "/v1/items/\(drill)/bids", token: bob.token).decode(Page<BidResource>.self)
            #expect(bobs.data.first { $0.id == late }?.reason == "expired")
            let booking = try await client.send(.get, "/v1/bookings/\(booked)", token: ada.token).decode(BookingResource.self)
            #expect(booking.status == "completed")
            // Each party hears the booking is over; the bidder, that the bid expired.
            let adaFeed = try await client.send(.get, "/v1/me/feed?after=0&limit=100", token: ada.token).json["data"] as? [[String: Any]]
            #expect(adaFeed?.compactMap { $0["kind"] as? String }.contains("booking_confirmed") == true)
            #expect(adaFeed?.compactMap { $0["kind"] as? String }.contains("review_wanted") == true)
            let bobFeed = try await client.send(.get, "/v1/me/feed?after=0&limit=100", token: bob.token).json["data"] as? [[String: Any]]
            #expect(bobFeed?.compactMap { $0["kind"] as? String }.contains("bid_expired") == true)

            // A review held after the booking's end; fourteen days after its completion the jobs
            // close its window and publish what was written; no review comes after that.
            let held = try await client.send(.post, "/v1/bookings/\(booked)/reviews", body: API.ReviewBody(stars: 4), token: ada.token)
            #expect(held.json["published"] as? Bool == false, "\(held)")
            let early = try runLender(["jobs", "run", "--as-of", dayFromToday(21)], database: database)
            #expect(early.contains("(0 items written)"), "\(early)")
            _ = try runLender(["jobs", "run", "--as-of", dayFromToday(22)], database: database)
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'ReviewWindowClosed'") == 1)
            let tooLate = try await client.send(.post, "/v1/bookings/\(booked)/reviews", body: API.ReviewBody(stars: 2), token: owner.token)
            #expect(tooLate.problem?.code == "review_window_closed")
            let shown = try await client.send(.get, "/v1/items/\(drill)/reviews", token: bob.token).decode(Page<ReviewResource>.self)
            #expect(shown.data.map(\.stars) == [4], "published when the window closed")

            // On day 34 the rental's window is over: it expires, leaves the market and comes back
            // to a refresh as expired.
            let january = try runLender(["jobs", "run", "--as-of", dayFromToday(34)], database: database)
            #expect(january.contains("1 postings expired"), "\(january)")
            let item = try await client.send(.get, "/v1/items/\(drill)", token: owner.token).decode(ItemResource.self)
            #expect(item.status == "expired")
            let market = try await client.send(.get, "/v1/market?q=Drill", token: bob.token).decode(Page<ItemResource>.self)
            #expect(market.data.isEmpty)
            let refresh = try await client.send(
                .get, "/v1/market?updatedSince=2020-01-01T00:00:00Z", token: bob.token
            ).decode(Page<ItemResource>.self)
            #expect(refresh.data.first { $0.id == drill }?.status == "expired")
            let again = try runLender(["jobs", "run", "--as-of", dayFromToday(34)], database: database)
            #expect(again.contains("(0 items written)"), "\(again)")
            #expect(try runLender(["replay", "--verify"], database: database).contains("no differences"))
        }
    }
}
