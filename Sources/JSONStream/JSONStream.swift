// JSONStream: the one home of the server's JSON. `JSONStream.encode` writes every answer
// (`Style.responses`: problems and server-sent events too) and every event's body
// (`Style.foundationDefaults`); `JSONWriter` and `JSONWritable` (JSONWriter.swift) let the
// hottest resources write the same bytes by hand; `JSONStream.decode` (JSONTapeDecoder.swift)
// reads the events' bodies back. `JSONDocument` (JSONDocument.swift) is the same tape for the
// readers that walk JSON instead: a body's shape check, the idempotency digest's canonical
// form (JSONCanonical.swift), the sealing of an event's top-level fields.
//
// Why Foundation is still imported, use by use (none is for its JSON coders, which this
// module replaces; the tests hold the output to theirs):
// - `Date`: the resources and the events hold dates. Written as `JSONEncoder`'s `.iso8601`
//   from `timeIntervalSince1970` by our own digits (`appendQuotedISO8601`, used by
//   `JSONWriter.value(_: Date)` too), or, in the events' style, through `Date`'s own
//   `Encodable` (seconds since 2001), as `JSONEncoder()`; read back through its `Decodable`.
// - `URL`, `Data`, `Decimal`: `JSONEncoder` and `JSONDecoder` give them their own spellings
//   (`absoluteString`, base64, the decimal's text, read with an `en_US_POSIX` `Locale`), and
//   the output must be their value; a Codable value that holds one is written and read the
//   same here. They are only named, compared by type, never built for other values.
// - `Data` again: `JSONStream.decode(_:from: Data)`, for request bodies held as `Data`.
// - `memcmp`, re-exported from the C library: keys compared in place (tape, canonical sort).
// Everything else (escapes, numbers, the calendar through `Civil`) is the standard library.
import Civil
import Foundation

/// Codable values written straight to JSON bytes, as they encode themselves, where
/// Foundation's `JSONEncoder` first builds a tree of boxed values and dictionaries and then
/// serializes it: under load that tree was 44% of the server's time on `GET /v1/me` (200
/// posts), and 5% of a command's, which encodes its event. The output is `JSONEncoder`'s
/// value: its bytes but for key order (declaration order here), `/`, which is not escaped, and
/// in the answers' style absent optionals, written as `null`. `StreamingJSONEncoderTests`
/// and `EventEncodingTests` (every event's body) compare the two.
///
/// Containers are closed by position, since Codable never says when one is done: writing
/// through a container first closes any opened after it, and a value's containers are
/// closed when its `encode(to:)` returns. So an `encode(to:)` that asks one encoder for two
/// containers, writes to a sibling after opening another, or leaves a super encoder unused
/// is not written as `JSONEncoder` would (it merges, or writes `{}`): synthesized conformances
/// never do, and `EventEncodingTests` holds every event's body to `JSONEncoder`'s value.
///
/// The events' bodies are read back by `decode` (`JSONTapeDecoder.swift`), in place of
/// `JSONDecoder`. Values that write themselves (`JSONSelfWriting`, most through `JSONWriter`)
/// are handed the bytes in the answers' style.
public enum JSONStream {
    /// How the JSON is spelled where the two uses differ.
    public struct Style: Sendable {
        /// Absent optionals written as `null` (the API's answers: one shape, every field
        /// there), or left out as `JSONEncoder` leaves them.
        public var writesNulls: Bool
        /// Dates as `JSONEncoder`'s `.iso8601` (whole seconds, UTC), or as its default: the
        /// seconds since 2001 as a number.
        public var datesAsISO8601: Bool
        /// Values that write themselves (`JSONSelfWriting`) do; off, they go through `Encodable`.
        public var selfWriting: Bool

        /// The API's answers.
        public static let responses = Style(writesNulls: true, datesAsISO8601: true, selfWriting: true)
        /// The API's answers with every value through `Encodable`: what a self-writing value must match.
        public static let responsesThroughCodable = Style(writesNulls: true, datesAsISO8601: true, selfWriting: false)
        /// The same JSON value as `JSONEncoder()` with its default settings: the events' bodies.
        public static let foundationDefaults = Style(writesNulls: false, datesAsISO8601: false, selfWriting: false)
    }

