import EventStore
import Foundation
import HTTPTypes
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import Server
import ServerTestSupport
import Testing
import TestSupport
@testable import UseCases

@Suite("Writes past a user's hourly bucket are refused with 429")
struct WriteLimitTests {
    @Test func postingsAndBidsPastTheUsersBucketAre429AndRepeatsAreFree() async throws {
        // 8 an hour: 2 at once, then one every 7.5 minutes.
        try await withServer(writeLimits: WriteLimits(postingsPerHour: 8, bidsPerHour: 8)) { client, admin in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            let first = try await client.send(.post, "/v1/rentals", raw: IdempotencyDigestTests.rental, token: ada.token, idempotencyKey: "r1")
            #expect(first.status == .created)
            #expect(try await client.send(.post, "/v1/rentals", raw: IdempotencyDigestTests.rental, token: ada.token).status == .created)
            let third = try await client.send(.post, "/v1/rentals", raw: IdempotencyDigestTests.rental, token: ada.token)
            #expect(third.status == .tooManyRequests)
            #expect(third.code == "too_many_writes")
            #expect(Int(third.headers[.retryAfter] ?? "") ?? 0 > 60)
            let loan = try await client.send(
                .post, "/v1/loans",
                body: API.LoanBody(
                    title: "Loom", description: "For the workshop", sector: "Manufacturing", activity: "Weaving", country: "NP",
                    location: API.LocationInput(lat: 27.7, lng: 85.3), amountCents: 10_000, deadline: dayFromToday(20)), token: ada.token)
            #expect(loan.status == .tooManyRequests, "loans are postings too")
            // A repeat of an answered request is answered, not counted.
            let repeated = try await client.send(.post, "/v1/rentals", raw: IdempotencyDigestTests.rental, token: ada.token, idempotencyKey: "r1")
            #expect(repeated.status == .created)
            #expect(try repeated.decode(ItemResource.self).id == first.decode(ItemResource.self).id)
            // Another user has a bucket of their own.
            #expect(try await client.send(.post, "/v1/rentals", raw: IdempotencyDigestTests.rental, token: bob.token).status == .created)
            #expect(try await count(admin, "SELECT count(*) FROM items_view") == 3)

            let item = try first.decode(ItemResource.self).id
            var bids = [HTTPResponse.Status]()
            for _ in 0..<3 { bids.append(try await client.bid(item, bob.token).status) }
            #expect(bids.filter { $0 == .tooManyRequests }.count == 1, "\(bids)")
        }
    }

    @Test func revisionsProfileAndCartChangesShareABucketPastWhichTheyAre429() async throws {
        try await withServer(writeLimits: WriteLimits(postingsPerHour: 0, bidsPerHour: 0, changesPerHour: 8)) { client, _ in
            let ada = try await client.user("ada")
            let item = try await client.postRental(ada.token).id
            #expect(try await client.send(.patch, "/v1/me", body: API.ProfileBody(displayName: "A"), token: ada.token).status == .ok)
            #expect(try await client.send(.patch, "/v1/items/\(item)", body: API.RevisionBody(title: "B"), token: ada.token).status == .ok)
            let third = try await client.send(.delete, "/v1/cart", token: ada.token)
            #expect(third.status == .tooManyRequests)
            #expect(third.code == "too_many_writes")
            #expect(try await client.send(.get, "/v1/me", token: ada.token).status == .ok, "reads are not counted")
        }
    }
}
