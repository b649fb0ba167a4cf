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

@Suite("A refused body names every bad field at once")
struct FieldErrorTests {
    @Test func aWrongJSONTypeNamesItsField() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let response = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": "500", "location": {"lat": 27.7, "lng": 85.3}}"#,
                token: ada.token)
            #expect(response.status == .badRequest)
            #expect(response.fieldCodes["dailyPriceCents"] == "wrong_type", "\(response)")
            let nested = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": 500, "location": {"lat": "north", "lng": 85.3}}"#,
                token: ada.token)
            #expect(nested.fieldCodes["location.lat"] == "wrong_type", "\(nested)")
        }
    }

    @Test func aMissingFieldAndABadCategoryDoNotHideATitleTooLong() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let response = try await client.send(
                .post, "/v1/rentals",
                json: ["title": String(repeating: "t", count: 300), "category": "spaceships", "location": ["lat": 27.7, "lng": 85.3]],
                token: ada.token)
            #expect(response.status == .unprocessableContent)
            let codes = response.fieldCodes
            #expect(codes["category"] == "invalid_category", "\(codes)")
            #expect(codes["dailyPriceCents"] == "required")
            #expect(codes["title"] != nil, "the title's own problem, named with the others: \(codes)")
        }
    }

    @Test func registrationAndLoansNameEveryBadFieldWithTheMissingOnes() async throws {
        try await withServer { client, _ in
            let register = try await client.send(.post, "/v1/users", json: ["handle": "A B", "password": "short"])
            #expect(
                register.fieldCodes
                    == ["handle": "invalid_handle", "password": "invalid_password", "displayName": "required", "email": "required"],
                "\(register)")
            let ada = try await client.user("ada")
            let loan = try await client.send(
                .post, "/v1/loans", json: ["title": "", "country": "ZZ", "amountCents": 3000], token: ada.token)
            let codes = loan.fieldCodes
            #expect(codes["title"] == "invalid_title" && codes["country"] == "invalid_country" && codes["amountCents"] == "invalid_amount", "\(codes)")
            #expect(codes["sector"] == "required" && codes["deadline"] == "required")
        }
    }
}
