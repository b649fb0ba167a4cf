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

@Suite("A field the route does not take is refused by its path")
struct UnknownFieldTests {
    @Test func aFieldTheRouteDoesNotTakeIsA422NamingItAndWritesNothing() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let before = try await eventCount(admin)
            let response = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": 500, "dailyPrice": 5, "colour": "red", "location": {"lat": 27.7, "lng": 85.3}}"#,
                token: ada.token)
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes == ["colour": "unknown_field", "dailyPrice": "unknown_field"])
            #expect(try await eventCount(admin) == before)
        }
    }

    /// The fields a route takes are remembered once seen: a body of every field first, then
    /// unknown ones, top-level and nested, are refused all the same.
    @Test func anUnknownFieldIsRefusedAfterEveryKnownOneWasSeen() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let full = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "description": "18 V", "category": "tools", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3, "place": "Patan"}}"#,
                token: ada.token)
            #expect(full.status == .created, "\(full)")
            let before = try await eventCount(admin)
            let response = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": 500, "colour": "red", "location": {"lat": 27.7, "lng": 85.3, "altitude": 1400}}"#,
                token: ada.token)
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes == ["colour": "unknown_field", "location.altitude": "unknown_field"], "\(response)")
            #expect(try await eventCount(admin) == before)
        }
    }

    @Test func aNestedFieldTheRouteDoesNotTakeIsNamedByItsPath() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let response = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3, "altitude": 1400}}"#,
                token: ada.token)
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes == ["location.altitude": "unknown_field"], "\(response)")
            let fine = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3, "place": "Patan"}}"#,
                token: ada.token)
            #expect(fine.status == .created, "\(fine)")
        }
    }
}
