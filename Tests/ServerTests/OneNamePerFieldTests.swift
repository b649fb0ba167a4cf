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

@Suite("One name for each field, one shape for each resource")
struct OneNamePerFieldTests {
    @Test func aRentalsPriceIsDailyPriceCentsAndARequestsMaxDailyPriceCentsInRevisionsAndErrors() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let rental = try await client.postRental(ada.token).id
            let wrongName = try await client.send(.patch, "/v1/items/\(rental)", json: ["maxDailyPriceCents": 100], token: ada.token)
            #expect(wrongName.status == .unprocessableContent)
            #expect(wrongName.fieldCodes == ["maxDailyPriceCents": "not_for_this_kind"])
            let unchanged = try await client.send(.get, "/v1/items/\(rental)", token: ada.token)
            #expect(try unchanged.decode(ItemResource.self).dailyPriceCents == 1500, "a refused revision changes nothing: \(unchanged)")
            let badPrice = try await client.send(.patch, "/v1/items/\(rental)", json: ["dailyPriceCents": 0], token: ada.token)
            #expect(badPrice.fieldCodes == ["dailyPriceCents": "invalid_price"], "named as sent, not priceCents")
            let revised = try await client.send(
                .patch, "/v1/items/\(rental)", body: API.RevisionBody(dailyPriceCents: 1800), token: ada.token)
            #expect(try revised.decode(ItemResource.self).dailyPriceCents == 1800)
        }
    }

    @Test func loansSayCountryAndTheMarketFiltersByTheOwnersCountry() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            _ = try await client.send(.patch, "/v1/me", body: API.ProfileBody(country: "NP"), token: ada.token)
            _ = try await client.send(.patch, "/v1/me", body: API.ProfileBody(country: "KE"), token: bob.token)
            let nepali = try await client.postRental(ada.token, title: "Nepali bike").id
            _ = try await client.postRental(bob.token, title: "Kenyan bike")
            let market = try await client.send(.get, "/v1/market?country=np", token: ada.token)
            #expect(try market.decode(Page<ItemResource>.self).data.map(\.id) == [nepali])
            #expect(try await client.send(.get, "/v1/market?country=ZZ", token: ada.token).fieldCodes["country"] == "invalid_country")

            let loan = try await client.postLoan(ada.token, amount: 10_000, title: "Loom")
            let resource = try await client.send(.get, "/v1/loans/\(loan)", token: ada.token)
            #expect(try resource.decode(LoanResource.self).country == "NP")
            // The old name must be gone from the JSON, which a typed read cannot see.
            #expect(resource.json["countryCode"] == nil, "one name: country")
        }
    }

    @Test func patchAndBlocksAnswerWhatGetAnswers() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            _ = try await client.postRental(ada.token)
            let patched = try await client.send(.patch, "/v1/me", body: API.ProfileBody(displayName: "Ada L."), token: ada.token)
            let blocked = try await client.send(.post, "/v1/me/blocks", body: API.BlockBody(userId: bob.id.rawValue), token: ada.token)
            let read = try await client.send(.get, "/v1/me", token: ada.token)
            // One resource: the same keys in every answer, read from the JSON itself.
            let (patchedKeys, blockedKeys, readKeys) = (Set(patched.json.keys), Set(blocked.json.keys), Set(read.json.keys))
            #expect(patchedKeys == readKeys, "PATCH: \(patchedKeys.sorted()), GET: \(readKeys.sorted())")
            #expect(blockedKeys == readKeys)
            #expect(try patched.decode(PrivateProfile.self).posts.count == 1)
            let profile = try read.decode(PrivateProfile.self)
            #expect(profile.blocked == [bob.id])
            #expect(profile.displayName == "Ada L.")
            #expect(patched.json["position"] is Int && read.json["position"] is NSNull, "a read's position is there, as null")
        }
    }
}
