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

@Suite("Offer prices, dates and card expiry years are held to their ranges")
struct ValueRangeTests {
    @Test func offersOnARequestStayWithinItsMaximumAndDatesInTheBookableRange() async throws {
        try await withServer(today: { Day(Date()) }) { client, _ in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            let request = try await client.send(
                .post, "/v1/requests",
                body: API.RequestBody(
                    title: "Ladder", category: .tools, maxDailyPriceCents: 800, location: API.LocationInput(lat: 27.7, lng: 85.3),
                    neededFrom: dayFromToday(3), neededUntil: dayFromToday(5)
                ), token: ada.token)
            let id = try request.decode(ItemResource.self).id
            let over = try await client.send(
                .post, "/v1/items/\(id)/bids", body: API.BidBody(dailyPriceCents: 900, from: dayFromToday(3), until: dayFromToday(4)),
                token: bob.token)
            #expect(over.status == .unprocessableContent)
            #expect(over.fieldCodes["dailyPriceCents"] == "over_max_price")
            let within = try await client.send(
                .post, "/v1/items/\(id)/bids", body: API.BidBody(dailyPriceCents: 800, from: dayFromToday(3), until: dayFromToday(4)),
                token: bob.token)
            #expect(within.status == .created, "\(within)")

            let past = try await client.send(
                .post, "/v1/requests",
                body: API.RequestBody(
                    title: "Tent", category: .sports, location: API.LocationInput(lat: 27.7, lng: 85.3),
                    neededFrom: dayFromToday(-5), neededUntil: "9999-12-31"
                ), token: ada.token)
            #expect(past.fieldCodes == ["neededFrom": "in_the_past", "neededUntil": "too_far_ahead"], "\(past)")
        }
    }

    @Test func aTwoDigitExpiryYearAsksForFourDigits() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let response = try await client.addCard(ada.token, expMonth: 12, expYear: 30)
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes["expYear"] == "invalid_expiry")
            #expect(response.problem?.errors?.first?.message.contains("four digits") == true)
        }
    }
}
