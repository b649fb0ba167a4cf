import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ImageFixtures
import Marketplace
import NIOCore
import Postgres
import Projections
@testable import Server
import ServerTestSupport
import Testing
import TestSupport

/// What HTTP promises a client beyond the bodies (issue 47): HEAD, validators and caching,
/// parameters refused by name, the export as a file, a busy pool said as `busy`.
@Suite("HTTP contract")
struct HTTPContractTests {
    func get(
        _ client: any TestClientProtocol, _ uri: String, token: String, method: HTTPRequest.Method = .get, headers extra: HTTPFields = [:]
    ) async throws -> Reply {
        var headers: HTTPFields = [.authorization: "Bearer \(token)"]
        headers.append(contentsOf: extra)
        return try await client.execute(uri: uri, method: method, headers: headers, body: nil) {
            Reply(status: $0.status, headers: $0.headers, data: Data(buffer: $0.body))
        }
    }

    @Test func headAnswersEveryGetRouteWithoutItsBody() async throws {
        try await withServer(testing: .live) { client, _ in
            let ada = try await client.user("ada")
            let drill = try await client.postRental(ada.token, title: "Drill").id
            for uri in ["/v1/market", "/v1/me", "/v1/items/\(drill)", "/v1/items/\(drill)/availability", "/v1/countries"] {
                let full = try await get(client, uri, token: ada.token)
                let head = try await get(client, uri, token: ada.token, method: .head)
                #expect(head.status == .ok, "\(uri): \(head.status)")
                #expect(head.data.isEmpty, "\(uri) has no body")
                #expect(head.headers[.contentLength] == String(full.data.count), "\(uri): the GET's length")
                #expect(head.headers[.contentType] == full.headers[.contentType], "\(uri)")
            }
            let missing = try await get(client, "/v1/items/\(UUID())", token: ada.token, method: .head)
            #expect(missing.status == .notFound)
            #expect(missing.data.isEmpty, "an error's HEAD has no body either")
        }
    }

    @Test func aListUnchangedIsAnswered304AndAChangedOneItsNewBytes() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            _ = try await client.postRental(ada.token, title: "Drill")
            let first = try await get(client, "/v1/market", token: ada.token)
            let tag = try #require(first.headers[.eTag])
            #expect(tag.hasPrefix("W/\""), "weak: \(tag)")
            #expect(first.headers[.cacheControl] == "private, no-cache", "kept, asked again")

            let again = try await get(client, "/v1/market", token: ada.token, headers: [.ifNoneMatch: tag])
            #expect(again.status == .notModified)
            #expect(again.data.isEmpty)
            #expect(again.headers[.eTag] == tag)
            let listed = try await get(client, "/v1/market", token: ada.token, headers: [.ifNoneMatch: "W/\"other\", \(tag)"])
            #expect(listed.status == .notModified, "one of a list")

