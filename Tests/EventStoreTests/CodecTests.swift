import EventStore
import Foundation
import Postgres
import Testing
import TestSupport

/// Today's shape: v1 said `price`; v2 says `dailyPriceCents` and added `currency`.
struct RentalPosted: EventPayload, Equatable {
    static let eventType = "RentalPosted"
    static let schemaVersion = 2
    var title: String
    var dailyPriceCents: Int
    var currency: String
}

struct ItemWithdrawn: EventPayload, Equatable {
    static let eventType = "ItemWithdrawn"
    var reason: String
}

enum ItemEvent: Sendable, Equatable {
    case rentalPosted(RentalPosted)
    case withdrawn(ItemWithdrawn)
}

@Suite("Event codec and upcasting")
struct CodecTests {
    var codec: EventCodec<ItemEvent> {
        var codec = EventCodec<ItemEvent>()
        codec.register(
            RentalPosted.self,
            upcasters: [
                Upcaster(from: 1) { old in
                    var new = old
                    new["dailyPriceCents"] = old["price"]
                    new["price"] = nil
                    new["currency"] = .string("USD")
                    return new
                }
            ], wrap: ItemEvent.rentalPosted)
        codec.register(ItemWithdrawn.self, wrap: ItemEvent.withdrawn)
        return codec
    }

    struct Fixture: Decodable {
        var streamId: String
        var type: String
        var schemaVersion: Int
        var data: JSONValue
    }

    @Test func aStoredVersionOneEventDecodesIntoTodaysType() async throws {
        let url = try #require(Bundle.module.url(forResource: "rental-posted-v1", withExtension: "json", subdirectory: "Fixtures"))
        let fixture = try JSONDecoder().decode(Fixture.self, from: Data(contentsOf: url))
        #expect(fixture.schemaVersion == 1)
        try await withStore { store, _ in
            // Stored as the old server wrote it, then read back by today's.
            try await store.append(
                to: StreamID(rawValue: fixture.streamId), expectedVersion: .noStream,
                events: [NewEvent(type: fixture.type, schemaVersion: fixture.schemaVersion, data: try JSONB(fixture.data))])
            let stored = try await store.readStream(StreamID(rawValue: fixture.streamId))[0]
            #expect(stored.schemaVersion == 1)
            #expect(try codec.decode(stored) == .rentalPosted(RentalPosted(title: "Road bike", dailyPriceCents: 1500, currency: "USD")))
        }
    }

    @Test func todaysEventsRoundTripAtTheirVersion() async throws {
        let posted = RentalPosted(title: "Drill", dailyPriceCents: 700, currency: "USD")
        let encoded = try codec.encode(posted)
        #expect(encoded.type == "RentalPosted")
        #expect(encoded.schemaVersion == 2)
        try await withStore { store, _ in
            try await store.append(to: "item-1", expectedVersion: .noStream, events: [encoded, try codec.encode(ItemWithdrawn(reason: "sold"))])
            let events = try await store.readStream("item-1").map(codec.decode)
            #expect(events == [.rentalPosted(posted), .withdrawn(ItemWithdrawn(reason: "sold"))])
        }
    }

    @Test func unknownOrNewerEventsAreClearErrors() throws {
        #expect(throws: EventDecodingError.unknownType("Nope")) {
            try codec.decode(type: "Nope", schemaVersion: 1, data: JSONB(text: "{}"))
        }
        #expect(throws: EventDecodingError.newerThanKnown(type: "RentalPosted", stored: 3, known: 2)) {
            try codec.decode(type: "RentalPosted", schemaVersion: 3, data: JSONB(text: "{}"))
        }
    }
}

@Suite("JSONValue")
struct JSONValueTests {
    /// Each kind of value is told apart however the decoder tries them: a string that spells
    /// a number or a boolean stays a string, a whole number an int, 1.5 a double.
    @Test func everyKindOfValueKeepsItsKind() throws {
        let text = #"{"s":"true","t":"12","b":true,"i":12,"d":1.5,"n":null,"a":[false,"x"],"o":{"k":-3}}"#
        let value = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(
            value
                == .object([
                    "s": .string("true"), "t": .string("12"), "b": .bool(true), "i": .int(12), "d": .double(1.5), "n": .null,
                    "a": .array([.bool(false), .string("x")]), "o": .object(["k": .int(-3)]),
                ]))
    }
}
