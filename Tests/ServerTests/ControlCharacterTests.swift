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

@Suite("Control and invisible characters in text are refused, naming the field")
struct ControlCharacterTests {
    @Test func aControlCharacterInAnyTextIsA422NamingTheFieldAndWritesNothing() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let before = try await eventCount(admin)
            let bodies: [(String, String, String, String)] = [
                ("POST", "/v1/rentals", #"{"title": "Bike\u0000", "category": "bikes", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3}}"#, "title"),
                ("POST", "/v1/rentals", #"{"title": "Bike", "category": "bikes", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3, "place": "Pat\u0007an"}}"#, "location.place"),
                ("PATCH", "/v1/me", #"{"displayName": "Ada\u001b[2J"}"#, "displayName"),
                ("POST", "/v1/users", #"{"handle": "a\u0000b", "displayName": "X", "email": "x@example.org", "password": "long enough pass"}"#, "handle"),
                ("POST", "/v1/sessions", #"{"handle": "ada\u0000", "password": "whatever it is"}"#, "handle"),
            ]
            for (method, path, body, field) in bodies {
                let response = try await client.send(HTTPRequest.Method(method)!, path, raw: body, token: ada.token)
                #expect(response.status == .unprocessableContent, "\(method) \(path)")
                #expect(response.fieldCodes[field] == "control_character", "\(method) \(path): \(response)")
            }
            for (path, field) in [
                ("/v1/market?q=drill%00", "q"), ("/v1/loans?sector=Food%00", "sector"), ("/v1/countries?q=%00", "q"),
                ("/v1/market?category=%1B", "category"),
            ] {
                let response = try await client.send(.get, path, token: ada.token)
                #expect(response.status == .unprocessableContent, "\(path)")
                #expect(response.fieldCodes[field] == "control_character", "\(path): \(response)")
            }
            // Tabs and line breaks are text.
            let described = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Lamp", "description": "Brass.\n\tWorks.", "category": "furniture", "dailyPriceCents": 300, "location": {"lat": 27.7, "lng": 85.3}}"#,
                token: ada.token)
            #expect(described.status == .created, "\(described)")
            #expect(try await eventCount(admin) == before + 1)
        }
    }

    @Test func everyBodyRouteRefusesANulNamingTheField() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let before = try await eventCount(admin)
            let id = "6f1c1b4e-7e5a-4c5e-9a53-0a8f2f4d3c11"
            let nul = #"\u0000"#
            let routes: [(HTTPRequest.Method, String, String, String)] = [
                (.post, "/v1/users", #"{"handle": "x", "displayName": "X", "email": "x\#(nul)@example.org", "password": "long enough pass"}"#, "email"),
                (.post, "/v1/sessions", #"{"handle": "ada", "password": "pass\#(nul)word"}"#, "password"),
                (.patch, "/v1/me", #"{"displayName": "A\#(nul)"}"#, "displayName"),
                (.post, "/v1/me/blocks", #"{"userId": "\#(nul)"}"#, "userId"),
                (.post, "/v1/requests", #"{"title": "Tent", "description": "\#(nul)", "category": "sports", "neededFrom": "2026-12-10", "neededUntil": "2026-12-11", "location": {"lat": 1, "lng": 2}}"#, "description"),
                (.patch, "/v1/items/\(id)", #"{"title": "T\#(nul)"}"#, "title"),
                (.post, "/v1/items/\(id)/bids", #"{"dailyPriceCents": 100, "from": "2026-12-10", "until": "2026-12-11", "message": "hi\#(nul)"}"#, "message"),
                (.post, "/v1/bids/\(id)/reject", #"{"reason": "no\#(nul)"}"#, "reason"),
                (.post, "/v1/me/cards", #"{"number": "4242\#(nul)", "expMonth": 12, "expYear": 2030, "cvv": "123", "holderName": "Ada"}"#, "number"),
                (.post, "/v1/me/deposits", #"{"amountCents": 1000, "cardId": "\#(nul)"}"#, "cardId"),
                (.post, "/v1/loans", #"{"title": "Loom\#(nul)", "description": "", "sector": "Arts", "activity": "Weaving", "country": "NP", "location": {"lat": 1, "lng": 2}, "amountCents": 10000, "deadline": "2026-12-20"}"#, "title"),
                (.post, "/v1/loans/\(id)/repayments", #"{"amountCents": 100, "payWith": "balance\#(nul)"}"#, "payWith"),
                (.post, "/v1/cart/items", #"{"loanId": "\#(nul)", "amountCents": 2500}"#, "loanId"),
                (.patch, "/v1/cart/items/\(id)", #"{"amountCents": 2500, "note": "\#(nul)"}"#, "note"),
                (.post, "/v1/cart/checkout", #"{"payWith": "card", "cardId": "\#(nul)"}"#, "cardId"),
            ]
            for (method, path, body, field) in routes {
                let response = try await client.send(method, path, raw: body, token: ada.token)
                #expect(response.status == .unprocessableContent, "\(method) \(path): \(response.status)")
                #expect(response.fieldCodes[field] == "control_character", "\(method) \(path): \(response)")
            }
            for path in ["/v1/loans?q=\u{0}".addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed)!, "/v1/events?after=%00", "/v1/audit/checkpoints?after=%00", "/v1/items/\(id)/bids?cursor=%00"] {
                let response = try await client.send(.get, path, token: ada.token)
                #expect(response.status == .unprocessableContent, "\(path): \(response.status)")
            }
            #expect(try await eventCount(admin) == before)
        }
    }

    @Test func aPasswordWithANulIsRefusedAndNothingIsWritten() async throws {
        try await withServer { client, admin in
            let before = try await eventCount(admin)
            let response = try await client.send(
                .post, "/v1/users",
                raw: #"{"handle": "nul_user", "displayName": "Nul", "email": "nul@example.org", "password": "\u0000abcdefghijk"}"#)
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes["password"] == "control_character")
            #expect(try await eventCount(admin) == before)
        }
    }

    @Test func aC1ControlInRawUTF8IsRefusedLikeAnEscapedOne() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let response = try await client.send(.patch, "/v1/me", raw: "{\"displayName\": \"Ada\u{85}\"}", token: ada.token)
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes["displayName"] == "control_character")
        }
    }

    @Test func displayNamesAreComposedAndRefuseInvisibleAndDirectionCharacters() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            for name in ["ad\u{202E}nimda", "ada\u{200B}", "\u{2066}ada\u{2069}", "a\u{FEFF}da"] {
                let response = try await client.send(.patch, "/v1/me", body: API.ProfileBody(displayName: name), token: ada.token)
                #expect(response.status == .unprocessableContent, "\(name.unicodeScalars.map { String($0.value, radix: 16) })")
                #expect(response.fieldCodes["displayName"] == "invalid_display_name")
            }
            let decomposed = try await client.send(.patch, "/v1/me", body: API.ProfileBody(displayName: "Jose\u{301}"), token: ada.token)
            #expect(decomposed.status == .ok)
            let name = try decomposed.decode(PrivateProfile.self).displayName
            #expect(name == "Jos\u{E9}")
            #expect(name.unicodeScalars.count == 4, "composed: one scalar for é")
        }
    }
}