    public static func encode(_ value: some Encodable, style: Style = .responses) throws -> [UInt8] {
        let sink = JSONSink(style: style)
        try sink.writeValue(value, codingPath: [])
        sink.close(downTo: 0)
        return sink.bytes
    }
}

/// A value that writes its JSON itself, appending to the bytes written so far: exactly the
/// bytes its `Encodable` form would write.
public protocol JSONSelfWriting {
    func writeJSON(into bytes: inout [UInt8]) throws
}

/// The bytes written so far and the containers still open.
public final class JSONSink {
    var bytes: [UInt8] = []
    /// Open containers, innermost last: the byte that closes each, and how many members it has.
    var open: [(closer: UInt8, members: Int)] = []

    let style: JSONStream.Style

    init(style: JSONStream.Style) {
        self.style = style
        bytes.reserveCapacity(style.selfWriting ? 1024 : 256)
    }

    func close(downTo level: Int) {
        while open.count > level { bytes.append(open.removeLast().closer) }
    }

    /// Opens a container at `level` (closing any deeper one first); returns its level.
    func openContainer(_ opener: UInt8, _ closer: UInt8) -> Int {
        bytes.append(opener)
        open.append((closer, 0))
        return open.count
    }

    /// Starts a member of the container at `level`: a comma after the first, and the key.
    func member(of level: Int, key: String?) {
        if open.count > level { close(downTo: level) }
        let first = open[level - 1].members == 0
        open[level - 1].members += 1
        guard var key else {
            if !first { bytes.append(UInt8(ascii: ",")) }
            return
        }
        key.withUTF8 { utf8 in
            if !first { bytes.append(UInt8(ascii: ",")) }
            Self.appendEscaped(utf8, to: &bytes)
            bytes.append(UInt8(ascii: ":"))
        }
    }

    func writeValue<T: Encodable>(_ value: T, codingPath: [any CodingKey]) throws {
        // The types JSONEncoder writes its own way; compared by type, which is cheaper than a cast.
        if style.selfWriting, let writable = value as? any JSONSelfWriting {
            // An item, a loan or a bid, or a page of them, at the top of an answer or inside one.
            try writable.writeJSON(into: &bytes)
        } else if T.self == Date.self, style.datesAsISO8601 {
            Self.appendQuotedISO8601(value as! Date, to: &bytes)
        } else if T.self == URL.self {
            writeString((value as! URL).absoluteString)
        } else if T.self == Data.self {
            writeString((value as! Data).base64EncodedString())
        } else if T.self == Decimal.self {
            writeRaw((value as! Decimal).description)
        } else {
            let level = open.count
            let start = bytes.count
            try value.encode(to: StreamEncoder(sink: self, codingPath: codingPath))
            // Nothing asked for a container: JSONEncoder writes an empty object.
            if bytes.count == start { bytes.append(contentsOf: "{}".utf8) }
            close(downTo: level)
        }
    }

    func writeRaw(_ text: String) { bytes.append(contentsOf: text.utf8) }