            _ = try await client.postRental(ada.token, title: "Ladder")
            let changed = try await get(client, "/v1/market", token: ada.token, headers: [.ifNoneMatch: tag])
            #expect(changed.status == .ok)
            #expect(changed.headers[.eTag] != tag)
            #expect(changed.text.contains("Ladder"))
        }
    }

    @Test func personalAnswersAreNeverStoredAndTheExportIsAFile() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            for uri in ["/v1/me", "/v1/me/bids", "/v1/cart", "/v1/me/bookings"] {
                let reply = try await get(client, uri, token: ada.token)
                #expect(reply.status == .ok, "\(uri): \(reply)")
                #expect(reply.headers[.cacheControl] == "private, no-store", "\(uri)")
            }
            let export = try await get(client, "/v1/me/export", token: ada.token)
            #expect(export.status == .ok)
            let disposition = try #require(export.headers[.contentDisposition])
            #expect(disposition.hasPrefix("attachment; filename=\"lender-ada-"), "\(disposition)")
            #expect(export.headers[.cacheControl] == "private, no-store")
        }
    }

    @Test func anUnknownQueryParameterIsRefusedByName() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let misspelt = try await get(client, "/v1/market?catgory=bikes&limit=5&catgory=tools", token: ada.token)
            #expect(misspelt.status == .unprocessableContent, "\(misspelt)")
            #expect(misspelt.problem?.code == "validation_failed")
            #expect(misspelt.fieldCodes["catgory"] == "unknown_parameter")
            #expect(misspelt.problem?.errors?.count == 1, "named once")
            let wrongRoute = try await get(client, "/v1/me?zoom=3", token: ada.token)
            #expect(wrongRoute.fieldCodes["zoom"] == "unknown_parameter", "a parameter of another route")
            #expect(try await get(client, "/v1/market?category=tools&limit=5", token: ada.token).status == .ok)
            #expect(try await get(client, "/health/live?verbose=1", token: ada.token).fieldCodes["verbose"] == "unknown_parameter")
        }
    }

    /// Names from the iOS keyboard, and text in either Unicode form (issue 47).
    @Test func emojiJoinedInANameAndTextInEitherFormAreOneText() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            for name in ["Ada 👩‍💻", "🏳️‍🌈 Pride", "👨‍👩‍👧‍👦", "Zoë 👍🏽"] {
                let changed = try await client.send(.patch, "/v1/me", body: API.ProfileBody(displayName: name), token: ada.token)
                #expect(changed.status == .ok, "\(name): \(changed)")
            }
            for name in ["Ada\u{200D}", "A\u{200D}da", "\u{202E}adA", "\u{3164}", "\u{2800}\u{2800}", "Ada\u{200B}"] {
                let refused = try await client.send(.patch, "/v1/me", body: API.ProfileBody(displayName: name), token: ada.token)
                #expect(refused.fieldCodes["displayName"] == "invalid_display_name", "\(name.unicodeScalars.map { String($0.value, radix: 16) })")
            }

            // Sent decomposed (e + U+0301), kept composed, found by either spelling.
            let decomposed = "Cafe\u{301} grinder"
            let posted = try await client.send(
                .post, "/v1/rentals",
                body: API.RentalBody(
                    title: decomposed, category: .tools, dailyPriceCents: 300, location: API.LocationInput(lat: 27.7, lng: 85.3)),
                token: ada.token)
            #expect(posted.status == .created, "\(posted)")
            #expect(Array((posted.json["title"] as? String ?? "").utf8) == Array("Caf\u{E9} grinder".utf8), "stored composed")
            for query in ["caf%C3%A9", "cafe%CC%81"] {
                let found = try await client.send(.get, "/v1/market?q=\(query)", token: ada.token).decode(Page<ItemResource>.self)
                #expect(found.data.count == 1, "\(query)")
            }
        }
    }

    /// A conflict on a field names it, and every 422 lists what to fix (issue 47).
    @Test func takenHandlesAndAddressesAreNamedAndEvery422HasErrors() async throws {
        try await withServer { client, _ in
            _ = try await client.user("ada")
            let handle = try await client.send(
                .post, "/v1/users",
                body: API.RegisterBody(handle: "ada", displayName: "Other", email: "other@example.org", password: "correct horse battery"))
            #expect(handle.status == .conflict && handle.fieldCodes["handle"] == "handle_taken", "\(handle)")
            let email = try await client.send(
                .post, "/v1/users",
                body: API.RegisterBody(handle: "other", displayName: "Other", email: "ada@example.org", password: "correct horse battery"))
            #expect(email.status == .conflict && email.fieldCodes["email"] == "email_taken", "\(email)")
            let bob = try await client.user("bob")
            let drill = try await client.postRental(bob.token, title: "Drill").id
            let empty = try await client.execute(
                uri: "/v1/items/\(drill)/photos", method: .post,
                headers: [.contentType: "image/jpeg", .authorization: "Bearer \(bob.token)"], body: ByteBuffer()
            ) { Reply(status: $0.status, headers: $0.headers, data: Data(buffer: $0.body)) }
            #expect(empty.status == .unprocessableContent && empty.fieldCodes["body"] == "empty_image", "\(empty)")
            // Bytes that are not UTF-8 stay refused as malformed, not repaired into U+FFFD.
            let broken = try await client.execute(
                uri: "/v1/rentals", method: .post, headers: [.contentType: "application/json", .authorization: "Bearer \(bob.token)"],
                body: ByteBuffer(bytes: Array(#"{"title": "Caf"#.utf8) + [0xC3, 0x28] + Array(#"", "category": "tools", "dailyPriceCents": 1, "location": {"lat": 1, "lng": 2}}"#.utf8))
            ) { Reply(status: $0.status, headers: $0.headers, data: Data(buffer: $0.body)) }
            #expect(broken.status == .badRequest && broken.code == "malformed_body", "\(broken)")
        }
    }

    /// A letter under thousands of combining marks is one character, and no short text
    /// (issue 48); the longest emoji sequences still fit.
    @Test func combiningMarkFloodsAreTooLongAndEmojiFamiliesAreNot() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            func post(_ title: String) async throws -> Reply {
                try await client.send(
                    .post, "/v1/rentals",
                    body: API.RentalBody(
                        title: title, category: .tools, dailyPriceCents: 300, location: API.LocationInput(lat: 27.7, lng: 85.3)),
                    token: ada.token)
            }
            let flood = "a" + String(repeating: "\u{301}", count: 6_000)
            #expect(flood.count == 1)
            #expect(try await post(flood).fieldCodes["title"] == "invalid_title")
            let name = try await client.send(
                .patch, "/v1/me", body: API.ProfileBody(displayName: "A" + String(repeating: "\u{308}", count: 1_000)), token: ada.token)
            #expect(name.fieldCodes["displayName"] == "invalid_display_name")
            let families = String(repeating: "👨‍👩‍👧‍👦", count: 120)
            #expect(try await post(families).status == .created, "120 characters of seven scalars each")
        }
    }

    @Test func aFractionInAWholeNumberFieldIsNamed() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let refused = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": 1.5, "location": {"lat": 27.7, "lng": 85.3}}"#,
                token: ada.token)
            #expect(refused.status == .badRequest, "\(refused)")
            #expect(refused.fieldCodes["dailyPriceCents"] == "wrong_type", "\(refused)")
        }
    }

    /// Rows carry what their screen draws, with no call per row (issue 47): a bid row its
    /// item's title, kind and first photo; a loan its borrower; "my loans" and cart lines a photo.
    @Test func rowsCarryWhatTheirScreensDraw() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let bea = try await client.user("bea")
            let drill = try await client.postRental(owner.token, title: "Drill").id
            let photo = Fixture.withExif(try Fixture.image(width: 40, height: 30, as: ".jpg"), orientation: 1)
            let added = try await client.upload("/v1/items/\(drill)/photos", photo, type: "image/jpeg", token: owner.token)
            let digest = try #require(try added.decode(ItemResource.self).photos.first?.digest)
            let placed = try await client.send(
                .post, "/v1/items/\(drill)/bids", body: API.BidBody(dailyPriceCents: 400, from: "2026-12-03", until: "2026-12-04"),
                token: bea.token)
            #expect(placed.status == .created, "\(placed)")
            let answered = try placed.decode(BidResource.self)
            #expect((answered.itemTitle, answered.itemKind, answered.itemPhoto?.digest) == ("Drill", "rental", digest), "the command's answer")
            for uri in ["/v1/me/bids", "/v1/items/\(drill)/bids"] {
                let token = uri.hasPrefix("/v1/me") ? bea.token : owner.token
                let row = try #require(try await client.send(.get, uri, token: token).decode(Page<BidResource>.self).data.first)
                #expect((row.itemTitle, row.itemKind, row.itemPhoto?.digest) == ("Drill", "rental", digest), "\(uri)")
            }
            let received = try await client.send(.get, "/v1/me", token: owner.token).json["bidsReceived"] as? [[String: Any]]
            #expect(received?.first?["itemTitle"] as? String == "Drill")

            let (loan, lenders) = try await client.fundedLoan(borrower: bea.token, lenders: 1, amount: 5000)
            let card = try await client.send(.get, "/v1/loans/\(loan)", token: owner.token).decode(LoanResource.self)
            #expect((card.borrowerHandle, card.borrowerDisplayName, card.borrowerPhoto == nil) == ("bea", "User bea", true))
            let listed = try await client.send(.get, "/v1/loans", token: owner.token).decode(Page<LoanResource>.self)
            #expect(listed.data.first?.borrowerHandle == "bea")
            let mine = try await client.send(.get, "/v1/me/loans", token: lenders[0]).json["data"] as? [[String: Any]]
            #expect(mine?.first?["country"] as? String == "NP" && mine?.first?["borrowerHandle"] as? String == "bea", "\(mine ?? [])")
            #expect(mine?.first?.keys.contains("photo") == true)
            let other = try await client.postLoan(bea.token, title: "Loom")
            _ = try await client.addToCart(owner.token, other, 2500)
            let lines = try await client.send(.get, "/v1/cart", token: owner.token).json["lines"] as? [[String: Any]]
            #expect(lines?.first?.keys.contains("photo") == true, "\(lines ?? [])")
        }
    }

    @Test func everyConnectionLentPastTheWaitIsBusyNotAnOutage() async throws {
        let router = Router()
        router.add(middleware: UnexpectedErrorMiddleware())
        router.get("/full") { _, _ -> String in throw PostgresError(.poolExhausted, message: "every connection is lent") }
        try await Application(router: router).test(.router) { client in
            try await client.execute(uri: "/full", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(response.headers[.retryAfter] == "1")
                #expect(String(buffer: response.body).contains("\"busy\""))
            }
        }
    }
}
