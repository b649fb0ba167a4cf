import Foundation
import Testing

@testable import EventStore

/// The scan that seals fields without decoding the body: every value's text is exactly the
/// value, whatever its strings hold, and anything it does not understand is left to the slow way.
@Suite("Top-level fields of a JSON object")
struct TopLevelFieldsTests {
    @Test func everyValueIsFoundWhole() throws {
        let text = #"{"a":"x,}\"y]","b":{"c":[1,{"d":"}"}]}, "n" : null,"num":-1.5e3,"t":true,"e":[],"s":"\\"}"#
        let fields = try #require(TopLevelFields(text))
        let whole = try JSONDecoder().decode([String: JSONValue].self, from: Data(text.utf8))
        #expect(fields.members.map(\.key) == ["a", "b", "n", "num", "t", "e", "s"])
        for (key, _) in fields.members {
            let value = try JSONDecoder().decode(JSONValue.self, from: Data(fields.value(key)!))
            #expect(value == whole[key], "\(key)")
        }
        let replaced = fields.replacing(["b": #"{"$sealed":1}"#, "s": "2"])
        let after = try JSONDecoder().decode([String: JSONValue].self, from: Data(replaced.utf8))
        #expect(after["b"] == .object(["$sealed": .int(1)]) && after["s"] == .int(2) && after["a"] == whole["a"])
    }

    @Test func whatItDoesNotUnderstandIsRefused() {
        for text in [#"{"a":1"#, "[1]", #"{"a\u0041":1}"#, #"{"a":1}x"#, #"{"a":}"#, #"{"a" 1}"#, "", #"{"a":"open}"#] {
            #expect(TopLevelFields(text) == nil, "\(text)")
        }
        #expect(TopLevelFields(" { } ")?.members.isEmpty == true)
    }

    /// Bodies as the encoder writes them, with the characters that end a scan inside strings.
    @Test func encodedBodiesScanAsTheyDecode() throws {
        let pieces = ["\"", "\\", "}", "{", "]", "[", ",", ":", " ", "é", "\n", "\u{1}", "x", "null"]
        for seed in 0..<200 {
            var generator = SeededGenerator(seed: UInt64(seed))
            var body = [String: JSONValue]()
            for field in 0..<Int.random(in: 1...6, using: &generator) {
                let text = (0..<Int.random(in: 0...8, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
                body["f\(field)"] =
                    switch Int.random(in: 0...3, using: &generator) {
                    case 0: .string(text)
                    case 1: .object(["k": .string(text), "l": .array([.int(seed), .string(text)])])
                    case 2: .double(Double(seed) + 0.25)
                    default: .null
                    }
            }
            let text = String(decoding: try JSONEncoder().encode(body), as: UTF8.self)
            let fields = try #require(TopLevelFields(text), "\(text)")
            for (key, value) in body {
                #expect(try JSONDecoder().decode(JSONValue.self, from: Data(fields.value(key)!)) == value, "\(text)")
            }
        }
    }
}

/// A small deterministic generator (SplitMix64), so a failure repeats.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
