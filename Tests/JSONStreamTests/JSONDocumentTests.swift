import EventStore
import Foundation
import JSONStream
import Testing

/// The tape's walkers: the canonical form the idempotency digests are made of (its bytes are
/// the digests already kept, so they are pinned here), the limits a body is read within, and
/// each value's bytes as written.
@Suite("JSON document")
struct JSONDocumentTests {
    func canonical(_ text: String) throws -> String? {
        try JSONDocument(Array(text.utf8)).canonical().map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func theCanonicalFormIsPinned() throws {
        let pinned: [(String, String)] = [
            // Keys by their bytes, quotes included: `"a!"` before `"a"`.
            (#"{ "b" : 1, "a" : [true, null, -1.5e3 ], "a!": "x" }"#, #"{"a!":"x","a":[true,null,-1.5e3],"b":1}"#),
            // Escapes read and written one way: only `"`, `\` and controls, as \u00xx.
            (#"{"k":"\u0041\/\n\"\\\u00e9\ud83d\ude00\b"}"#, "{\"k\":\"A/\\u000a\\\"\\\\é😀\\u0008\"}"),
            (#"{"z":{"y":2,"x":1},"a":[]}"#, #"{"a":[],"z":{"x":1,"y":2}}"#),
            (#"{"\u0062":1,"a":2}"#, #"{"a":2,"b":1}"#),
            // Numbers and literals as written.
            (#" [ 1.0 , 1e2, -0, false ] "#, "[1.0,1e2,-0,false]"),
            ("{}", "{}"), ("[ ]", "[]"), (#" "plain é" "#, #""plain é""#),
        ]
        for (text, expected) in pinned {
            #expect(try canonical(text) == expected, "\(text)")
        }
        // Not text: no canonical form (the digest takes the bytes).
        #expect(try canonical(#"{"a":"\ud800"}"#) == nil)
        #expect(throws: DecodingError.self) { try JSONDocument(Array(#"{"a":1"#.utf8)) }
    }

    @Test func theSameValueHasTheSameCanonicalBytes() throws {
        let one = try canonical(#"{"when":{"from":"2026-12-01","until":"2026-12-03"},"price":500,"tags":["a","b"]}"#)
        let other = try canonical("{\n  \"tags\" : [ \"\\u0061\", \"b\" ],\"price\":500,\n\"when\":{\"until\":\"2026-12-03\",\"from\":\"2026-12-01\"}}")
        #expect(one != nil && one == other)
        let value = try JSONDecoder().decode(JSONValue.self, from: Data(try #require(one).utf8))
        #expect(try canonical(String(decoding: JSONEncoder().encode(value), as: UTF8.self)) == one)
    }

    @Test func limitsAreCheckedAsTheBytesAreRead() throws {
        let limits = JSONDocument.Limits(depth: 3, stringBytes: 5, values: 4)
        func refusal(_ text: String) -> JSONDocument.LimitExceeded? {
            do {
                _ = try JSONDocument(Array(text.utf8), limits: limits)
                return nil
            } catch {
                return error as? JSONDocument.LimitExceeded
            }
        }
        #expect(refusal("[[[1]]]") == nil)
        #expect(refusal("[[[[1]]]]") == .depth)
        // Far past the limit and never closed: refused at the fourth opener, not read to the end.
        #expect(refusal(String(repeating: "[", count: 100_000)) == .depth)
        #expect(refusal(#"["12345"]"#) == nil)
        #expect(refusal(#"["123456"]"#) == .stringBytes)
        #expect(refusal("[1,2,3,4]") == nil)
        #expect(refusal("[1,2,3,4,5]") == .values)
        #expect(refusal(#"{"a":[1,2,3],"b":[4,5]}"#) == .values)
        // An unterminated string far past the limit is refused by its length too.
        #expect(refusal("[\"" + String(repeating: "x", count: 100)) == .stringBytes)
    }

    @Test func eachValueIsFoundAsWritten() throws {
        let text = #"{"s":"a\"b","o":{"x":[1,{}]}, "n" : -2.5 ,"t":true,"e":[]}"#
        let document = try JSONDocument(Array(text.utf8))
        let members = document.members(of: document.root)
        #expect(members.map { document.string($0.key) } == ["s", "o", "n", "t", "e"])
        #expect(members.map { String(decoding: document.bytes[document.range($0.value)], as: UTF8.self) }
            == [#""a\"b""#, #"{"x":[1,{}]}"#, "-2.5", "true", "[]"])
        #expect(members.map { document.kind($0.value) } == [.string, .object, .number, .bool, .array])
        #expect(!document.isPlain(members[0].value) && document.string(members[0].value) == #"a"b"#)
        let inner = document.members(of: members[1].value)[0].value
        #expect(document.elements(of: inner).map { document.kind($0) } == [.number, .object])
    }
}
