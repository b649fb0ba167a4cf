import Foundation
import JSONStream
import Testing

/// `JSONWriter` against the encoder it stands in for: a value written by hand, member for
/// member in declaration order, is the bytes of its `Encodable` form in the answers' style.
/// (The server's resources are held to the same in `ServerTests/JSONWriterTests`.)
@Suite("JSON writer, by itself")
struct JSONWriterPrimitivesTests {
    struct Spot: Encodable, JSONWritable {
        var lat: Double
        var place: String?

        func write(to json: inout JSONWriter) throws {
            json.beginObject()
            try json.field("lat", lat)
            json.field("place", place)
            json.endObject()
        }
    }

    struct Sample: Encodable, JSONWritable {
        var text = "Drill \"pro\" \\ 10/10\n\ttab\u{01}\u{1F} é ✓ 🇳🇵"
        var flag = false
        var count = Int.min
        var big: Int64? = Int64.max
        var none: Int? = nil
        var ratio = 0.1
        var whole = -3.0
        var missing: Double? = nil
        var at = Date(timeIntervalSince1970: 1_795_000_000.75)
        var early = Date(timeIntervalSince1970: -2)
        var note: String? = nil
        var spot = Spot(lat: 27.726861779729198, place: nil)
        var spots = [Spot(lat: -0.0, place: "a"), Spot(lat: 1e20, place: "")]
        var nobody: Spot? = nil
        var empty: [Spot] = []

        func write(to json: inout JSONWriter) throws {
            json.beginObject()
            json.field("text", text)
            json.field("flag", flag)
            json.field("count", count)
            json.field("big", big)
            json.field("none", none)
            try json.field("ratio", ratio)
            try json.field("whole", whole)
            try json.field("missing", missing)
            json.field("at", at)
            json.field("early", early)
            json.field("note", note)
            try json.field("spot", spot)
            try json.field("spots", spots)
            try json.field("nobody", nobody)
            try json.field("empty", empty)
            json.endObject()
        }
    }

    struct Holder: Encodable {
        var first = Sample()
        var list = [Sample(), Sample(flag: true, big: nil, note: "n", nobody: Spot(lat: 5e-324, place: "x"))]
        var after = 1
    }

    func text(_ value: some Encodable, _ style: JSONStream.Style) throws -> String {
        String(decoding: try JSONStream.encode(value, style: style), as: UTF8.self)
    }

    @Test("every kind of member is written as the encoder writes it, alone or inside another value")
    func sameBytes() throws {
        #expect(try text(Sample(), .responses) == text(Sample(), .responsesThroughCodable))
        #expect(try text(Holder(), .responses) == text(Holder(), .responsesThroughCodable))
        #expect(try text(Holder(), .responses).hasSuffix(#""after":1}"#))
        #expect(try text(Spot(lat: 1, place: nil), .responses) == #"{"lat":1,"place":null}"#)
    }

    @Test("a number JSON cannot hold is refused, as through Encodable")
    func nonFinite() throws {
        let bad = Spot(lat: .infinity, place: nil)
        #expect(throws: EncodingError.self) { try JSONStream.encode(bad, style: .responses) }
        #expect(throws: EncodingError.self) { try JSONStream.encode(bad, style: .responsesThroughCodable) }
    }

    @Test("a writer on its own writes into the bytes it is given")
    func exchange() throws {
        var bytes = Array("[".utf8)
        var json = JSONWriter()
        json.exchangeBytes(with: &bytes)
        json.value("a/b")
        json.value(Int64?.none)
        json.value(true)
        json.exchangeBytes(with: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == #"["a/b",null,true"#)
    }
}
