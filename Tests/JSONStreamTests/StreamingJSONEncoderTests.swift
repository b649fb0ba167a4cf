import Foundation
import JSONStream
import Testing

/// The responses' encoder against Foundation's JSONEncoder (`.iso8601` dates), which it replaces.
@Suite("Streaming JSON encoder")
struct StreamingJSONEncoderTests {
    struct Place: Codable, Equatable {
        var lat: Double
        var lng: Double
        var place: String?
    }

    struct Everything: Codable {
        var id = UUID()
        var title = "Drill \"pro\" \\ 10/10\n\ttab\u{01}\u{1F} é ✓ 🇳🇵"
        var empty = ""
        var flag = true
        var int = Int.min
        var int8 = Int8.min
        var int16 = Int16.max
        var int32 = Int32.min
        var int64 = Int64.max
        var uint = UInt.max
        var uint8 = UInt8.max
        var uint16 = UInt16.max
        var uint32 = UInt32.max
        var uint64 = UInt64.max
        var doubles = [0.0, -0.0, 25.0, 27.7172, -33.8688, 0.1, 1e-5, 123_456_789.125, 1e20, 5e-324]
        var float: Float = 1.5
        var floats: [Float] = [0.1, -2.75, 1e20, 16_777_216, 1e8, 3.4028235e38, 1.5e-45]
        var absent: String? = nil
        var present: Int? = 7
        var dates = [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_795_354_327.999),
            Date(timeIntervalSince1970: -1.5), Date(timeIntervalSince1970: 951_782_400),  // 2000-02-29
            Date(timeIntervalSince1970: 4_102_444_799),
        ]
        var place = Place(lat: 27.7, lng: 85.3, place: nil)
        var places = [Place(lat: 1, lng: 2, place: "a"), Place(lat: -1, lng: -2, place: nil)]
        var nested = [[1, 2], [], [3]]
        var map = ["b": 2, "a": 1]
        var data = Data([0, 1, 2, 254, 255])
        var url = URL(string: "https://example.org/a?b=c")!
    }

    /// Written field by field, with a nested container left open before a sibling is written.
    struct Hand: Encodable {
        enum Keys: String, CodingKey { case first, inner, after, list, none }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode("one", forKey: .first)
            var inner = container.nestedContainer(keyedBy: Keys.self, forKey: .inner)
            try inner.encode(1, forKey: .first)
            var list = inner.nestedUnkeyedContainer(forKey: .list)
            try list.encode(2)
            try list.encodeNil()
            try container.encode(true, forKey: .after)
            try container.encodeNil(forKey: .none)
        }
    }

    struct Nothing: Encodable {
        func encode(to encoder: any Encoder) throws {}
    }

    func both(_ value: some Encodable) throws -> (ours: Any, foundation: Any, text: String) {
        let ours = try JSONStream.encode(value)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        let theirs = try encoder.encode(value)
        return (
            try JSONSerialization.jsonObject(with: Data(ours), options: .fragmentsAllowed),
            try JSONSerialization.jsonObject(with: theirs, options: .fragmentsAllowed),
            String(decoding: ours, as: UTF8.self)
        )
    }

    /// The value without its nulls, as Foundation's encoder leaves absent optionals out.
    func withoutNulls(_ value: Any) -> Any {
        if let object = value as? [String: Any] { return object.filter { !($0.value is NSNull) }.mapValues(withoutNulls) }
        if let array = value as? [Any] { return array.map(withoutNulls) }
        return value
    }

    /// The same as JSONEncoder writes, but for absent optionals, which are written as null.
    @Test func writesWhatJSONEncoderWritesWithAbsentOptionalsAsNull() throws {
        for value in [Everything(), Everything(id: UUID(), title: "", absent: "here", present: nil)] {
            let (ours, theirs, text) = try both(value)
            #expect((withoutNulls(ours) as? NSDictionary) == (theirs as? NSDictionary), "\(text)")
        }
        let (absent, _, _) = try both(Everything(id: UUID(), title: "", absent: nil, present: nil))
        #expect((absent as? [String: Any])?["absent"] is NSNull, "an absent optional is there, as null")
        #expect((absent as? [String: Any])?["present"] is NSNull)
        let (ours, theirs, text) = try both(Hand())
        #expect((ours as? NSDictionary) == (theirs as? NSDictionary), "\(text)")
        #expect(text == #"{"first":"one","inner":{"first":1,"list":[2,null]},"after":true,"none":null}"#)
        #expect(try both([Nothing()]).text == "[{}]")
        #expect(try both([Place]()).text == "[]")
        #expect(try both("top").text == #""top""#)
    }

    /// The events' style: the value `JSONEncoder()` writes with its defaults, absent optionals
    /// left out and dates as seconds since 2001.
    @Test func foundationStyleWritesWhatADefaultJSONEncoderWrites() throws {
        for value in [Everything(), Everything(id: UUID(), title: "", absent: "here", present: nil)] {
            let ours = try JSONStream.encode(value, style: .foundationDefaults)
            let theirs = try JSONEncoder().encode(value)
            let text = String(decoding: ours, as: UTF8.self)
            #expect(
                (try JSONSerialization.jsonObject(with: Data(ours)) as? NSDictionary)
                    == (try JSONSerialization.jsonObject(with: theirs) as? NSDictionary), "\(text)")
            #expect(!text.contains("null"), "nothing absent is written: \(text)")
        }
        let (ours, theirs) = (try JSONStream.encode(Hand(), style: .foundationDefaults), try JSONEncoder().encode(Hand()))
        #expect(String(decoding: ours, as: UTF8.self) == #"{"first":"one","inner":{"first":1,"list":[2,null]},"after":true,"none":null}"#)
        #expect(
            (try JSONSerialization.jsonObject(with: Data(ours)) as? NSDictionary)
                == (try JSONSerialization.jsonObject(with: theirs) as? NSDictionary))
    }

    @Test func datesAreFoundationsISO8601ToTheCharacter() throws {
        let formatter = ISO8601DateFormatter()
        // Fixed edges, then 1,000 times from 1900 to 2200, each field's every digit among them.
        let edges: [Double] = [0, 1_795_354_327.999, -1.5, -86_400, 951_782_400, 4_102_444_799, 253_402_300_799, 1_700_000_000.5]
        // A fixed sequence (SplitMix64), so that a failure names the same instants every time.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let spread = (0..<1_000).map { _ -> Double in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            return -2_208_988_800 + Double(z >> 11) / Double(1 << 53) * 9_467_107_200
        }
        for seconds in edges + spread {
            let date = Date(timeIntervalSince1970: seconds)
            let ours = String(decoding: try JSONStream.encode(date), as: UTF8.self)
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .iso8601
            #expect(ours == String(decoding: try encoder.encode(date), as: UTF8.self), "\(seconds)")
            // The formatter rounds some fractions of a second up where JSONEncoder does not:
            // it is held to whole seconds.
            let whole = Date(timeIntervalSince1970: seconds.rounded(.down))
            #expect(
                String(decoding: try JSONStream.encode(whole), as: UTF8.self) == "\"\(formatter.string(from: whole))\"",
                "\(seconds)")
        }
    }

    @Test func aNonFiniteNumberIsAnErrorAsInJSONEncoder() {
        #expect(throws: EncodingError.self) { try JSONStream.encode([Double.nan]) }
        #expect(throws: EncodingError.self) { try JSONStream.encode(Place(lat: .infinity, lng: 0)) }
    }
}