    /// Runs of plain bytes are copied whole; `bytes` is reached once (each access of a class's
    /// stored property is checked for exclusivity at run time).
    func writeString(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            Self.appendEscaped(utf8, to: &bytes)
        }
    }

    /// A control character as `\u00xx`, lower-case hex: the one spelling the encoder and
    /// `JSONDocument.canonical` share.
    public static func appendUnicodeEscape(_ byte: UInt8, to bytes: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        bytes.append(contentsOf: #"\u00"#.utf8)
        bytes.append(hex[Int(byte >> 4)])
        bytes.append(hex[Int(byte & 0x0F)])
    }

    public static func appendEscaped(_ utf8: UnsafeBufferPointer<UInt8>, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var run = 0
        for index in 0..<utf8.count {
            let byte = utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<index]))
            run = index + 1
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): bytes.append(contentsOf: #"\\"#.utf8)
            case 0x0A: bytes.append(contentsOf: #"\n"#.utf8)
            case 0x0D: bytes.append(contentsOf: #"\r"#.utf8)
            case 0x09: bytes.append(contentsOf: #"\t"#.utf8)
            case 0x08: bytes.append(contentsOf: #"\b"#.utf8)
            case 0x0C: bytes.append(contentsOf: #"\f"#.utf8)
            default: appendUnicodeEscape(byte, to: &bytes)
            }
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...]))
        bytes.append(UInt8(ascii: "\""))
    }

    func writeDouble(_ value: Double, _ codingPath: [any CodingKey]) throws {
        guard let text = Self.numberText(value) else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "\(value) is not valid JSON"))
        }
        writeRaw(text)
    }

    /// A `Float` by its own shortest text, as JSONEncoder writes it (`0.1`, not the `Double`'s
    /// `0.10000000149011612`), whole numbers without ".0".
    func writeFloat(_ value: Float, _ codingPath: [any CodingKey]) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "\(value) is not valid JSON"))
        }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        writeRaw(text)
    }

    /// A finite number as JSONEncoder writes it, whole numbers without ".0"; nil for NaN and infinities.
    public static func numberText(_ value: Double) -> String? {
        guard value.isFinite else { return nil }
        return value == value.rounded(.towardZero) && abs(value) < 1e15 ? String(Int64(value)) : value.description
    }

    /// `"2026-11-22T13:32:07Z"`: whole seconds, UTC, as `JSONEncoder`'s `.iso8601`, in quotes,
    /// straight into `bytes`: twenty of a page's items write forty dates, and making each of
    /// their six fields a String was 4% of the market's CPU (`perf`).
    public static func appendQuotedISO8601(_ date: Date, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        appendISO8601(date, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    private static func appendISO8601(_ date: Date, to bytes: inout [UInt8]) {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let inDay = seconds - days * 86_400
        let (year, month, day) = Civil.date(fromDays: Int(days))
        func digits(_ value: Int64, _ width: Int) {
            guard value >= 0 else {
                // Before year 0: the sign, then at least `width` characters, as the zero padding of the text always wrote.
                let text = String(value)
                bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: max(0, width - text.utf8.count)))
                bytes.append(contentsOf: text.utf8)
                return
            }
            var count = 1
            var limit: Int64 = 10
            while value >= limit, count < 19 {
                count += 1
                limit &*= 10
            }
            if count < width { bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: width - count)) }
            let end = bytes.count + count
            bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: count))
            var rest = value
            var index = end - 1
            repeat {
                bytes[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                index -= 1
            } while rest > 0
        }
        digits(Int64(year), 4)
        bytes.append(UInt8(ascii: "-"))
        digits(Int64(month), 2)
        bytes.append(UInt8(ascii: "-"))
        digits(Int64(day), 2)
        bytes.append(UInt8(ascii: "T"))
        digits(inDay / 3600, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(inDay / 60 % 60, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(inDay % 60, 2)
        bytes.append(UInt8(ascii: "Z"))
    }
}

struct StreamEncoder: Encoder {
    let sink: JSONSink
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedStream<Key>(sink: sink, level: sink.openContainer(UInt8(ascii: "{"), UInt8(ascii: "}")), codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedStream(sink: sink, level: sink.openContainer(UInt8(ascii: "["), UInt8(ascii: "]")), codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueStream(sink: sink, parentPath: codingPath, key: nil)
    }
}

/// A member of an object: each write names its key, then writes the value in the slot after it.
struct KeyedStream<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let sink: JSONSink
    let level: Int
    var codingPath: [any CodingKey]

    /// The value's place after `key`: written there as a single value would be.
    private func slot(_ key: Key) -> SingleValueStream {
        sink.member(of: level, key: key.stringValue)
        return SingleValueStream(sink: sink, parentPath: codingPath, key: key)
    }

    func encodeNil(forKey key: Key) throws { try slot(key).encodeNil() }
    func encode(_ value: Bool, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: String, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: Double, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: Float, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: Int, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: Int8, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: Int16, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: Int32, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: Int64, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: UInt, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: UInt8, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: UInt16, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: UInt32, forKey key: Key) throws { try slot(key).encode(value) }
    func encode(_ value: UInt64, forKey key: Key) throws { try slot(key).encode(value) }
    func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try slot(key).encode(value) }

    // An absent optional is written as `null` in the API's answers, not left out: a client
    // reads one shape, with every field there (issue 15). Foundation's encoder leaves them
    // out, as the events' style does.
    func encodeIfPresent(_ value: Bool?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: String?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: Double?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: Float?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: Int?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: Int8?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: Int16?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: Int32?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: Int64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: UInt?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }
    func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if sink.style.writesNulls { try encodeNil(forKey: key) }
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        slot(key).encoder.container(keyedBy: keyType)
    }
    func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { slot(key).encoder.unkeyedContainer() }
    func superEncoder() -> any Encoder {
        sink.member(of: level, key: "super")
        return StreamEncoder(sink: sink, codingPath: codingPath)
    }
    func superEncoder(forKey key: Key) -> any Encoder { slot(key).encoder }
}

