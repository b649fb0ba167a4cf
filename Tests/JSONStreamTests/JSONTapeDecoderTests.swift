import EventStore
import Foundation
import JSONStream
import Testing

/// The events' decoder against Foundation's `JSONDecoder()`, which it replaces: the same
/// value from the same bytes, and a refusal where it refuses.
@Suite("JSON tape decoder")
struct JSONTapeDecoderTests {
    struct Place: Codable, Hashable {
        var lat: Double
        var lng: Double
        var place: String?
    }

    enum Kind: String, Codable, Hashable { case bikes, tools }

    struct Wrapped: Codable, Hashable {
        var raw: String
        init(_ raw: String) { self.raw = raw }
        init(from decoder: any Decoder) throws { raw = try decoder.singleValueContainer().decode(String.self) }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(raw)
        }
    }

    struct Everything: Codable, Hashable {
        var id = UUID()
        var wrapped = Wrapped("w")
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
        var floats: [Float] = [0.1, -2.75, 1e20, 16_777_216]
        var absent: String? = nil
        var present: Int? = 7
        var presentString: String? = "here"
        var presentFlag: Bool? = false
        var presentDouble: Double? = 2.5
        var presentPlace: Place? = Place(lat: 1, lng: 2, place: "p")
        var date = Date(timeIntervalSinceReferenceDate: 812_345_678.25)
        var data = Data([0, 1, 2, 250, 255])
        var url = URL(string: "https://example.org/a?b=c")!
        var decimal = Decimal(string: "12.345")!
        var place = Place(lat: 27.7, lng: 85.3, place: nil)
        var places = [Place(lat: 0, lng: 0, place: "a"), Place(lat: -1, lng: 1, place: nil)]
        var kinds: [Kind] = [.bikes, .tools]
        var nested: [[Int]] = [[], [1], [2, 3]]
        var optionals: [Int?] = [1, nil, 3]
        var dictionary = ["one": 1, "two": 2]
        var set: Set<String> = ["x"]
    }

    enum Outcome<T: Equatable>: Equatable {
        case value(T)
        case refused(String)
    }

    /// Both decoders' outcome for `text` as `T`: the value, or the kind of error.
    func outcomes<T: Decodable & Equatable>(_ type: T.Type, _ text: String) -> (tape: Outcome<T>, foundation: Outcome<T>) {
        func outcome(_ body: () throws -> T) -> Outcome<T> {
            do { return .value(try body()) } catch let error as DecodingError {
                switch error {
                case .typeMismatch: return .refused("typeMismatch")
                case .valueNotFound: return .refused("valueNotFound")
                case .keyNotFound(let key, _): return .refused("keyNotFound \(key.stringValue)")
                case .dataCorrupted: return .refused("dataCorrupted")
                @unknown default: return .refused("\(error)")
                }
            } catch { return .refused("\(error)") }
        }
        return (
            outcome { try JSONStream.decode(type, from: text) },
            outcome { try JSONDecoder().decode(type, from: Data(text.utf8)) }
        )
    }

    func expectAgreement<T: Decodable & Equatable>(
        _ type: T.Type, _ text: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let (tape, foundation) = outcomes(type, text)
        #expect(tape == foundation, "\(T.self) from \(text)", sourceLocation: sourceLocation)
    }

    @Test func everyKindOfValueReadsAsFoundationReadsIt() throws {
        let value = Everything()
        let encoded = try JSONEncoder().encode(value)
        let decoded = try JSONStream.decode(Everything.self, from: encoded)
        #expect(decoded == value)
        #expect(decoded == (try JSONDecoder().decode(Everything.self, from: encoded)))
        // The encoder the events are written with, too.
        #expect(try JSONStream.decode(Everything.self, from: JSONStream.encode(value, style: .foundationDefaults)) == value)
    }

    @Test(arguments: [
        // Spacing, order, unknown and escaped keys, escapes.
        #" { "lng" : 2 , "lat":1, "extra": [ {"x": [null, true]} ], "place" : "a\u00e9\ud83c\uddf3\/\b\f\n\r\t\"\\" } "#,
        #"{"\u006cat":1,"lng":2}"#,
        #"{"lat":1,"lng":2,"place":null}"#,
        #"{"lat":1e2,"lng":-0.0,"place":"x"}"#,
        #"{"lat":1E-2,"lng":2}"#,
        // Refused alike: a missing key, a null for a value, the wrong type.
        #"{"lat":1}"#, #"{"lat":null,"lng":2}"#, #"{"lat":"1","lng":2}"#, #"{"lat":1,"lng":2,"place":3}"#,
        #"[1,2]"#, #"null"#, #""x""#,
        // Malformed JSON.
        "", " ", #"{"lat":1,"lng":2} x"#, #"{"lat":01,"lng":2}"#, #"{"lat":1.,"lng":2}"#,
        #"{"lat":.5,"lng":2}"#, #"{"lat":+1,"lng":2}"#, #"{"lat":1,"lng":2"#, #"{"lat":1 "lng":2}"#, #"{lat:1,"lng":2}"#,
        #"{"lat":1,"lng":2,}"#, #"{"lat":1,"lng":2,,}"#, #"{"lat":1,,"lng":2}"#, #"{,}"#,
        #"{"lat":1,"lng":2,"place":"a\qb"}"#, #"{"lat":1,"lng":2,"place":"a\u12"}"#, "{\"lat\":1,\"lng\":2,\"place\":\"a\u{01}\"}",
        "{\"lat\":1,\"lng\":2,\"place\":\"a\u{0}\"}", "{\"lat\":1,\"lng\":2}\u{0}", #"{"lat":NaN,"lng":2}"#,
        #"{"lat":1e400,"lng":2}"#, #"{"lat":tru,"lng":2}"#, #"{"lat":1,"lng":2,"place":"\ud800"}"#,
        #"{"lat":1,"lng":2,"place":"\udc00\ud800"}"#, #"{"lat":1,"lng":2,"place":"\ud800\u0041"}"#,
    ])
    func aPlaceReadsAsFoundationReadsIt(_ text: String) {
        expectAgreement(Place.self, text)
    }

    @Test(arguments: [
        "0", "-0", "7", "-7", "1.0", "1e2", "1.5", "2.5e1", "1e-2", "127", "128", "-128", "-129", "255", "256",
        "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
        "18446744073709551615", "18446744073709551616", "1e30", "\"1\"", "true", "null", "[]",
    ])
    func numbersReadAsFoundationReadsThem(_ text: String) {
        expectAgreement(Int.self, text)
        expectAgreement(Int8.self, text)
        expectAgreement(UInt8.self, text)
        expectAgreement(UInt64.self, text)
        expectAgreement(Double.self, text)
        expectAgreement(Float.self, text)
        expectAgreement(Bool.self, text)
        expectAgreement(String.self, text)
    }

    @Test(arguments: [
        #"{"a":[1,2.5,"x",null,true,{"b":{}}],"c":-3}"#, #"[]"#, #"[[[]]]"#, #"{"":""}"#, #""\u0000""#,
        #"{"a":1,"a":2}"#, #"[1,]"#, #"[1, ]"#, #"[,]"#, #"[1,,]"#, #"[1 2]"#, #"{"a"}"#, #"]"#,
    ])
    func anyValueReadsAsFoundationReadsIt(_ text: String) {
        expectAgreement(JSONValue.self, text)
    }

    @Test(arguments: ["3.4028235e+38", "3.4028235e38", "1e-50", "1e-400", "0.0e5", "-0.0", "0.000", "1.17549435e-38", "16777217"])
    func floatsAndUnderflowReadAsFoundationReadsThem(_ text: String) {
        expectAgreement(Float.self, text)
        expectAgreement(Double.self, text)
    }

    /// The spellings no event body has, where it is stricter than `JSONDecoder` (listed on
    /// `JSONStream.decode`): a malformed member never read, and a number with a fraction or
    /// an exponent read as an integer of 2^53 or more.
    @Test func whereItIsStricter() {
        func refusedHereOnly<T: Decodable & Equatable>(_ type: T.Type, _ text: String) -> Bool {
            let (tape, foundation) = outcomes(type, text)
            guard case .refused = tape, case .value = foundation else { return false }
            return true
        }
        #expect(refusedHereOnly(Place.self, #"{"lat":1,"lng":2,"x":01}"#))
        #expect(refusedHereOnly(Place.self, #"{"lat":1,"lng":2,"x":"a\qb"}"#))
        #expect(refusedHereOnly(Int64.self, "9007199254740993.0"))
        #expect(refusedHereOnly(Int64.self, "1e18"))
        #expect(refusedHereOnly(UInt64.self, "1e19"))
    }

    /// And where `JSONDecoder` is: a zero with an exponent, `0e5`, it refuses as a number.
    @Test func whereFoundationIsStricter() throws {
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Double.self, from: Data("0e5".utf8)) }
        #expect(try JSONStream.decode(Double.self, from: "0e5") == 0)
    }

    @Test func arraysAndOptionalsInThem() {
        for text in ["[1,null,3]", "[]", "[null]", "[1,\"x\"]"] {
            expectAgreement([Int?].self, text)
        }
        for text in ["[1,null,3]", "[\"a\"]", "{}"] {
            expectAgreement([Int].self, text)
        }
    }

    /// Nesting is bounded where Foundation bounds it, and never taken down the stack.
    @Test func deepNestingIsRefusedNotFollowed() {
        let shallow = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect((try? JSONStream.decode(JSONValue.self, from: shallow)) != nil)
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: DecodingError.self) { try JSONStream.decode(JSONValue.self, from: deep) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(JSONValue.self, from: Data(deep.utf8)) }
    }

    @Test func invalidUTF8IsRefused() {
        let bytes: [UInt8] = Array(#"{"lat":1,"lng":2,"place":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONStream.decode(Place.self, from: bytes) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Place.self, from: Data(bytes)) }
    }
}
