import EventStore
import Foundation
import JSONStream
import Marketplace
import Projections
import Testing

@testable import Server

/// The resources that write their own JSON against their `Encodable` form, byte for byte.
@Suite("JSON writer")
struct JSONWriterTests {
    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()

    static let item = #"""
        {"id":"8d40177b-1cc4-49b1-a12a-a96354b7b13c","kind":"rental","title":"Drill \"pro\" \\ 10/10\n\ttab\u0001 é ✓ 🇳🇵",
         "description":"","category":"tools","dailyPriceCents":2314,"status":"available",
         "ownerId":"0E9D5873-9FD9-4301-A913-4A2A87B327E0","ownerHandle":"owner","location":{"lat":27.726861779729198,"lng":-0.0,"place":"Nepal"},
         "availableFrom":"2026-12-01","availableUntil":"2026-12-24","bidCount":3,"rating":4.5,"reviewCount":2,
         "photos":[{"digest":"ab12","url":"/v1/media/ab12"},{"digest":"cd34","url":"/v1/media/cd34"}],
         "createdAt":"2026-11-24T02:50:14Z","updatedAt":"1969-12-31T23:59:58Z","contactEmail":"a@example.org",
         "distanceKm":1e20,"position":9007199254740993}
        """#

    static let request = #"""
        {"id":"34fe5a30-edec-4c44-9d7b-dc92f3d08305","kind":"request","title":"Ladder","description":"tall",
         "category":"tools","maxDailyPriceCents":500,"status":"available","ownerId":"0e9d5873-9fd9-4301-a913-4a2a87b327e0",
         "ownerHandle":"o","location":{"lat":-33.8688,"lng":151,"place":""},"neededFrom":"2026-12-01","bidCount":0,
         "reviewCount":0,"photos":[],"createdAt":"2000-02-29T00:00:00Z","updatedAt":"2099-12-31T23:59:59Z","distanceKm":5e-324}
        """#

    static let loan = #"""
        {"id":"5b7c3e0e-8d8f-4a57-9a57-6d1f3c2b1a00","borrowerId":"0e9d5873-9fd9-4301-a913-4a2a87b327e0","title":"Goats",
         "description":"A \"herd\"\u001f","sector":"agriculture","activity":"goats","country":"NP",
         "location":{"lat":27.7,"lng":85.3,"place":"Pokhara"},"amountCents":50000,"fundedCents":2500,"repaidCents":0,
         "stillNeededCents":47500,"lenderCount":1,"status":"fundraising","deadline":"2026-12-31",
         "photos":[{"digest":"ef","url":"/v1/media/ef"}],"createdAt":"2026-11-24T02:50:14Z","updatedAt":"2026-11-24T02:50:15Z",
         "borrowerHandle":"bea","borrowerDisplayName":"Bea \"B\"","borrowerPhoto":null,"position":12}
        """#

    static let bid = #"""
        {"id":"9f0c3e0e-8d8f-4a57-9a57-6d1f3c2b1a01","itemId":"8d40177b-1cc4-49b1-a12a-a96354b7b13c",
         "bidderId":"0e9d5873-9fd9-4301-a913-4a2a87b327e0","bidderHandle":"bea","dailyPriceCents":450,
         "from":"2026-12-01","until":"2026-12-03","message":"Can I pick it up at \"noon\"?","status":"rejected",
         "reason":"taken","createdAt":"2026-11-24T02:50:14Z","itemTitle":"Drill \u00e9","itemKind":"rental",
         "itemPhoto":{"digest":"ab12","url":"/v1/media/ab12"},"position":77}
        """#

    /// A larger answer that holds resources (as a profile holds its lists), through `Encodable`.
    struct Holder: Encodable {
        var posts: [ItemResource]
        var bids: [BidResource]
        var loans: Page<LoanResource>
        var none: [BidResource] = []
        var count = 3
    }

    /// Says which way it was written.
    struct Marker: Encodable, JSONWritable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode("codable")
        }
        func write(to json: inout JSONWriter) throws { json.value("writer") }
    }

    struct Markers: Encodable {
        var one = Marker()
        var many = [Marker(), Marker()]
    }

    func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try Self.decoder.decode(type, from: Data(text.utf8))
    }

    func expectSameBytes(_ value: some Encodable & JSONWritable) throws {
        let written = try StreamingJSONEncoder.encode(value)
        let coded = try StreamingJSONEncoder.encodeThroughCodable(value)
        #expect(String(decoding: written, as: UTF8.self) == String(decoding: coded, as: UTF8.self))
    }

    @Test("items, requests and loans write the bytes their Encodable form writes")
    func resources() throws {
        let rental = try decode(ItemResource.self, Self.item)
        let request = try decode(ItemResource.self, Self.request)
        let loan = try decode(LoanResource.self, Self.loan)
        try expectSameBytes(rental)
        try expectSameBytes(request)
        try expectSameBytes(loan)
        try expectSameBytes(Page(data: [rental, request], nextCursor: "eyJhdCI6MX0"))
        try expectSameBytes(Page(data: [request], nextCursor: nil))
        try expectSameBytes(Page(data: [ItemResource](), nextCursor: nil))
        try expectSameBytes(Page(data: [loan, loan], nextCursor: nil))
        let bid = try decode(BidResource.self, Self.bid)
        var open = bid
        (open.message, open.reason, open.position, open.itemPhoto) = (nil, nil, nil, nil)
        try expectSameBytes(bid)
        try expectSameBytes(open)
    }

    @Test("an item's shown columns follow its members, the same bytes both ways")
    func shownColumns() throws {
        var rental = try decode(ItemResource.self, Self.item)
        rental.shown = [
            ShownMember(name: "watchers", value: .int(3)), ShownMember(name: "note", value: .string("\"x\" é")),
            ShownMember(name: "gone", value: .null), ShownMember(name: "tags", value: .array([.string("a"), .double(1.5)])),
        ]
        try expectSameBytes(rental)
        let written = String(decoding: try StreamingJSONEncoder.encode(rental), as: UTF8.self)
        #expect(written.hasSuffix(#""position":9007199254740993,"watchers":3,"note":"\"x\" é","gone":null,"tags":["a",1.5]}"#), "\(written)")
    }

    @Test("a rental's calendar writes the bytes its Encodable form writes")
    func calendar() throws {
        let calendar = try decode(
            Availability.self,
            #"{"from":"2027-01-01","until":"2027-03-31","ranges":[{"from":"2027-01-01","until":"2027-01-04","state":"outside"},"#
                + #"{"from":"2027-01-05","until":"2027-01-05","state":"booked"},{"from":"2027-01-06","until":"2027-03-31","state":"free"}]}"#)
        try expectSameBytes(calendar)
        try expectSameBytes(try decode(Availability.self, #"{"from":"2027-01-01","until":"2027-01-01","ranges":[]}"#))
    }

    static var profile: String {
        #"""
        {"id":"0e9d5873-9fd9-4301-a913-4a2a87b327e0","handle":"ada","displayName":"Ada \"L\" é","email":"ada@example.org",
         "country":"NP","memberSince":"2026-11-24T02:50:14Z","balanceCents":125000,"availableCents":120000,"emailVerified":true,"defaultShareCents":2500,"completedDeals":4,
         "rating":4.25,"reviewCount":8,"photos":[{"digest":"ab12","url":"/v1/media/ab12"}],
         "cards":[{"id":"5b7c3e0e-8d8f-4a57-9a57-6d1f3c2b1a02","network":"visa","last4":"4242","expMonth":12,"expYear":2030,
                   "redacted":"visa ending 4242","position":5}],
         "posts":[\#(item),\#(request)],"bids":[\#(bid)],"bidsReceived":[\#(bid),\#(bid)],"approvalsGiven":[],"approvalsReceived":[\#(bid)],
         "loans":[{"loanId":"5b7c3e0e-8d8f-4a57-9a57-6d1f3c2b1a00","title":"Goats","amountCents":50000,"repaidCents":100,"status":"repaying",
                   "country":"NP","photo":{"digest":"ef","url":"/v1/media/ef"},"borrowerHandle":"bea"}],
         "blocked":["34fe5a30-edec-4c44-9d7b-dc92f3d08305","8d40177b-1cc4-49b1-a12a-a96354b7b13c"],
         "links":{"posts":"/v1/me/posts?cursor=abc","bidsReceived":"/v1/me/bids-received?cursor=d\/e"},"position":42}
        """#
    }

    @Test("a profile writes the bytes its Encodable form writes, full or bare")
    func profiles() throws {
        let full = try decode(PrivateProfile.self, Self.profile)
        #expect(full.posts.count == 2 && full.blocked.count == 2 && full.links.posts != nil)
        try expectSameBytes(full)
        var bare = full
        (bare.country, bare.defaultShareCents, bare.rating, bare.position) = (nil, nil, nil, nil)
        (bare.photos, bare.cards, bare.posts, bare.bids, bare.loans, bare.blocked) = ([], [], [], [], [], [])
        bare.links = try decode(ProfileLinks.self, "{}")
        bare.cards = [
            try decode(
                CardResource.self,
                #"{"id":"5b7c3e0e-8d8f-4a57-9a57-6d1f3c2b1a03","network":"mastercard","last4":"0005","expMonth":1,"expYear":2031,"redacted":"x"}"#)
        ]
        try expectSameBytes(bare)
    }

    @Test("resources inside a larger answer write themselves, the same bytes")
    func insideAnotherValue() throws {
        let holder = Holder(
            posts: [try decode(ItemResource.self, Self.item), try decode(ItemResource.self, Self.request)],
            bids: [try decode(BidResource.self, Self.bid)], loans: Page(data: [try decode(LoanResource.self, Self.loan)], nextCursor: "x"))
        let written = String(decoding: try StreamingJSONEncoder.encode(holder), as: UTF8.self)
        let coded = String(decoding: try StreamingJSONEncoder.encodeThroughCodable(holder), as: UTF8.self)
        #expect(written == coded)
        #expect(written.hasSuffix(#""none":[],"count":3}"#))
    }

    @Test("a value that writes itself does so at the top and inside others, and only there")
    func dispatch() throws {
        #expect(String(decoding: try StreamingJSONEncoder.encode(Markers()), as: UTF8.self) == #"{"one":"writer","many":["writer","writer"]}"#)
        #expect(String(decoding: try StreamingJSONEncoder.encode(Marker()), as: UTF8.self) == #""writer""#)
        #expect(
            String(decoding: try StreamingJSONEncoder.encodeThroughCodable(Markers()), as: UTF8.self)
                == #"{"one":"codable","many":["codable","codable"]}"#)
    }

    @Test("a page of items takes the hand-written path")
    func pagesWriteThemselves() throws {
        let page = Page(data: [try decode(ItemResource.self, Self.item)], nextCursor: nil)
        #expect((page as Any) is any JSONWritable)
        #expect(!((Page(data: [1, 2], nextCursor: nil) as Any) is any JSONWritable))
        let text = String(decoding: try StreamingJSONEncoder.encode(page), as: UTF8.self)
        #expect(text.hasPrefix(#"{"data":[{"id":"8d40177b-1cc4-49b1-a12a-a96354b7b13c","kind":"rental","#))
        #expect(text.contains(#""ownerId":"0e9d5873-9fd9-4301-a913-4a2a87b327e0""#))
        #expect(text.contains(#""maxDailyPriceCents":null"#))
        #expect(text.hasSuffix(#""position":9007199254740993}],"nextCursor":null}"#))
    }

    @Test("a problem is written as every answer is: declaration order, `/` unescaped, no empty lists")
    func problems() throws {
        let missing = Problem(.notFound, code: "not_found", detail: "No such resource: /v1/nowhere.")
        #expect(
            String(decoding: try missing.bodyJSON(), as: UTF8.self)
                == #"{"type":"about:blank","title":"Not Found","status":404,"detail":"No such resource: /v1/nowhere.","code":"not_found"}"#)
        var taken = Problem(
            .conflict, code: "dates_unavailable", detail: "Taken.",
            errors: [FieldError(field: "from", code: "dates_unavailable", message: "is \"taken\"")])
        taken.conflicts = [Period(from: Day("2026-12-10")!, until: Day("2026-12-16")!)]
        #expect(
            String(decoding: try taken.bodyJSON(), as: UTF8.self)
                == #"{"type":"about:blank","title":"Conflict","status":409,"detail":"Taken.","code":"dates_unavailable","#
                + #""errors":[{"field":"from","code":"dates_unavailable","message":"is \"taken\""}],"#
                + #""conflicts":[{"from":"2026-12-10","until":"2026-12-16"}]}"#)
        // The same keys and values Foundation's encoder wrote (sorted) before the problems
        // were written as the answers are; only the order differs.
        let foundation = JSONEncoder()
        foundation.outputFormatting = .sortedKeys
        for problem in [missing, taken] {
            let written = try JSONDecoder().decode(JSONValue.self, from: Data(try problem.bodyJSON()))
            #expect(written == (try JSONDecoder().decode(JSONValue.self, from: foundation.encode(problem.body))))
        }
    }

    @Test("a number JSON cannot hold is refused, as through Encodable")
    func nonFiniteNumbers() throws {
        var item = try decode(ItemResource.self, Self.item)
        item.distanceKm = .nan
        #expect(throws: EncodingError.self) { try StreamingJSONEncoder.encode(item) }
        #expect(throws: EncodingError.self) { try StreamingJSONEncoder.encodeThroughCodable(item) }
    }
}