/// The elements of an array: each write starts the next element.
struct UnkeyedStream: UnkeyedEncodingContainer {
    let sink: JSONSink
    let level: Int
    var codingPath: [any CodingKey]
    var count: Int { sink.open.count >= level ? sink.open[level - 1].members : 0 }

    private func slot() -> SingleValueStream {
        sink.member(of: level, key: nil)
        return SingleValueStream(sink: sink, parentPath: codingPath, key: nil)
    }

    func encodeNil() throws { try slot().encodeNil() }
    func encode(_ value: Bool) throws { try slot().encode(value) }
    func encode(_ value: String) throws { try slot().encode(value) }
    func encode(_ value: Double) throws { try slot().encode(value) }
    func encode(_ value: Float) throws { try slot().encode(value) }
    func encode(_ value: Int) throws { try slot().encode(value) }
    func encode(_ value: Int8) throws { try slot().encode(value) }
    func encode(_ value: Int16) throws { try slot().encode(value) }
    func encode(_ value: Int32) throws { try slot().encode(value) }
    func encode(_ value: Int64) throws { try slot().encode(value) }
    func encode(_ value: UInt) throws { try slot().encode(value) }
    func encode(_ value: UInt8) throws { try slot().encode(value) }
    func encode(_ value: UInt16) throws { try slot().encode(value) }
    func encode(_ value: UInt32) throws { try slot().encode(value) }
    func encode(_ value: UInt64) throws { try slot().encode(value) }
    func encode<T: Encodable>(_ value: T) throws { try slot().encode(value) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        slot().encoder.container(keyedBy: keyType)
    }
    func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { slot().encoder.unkeyedContainer() }
    func superEncoder() -> any Encoder { slot().encoder }
}

/// One value at the current place: where every scalar is written. The coding path is only
/// built when asked for (an error), not for every value.
struct SingleValueStream: SingleValueEncodingContainer {
    let sink: JSONSink
    let parentPath: [any CodingKey]
    let key: (any CodingKey)?

    init(sink: JSONSink, parentPath: [any CodingKey], key: (any CodingKey)?) {
        self.sink = sink
        self.parentPath = parentPath
        self.key = key
    }

    var codingPath: [any CodingKey] { key.map { parentPath + [$0] } ?? parentPath }
    /// An encoder whose containers open here.
    var encoder: StreamEncoder { StreamEncoder(sink: sink, codingPath: codingPath) }

    func encodeNil() throws { sink.writeRaw("null") }
    func encode(_ value: Bool) throws { sink.writeRaw(value ? "true" : "false") }
    func encode(_ value: String) throws { sink.writeString(value) }
    func encode(_ value: Double) throws { try sink.writeDouble(value, codingPath) }
    func encode(_ value: Float) throws { try sink.writeFloat(value, codingPath) }
    func encode(_ value: Int) throws { sink.writeRaw(String(value)) }
    func encode(_ value: Int8) throws { sink.writeRaw(String(value)) }
    func encode(_ value: Int16) throws { sink.writeRaw(String(value)) }
    func encode(_ value: Int32) throws { sink.writeRaw(String(value)) }
    func encode(_ value: Int64) throws { sink.writeRaw(String(value)) }
    func encode(_ value: UInt) throws { sink.writeRaw(String(value)) }
    func encode(_ value: UInt8) throws { sink.writeRaw(String(value)) }
    func encode(_ value: UInt16) throws { sink.writeRaw(String(value)) }
    func encode(_ value: UInt32) throws { sink.writeRaw(String(value)) }
    func encode(_ value: UInt64) throws { sink.writeRaw(String(value)) }
    func encode<T: Encodable>(_ value: T) throws { try sink.writeValue(value, codingPath: codingPath) }
}
