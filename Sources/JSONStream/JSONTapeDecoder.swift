import Foundation

extension JSONStream {
    /// `type` read from `bytes` as `JSONDecoder()` with its default settings reads it: the
    /// events' bodies.
    ///
    /// Foundation's decoder builds a dictionary of every object's members before the value
    /// asks for one, and a box for each container: that was 29% of a replay's decoding process
    /// (`perf`). Here the JSON is scanned once into a flat tape of its values, and a member is
    /// found by comparing its key's bytes in place. It reads UTF-8 JSON as `JSONDecoder` reads
    /// it, values and refusals (`JSONTapeDecoderTests` hold the two side by side; its errors are
    /// `DecodingError`s of the same kinds, not always worded alike), but for spellings no event
    /// body has, `jsonb`'s output or our encoder's:
    /// - every value is checked as it is scanned, so a malformed value that is never read is
    ///   refused here, where `JSONDecoder` checks only what it reads;
    /// - keys are compared as bytes (`JSONDecoder` compares them as `String`s, canonically
    ///   equivalent spellings alike), and one that is never read is not made a `String`, so
    ///   a lone surrogate there is taken;
    /// - a number with a fraction or an exponent, of 2^53 or more, is refused as an integer,
    ///   where `JSONDecoder` reads it through `Decimal`;
    /// - and `0e5`, which `JSONDecoder` refuses, is read as 0.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        let tape = try bytes.withUnsafeBufferPointer { buffer in
            var parser = TapeParser(bytes: buffer)
            return try parser.parseDocument()
        }
        let decoder = TapeDecoder(tape: tape, bytes: bytes, at: 0, codingPath: [])
        return try decoder.unbox(type, at: 0)
    }

    public static func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        try decode(type, from: Array(text.utf8))
    }

    /// UTF-8 only, where `JSONDecoder` also reads UTF-16 and UTF-32 and skips a byte-order mark.
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try decode(type, from: [UInt8](data))
    }
}

/// One JSON value on the tape, in document order: a container is followed by its members (an
/// object's as key, value, key, value).
struct TapeEntry {
    enum Kind: UInt8 {
        case null, `true`, `false`, number, string, escapedString, array, object
    }
    var kind: Kind
    /// A string's first byte after its quote, a number's first byte.
    var start: Int
    /// A string's closing quote, a number's end; a container's count of members.
    var end: Int
    /// The entry after this value and everything inside it.
    var next: Int
}

/// The nesting `JSONDecoder` allows; deeper documents are refused, never followed down the stack.
private let maximumDepth = 512

struct TapeParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    var tape: [TapeEntry] = []

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        tape.reserveCapacity(32)
    }

    mutating func parseDocument() throws -> [TapeEntry] {
        try parseValue(depth: 0)
        skipWhitespace()
        guard index == bytes.count else { throw corrupted("Unexpected character after the top-level value") }
        return tape
    }

    private func corrupted(_ reason: String) -> DecodingError {
        .dataCorrupted(DecodingError.Context(codingPath: [], debugDescription: "The given data was not valid JSON: \(reason) at byte \(index)."))
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    private mutating func append(_ kind: TapeEntry.Kind, start: Int, end: Int) {
        tape.append(TapeEntry(kind: kind, start: start, end: end, next: tape.count + 1))
    }

    private mutating func expect(_ byte: UInt8) throws {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == byte else {
            throw corrupted("Expected \"\(Character(Unicode.Scalar(byte)))\"")
        }
        index += 1
    }

    private mutating func parseValue(depth: Int) throws {
        skipWhitespace()
        guard index < bytes.count else { throw corrupted("Unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): try parseContainer(.object, closer: UInt8(ascii: "}"), depth: depth)
        case UInt8(ascii: "["): try parseContainer(.array, closer: UInt8(ascii: "]"), depth: depth)
        case UInt8(ascii: "\""): try parseString()
        case UInt8(ascii: "t"): try parseLiteral("true", .true)
        case UInt8(ascii: "f"): try parseLiteral("false", .false)
        case UInt8(ascii: "n"): try parseLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try parseNumber()
        default: throw corrupted("Unexpected character")
        }
    }

    private mutating func parseContainer(_ kind: TapeEntry.Kind, closer: UInt8, depth: Int) throws {
        guard depth < maximumDepth else { throw corrupted("Too many nested arrays or objects") }
        let at = tape.count
        append(kind, start: index, end: 0)
        index += 1
        var count = 0
        skipWhitespace()
        if index < bytes.count, bytes[index] == closer {
            index += 1
        } else {
            while true {
                if kind == .object {
                    skipWhitespace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw corrupted("Expected a key") }
                    try parseString()
                    try expect(UInt8(ascii: ":"))
                }
                try parseValue(depth: depth + 1)
                count += 1
                skipWhitespace()
                guard index < bytes.count else { throw corrupted("Unexpected end of input") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    // JSONDecoder takes a trailing comma.
                    skipWhitespace()
                    if index < bytes.count, bytes[index] == closer {
                        index += 1
                        break
                    }
                } else if bytes[index] == closer {
                    index += 1
                    break
                } else {
                    throw corrupted("Expected \",\" or the container's end")
                }
            }
        }
        tape[at].end = count
        tape[at].next = tape.count
    }

    private mutating func parseLiteral(_ literal: StaticString, _ kind: TapeEntry.Kind) throws {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - index >= count,
            UnsafeBufferPointer(rebasing: bytes[index..<index + count]).elementsEqual(
                UnsafeBufferPointer(start: literal.utf8Start, count: count))
        else { throw corrupted("Unexpected literal") }
        append(kind, start: index, end: index + count)
        index += count
    }

    /// Checked here, read later: a string's escapes are well formed and it holds no control
    /// character; its UTF-8 is checked when it is made a `String`.
    private mutating func parseString() throws {
        index += 1
        let start = index
        var escaped = false
        while true {
            guard index < bytes.count else { throw corrupted("Unterminated string") }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") { break }
            if byte < 0x20 { throw corrupted("Unescaped control character in a string") }
            if byte == UInt8(ascii: "\\") {
                escaped = true
                index += 1
                guard index < bytes.count else { throw corrupted("Unterminated string") }
                switch bytes[index] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    break
                case UInt8(ascii: "u"):
                    guard bytes.count - index > 4, (1...4).allSatisfy({ hexValue(bytes[index + $0]) != nil }) else {
                        throw corrupted("Invalid \\u escape")
                    }
                    index += 4
                default: throw corrupted("Invalid escape")
                }
            }
            index += 1
        }
        append(escaped ? .escapedString : .string, start: start, end: index)
        index += 1
    }

    /// JSON's grammar for a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
    private mutating func parseNumber() throws {
        let start = index
        func digits() -> Int {
            let from = index
            while index < bytes.count, bytes[index] &- UInt8(ascii: "0") < 10 { index += 1 }
            return index - from
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw corrupted("Invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, bytes[index] &- UInt8(ascii: "0") < 10 { throw corrupted("Number with a leading zero") }
        } else if digits() == 0 {
            throw corrupted("Invalid number")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw corrupted("Invalid number") }
        }
        if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw corrupted("Invalid number") }
        }
        append(.number, start: start, end: index)
    }
}

private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}

/// Reads the tape's values. One decoder serves a whole document: a nested value is read by
/// pointing it at that value's entry and back, as `JSONDecoder` does, not by a decoder each.
final class TapeDecoder: Decoder {
    let tape: [TapeEntry]
    let bytes: [UInt8]
    /// The entry `init(from:)` reads when it asks this decoder for a container.
    var current: Int
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(tape: [TapeEntry], bytes: [UInt8], at current: Int, codingPath: [any CodingKey]) {
        self.tape = tape
        self.bytes = bytes
        self.current = current
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard tape[current].kind == .object else {
            throw mismatch([String: Any].self, at: current, codingPath)
        }
        return KeyedDecodingContainer(TapeKeyedContainer<Key>(decoder: self, object: current, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard tape[current].kind == .array else {
            throw mismatch([Any].self, at: current, codingPath)
        }
        return TapeUnkeyedContainer(decoder: self, array: current, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        TapeSingleValueContainer(decoder: self, entry: current, codingPath: codingPath)
    }

    /// The value at `entry`, one key deeper when `key` is given.
    func unbox<T: Decodable>(_ type: T.Type, at entry: Int, key: (any CodingKey)? = nil) throws -> T {
        // The types JSONDecoder reads its own way with its default strategies.
        if T.self == Data.self || T.self == URL.self || T.self == Decimal.self {
            return try unboxFoundation(type, at: entry, key: key)
        }
        let saved = current
        current = entry
        if let key { codingPath.append(key) }
        defer {
            current = saved
            if key != nil { codingPath.removeLast() }
        }
        return try T(from: self)
    }

    private func unboxFoundation<T: Decodable>(_ type: T.Type, at entry: Int, key: (any CodingKey)?) throws -> T {
        let path = key.map { codingPath + [$0] } ?? codingPath
        if T.self == Decimal.self {
            guard tape[entry].kind == .number, let decimal = Decimal(string: text(of: entry), locale: Locale(identifier: "en_US_POSIX"))
            else { throw mismatch(type, at: entry, path) }
            return decimal as! T
        }
        let string = try self.string(at: entry, path)
        if T.self == URL.self {
            guard let url = URL(string: string) else {
                throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "Invalid URL string."))
            }
            return url as! T
        }
        guard let data = Data(base64Encoded: string) else {
            throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "Encountered Data is not valid Base64."))
        }
        return data as! T
    }

    // MARK: Scalars

    func text(of entry: Int) -> String {
        let value = tape[entry]
        return String(decoding: bytes[value.start..<value.end], as: UTF8.self)
    }

    func isNull(_ entry: Int) -> Bool { tape[entry].kind == .null }

    func bool(at entry: Int, _ path: @autoclosure () -> [any CodingKey]) throws -> Bool {
        switch tape[entry].kind {
        case .true: true
        case .false: false
        // JSONDecoder calls a null where a Bool should be a mismatch, not a missing value.
        case .null:
            throw DecodingError.typeMismatch(
                Bool.self, .init(codingPath: path(), debugDescription: "Expected to decode Bool but found null instead."))
        default: throw mismatch(Bool.self, at: entry, path())
        }
    }

    func string(at entry: Int, _ path: @autoclosure () -> [any CodingKey]) throws -> String {
        let value = tape[entry]
        switch value.kind {
        case .string:
            guard let string = bytes.withUnsafeBufferPointer({ String(validating: UnsafeBufferPointer(rebasing: $0[value.start..<value.end]), as: UTF8.self) })
            else {
                throw DecodingError.dataCorrupted(.init(codingPath: path(), debugDescription: "Invalid UTF-8 in a string."))
            }
            return string
        case .escapedString:
            guard let string = unescape(value.start..<value.end) else {
                throw DecodingError.dataCorrupted(.init(codingPath: path(), debugDescription: "Invalid string."))
            }
            return string
        default: throw mismatch(String.self, at: entry, path())
        }
    }

    /// An escaped string's value: nil for invalid UTF-8 or a lone surrogate, which
    /// `JSONDecoder` refuses too.
    func unescape(_ range: Range<Int>) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(range.count)
        var index = range.lowerBound
        func hex4(_ at: Int) -> UInt32 {
            (0..<4).reduce(0) { $0 << 4 | UInt32(hexValue(bytes[at + $1])!) }
        }
        func appendScalar(_ scalar: Unicode.Scalar) {
            out.append(contentsOf: UTF8.encode(scalar)!)
        }
        while index < range.upperBound {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                index += 1
                continue
            }
            let escape = bytes[index + 1]
            index += 2
            switch escape {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                let unit = hex4(index)
                index += 4
                if (0xD800..<0xDC00).contains(unit) {
                    // A high surrogate is only valid followed by an escaped low one.
                    guard range.upperBound - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                    else { return nil }
                    let low = hex4(index + 2)
                    guard (0xDC00..<0xE000).contains(low) else { return nil }
                    index += 6
                    appendScalar(Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))!)
                } else {
                    guard let scalar = Unicode.Scalar(unit) else { return nil }
                    appendScalar(scalar)
                }
            default: out.append(escape)  // ", \ and /
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    func double(at entry: Int, _ path: @autoclosure () -> [any CodingKey]) throws -> Double {
        try floatingPoint(Double.self, at: entry, path())
    }

    func float(at entry: Int, _ path: @autoclosure () -> [any CodingKey]) throws -> Float {
        try floatingPoint(Float.self, at: entry, path())
    }

    /// Parsed as the type itself (a `Float` through `Double` can round twice), refused when it
    /// overflows or, nonzero, underflows to zero: `JSONDecoder`'s rules.
    private func floatingPoint<F: BinaryFloatingPoint & LosslessStringConvertible>(
        _ type: F.Type, at entry: Int, _ path: @autoclosure () -> [any CodingKey]
    ) throws -> F {
        let value = tape[entry]
        guard value.kind == .number else { throw mismatch(type, at: entry, path()) }
        let text = text(of: entry)
        guard let number = F(text), number.isFinite, number != 0 || isTrueZero(value.start..<value.end) else {
            throw unrepresentable(text, type, path())
        }
        return number
    }

    /// No digit but zeros before the exponent.
    private func isTrueZero(_ range: Range<Int>) -> Bool {
        for index in range {
            switch bytes[index] {
            case UInt8(ascii: "1")...UInt8(ascii: "9"): return false
            case UInt8(ascii: "e"), UInt8(ascii: "E"): return true
            default: continue
            }
        }
        return true
    }

    /// Digits read as they are; a fraction or an exponent only if the value is whole and fits.
    func integer<I: FixedWidthInteger>(_ type: I.Type, at entry: Int, _ path: @autoclosure () -> [any CodingKey]) throws -> I {
        let value = tape[entry]
        guard value.kind == .number else { throw mismatch(type, at: entry, path()) }
        var index = value.start
        let end = value.end
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        var result: I = 0
        var whole = true
        while index < end {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else {
                whole = false
                break
            }
            let (times, overflow) = result.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) =
                negative ? times.subtractingReportingOverflow(I(digit)) : times.addingReportingOverflow(I(digit))
            guard !overflow, !overflow2 else { throw unrepresentable(text(of: entry), type, path()) }
            result = sum
            index += 1
        }
        if whole { return result }
        // Exact below 2^53, where a Double holds every integer.
        guard let double = Double(text(of: entry)), let exact = I(exactly: double), double.magnitude < 0x1p53 else {
            throw unrepresentable(text(of: entry), type, path())
        }
        return exact
    }

    // MARK: Errors

    func mismatch(_ type: Any.Type, at entry: Int, _ path: [any CodingKey]) -> DecodingError {
        let found: String
        switch tape[entry].kind {
        case .null:
            return .valueNotFound(type, .init(codingPath: path, debugDescription: "Cannot get value of type \(type) -- found null value instead"))
        case .true, .false: found = "bool"
        case .number: found = "number"
        case .string, .escapedString: found = "a string"
        case .array: found = "an array"
        case .object: found = "a dictionary"
        }
        return .typeMismatch(type, .init(codingPath: path, debugDescription: "Expected to decode \(type) but found \(found) instead."))
    }

    func unrepresentable(_ text: String, _ type: Any.Type, _ path: [any CodingKey]) -> DecodingError {
        .dataCorrupted(.init(codingPath: path, debugDescription: "Number \(text) is not representable in Swift as \(type)."))
    }
}

struct TapeKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: TapeDecoder
    let object: Int
    let codingPath: [any CodingKey]

    var allKeys: [Key] {
        members().compactMap { key, _ in Key(stringValue: keyString(key)) }
    }

    /// Each member's key entry and value entry.
    private func members() -> [(key: Int, value: Int)] {
        var result: [(key: Int, value: Int)] = []
        var entry = object + 1
        for _ in 0..<decoder.tape[object].end {
            result.append((entry, entry + 1))
            entry = decoder.tape[entry + 1].next
        }
        return result
    }

    private func keyString(_ entry: Int) -> String {
        (try? decoder.string(at: entry, codingPath)) ?? ""
    }

    /// The value entry of `key`'s member: the first, as `JSONDecoder` keeps the first of a
    /// repeated key. Keys are compared as bytes; an escaped one as its value.
    private func find(_ key: Key) -> Int? {
        let tape = decoder.tape
        var name = key.stringValue
        return name.withUTF8 { wanted -> Int? in
            decoder.bytes.withUnsafeBufferPointer { bytes -> Int? in
                var entry = object + 1
                for _ in 0..<tape[object].end {
                    let candidate = tape[entry]
                    if candidate.kind == .string {
                        if candidate.end - candidate.start == wanted.count,
                            wanted.count == 0
                                || memcmp(bytes.baseAddress! + candidate.start, wanted.baseAddress!, wanted.count) == 0
                        {
                            return entry + 1
                        }
                    } else if decoder.unescape(candidate.start..<candidate.end).map({ $0.utf8.elementsEqual(wanted) }) == true {
                        return entry + 1
                    }
                    entry = tape[entry + 1].next
                }
                return nil
            }
        }
    }

    private func value(_ key: Key) throws -> Int {
        guard let entry = find(key) else {
            throw DecodingError.keyNotFound(
                key, .init(codingPath: codingPath, debugDescription: "No value associated with key \(key) (\"\(key.stringValue)\")."))
        }
        return entry
    }

    func contains(_ key: Key) -> Bool { find(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { decoder.isNull(try value(key)) }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder.bool(at: try value(key), codingPath + [key]) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decoder.string(at: try value(key), codingPath + [key]) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decoder.double(at: try value(key), codingPath + [key]) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decoder.float(at: try value(key), codingPath + [key]) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(type, key) }

    private func integer<I: FixedWidthInteger>(_ type: I.Type, _ key: Key) throws -> I {
        try decoder.integer(type, at: try value(key), codingPath + [key])
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decoder.unbox(type, at: try value(key), key: key)
    }

    // One lookup, where the protocol's defaults make three (contains, decodeNil, decode).
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard let entry = find(key), !decoder.isNull(entry) else { return nil }
        return try decoder.string(at: entry, codingPath + [key])
    }

    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        guard let entry = find(key), !decoder.isNull(entry) else { return nil }
        return try decoder.integer(type, at: entry, codingPath + [key])
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        guard let entry = find(key), !decoder.isNull(entry) else { return nil }
        return try decoder.bool(at: entry, codingPath + [key])
    }

    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        guard let entry = find(key), !decoder.isNull(entry) else { return nil }
        return try decoder.double(at: entry, codingPath + [key])
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let entry = find(key), !decoder.isNull(entry) else { return nil }
        return try decoder.unbox(type, at: entry, key: key)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let entry = try value(key)
        guard decoder.tape[entry].kind == .object else { throw decoder.mismatch([String: Any].self, at: entry, codingPath + [key]) }
        return KeyedDecodingContainer(TapeKeyedContainer<NestedKey>(decoder: decoder, object: entry, codingPath: codingPath + [key]))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let entry = try value(key)
        guard decoder.tape[entry].kind == .array else { throw decoder.mismatch([Any].self, at: entry, codingPath + [key]) }
        return TapeUnkeyedContainer(decoder: decoder, array: entry, codingPath: codingPath + [key])
    }

    func superDecoder() throws -> any Decoder {
        try superDecoder(key: TapeKey(stringValue: "super"))
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        try superDecoder(key: key)
    }

    /// `JSONDecoder` gives a decoder of `null` for an absent key.
    private func superDecoder(key: any CodingKey) throws -> any Decoder {
        guard let entry = members().first(where: { keyString($0.key) == key.stringValue })?.value else {
            return TapeDecoder(tape: [TapeEntry(kind: .null, start: 0, end: 0, next: 1)], bytes: [], at: 0, codingPath: codingPath + [key])
        }
        return TapeDecoder(tape: decoder.tape, bytes: decoder.bytes, at: entry, codingPath: codingPath + [key])
    }
}

struct TapeKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) {
        self.stringValue = "Index \(intValue)"
        self.intValue = intValue
    }
}

struct TapeUnkeyedContainer: UnkeyedDecodingContainer {
    let decoder: TapeDecoder
    let array: Int
    let codingPath: [any CodingKey]
    var currentIndex = 0
    /// The entry of the element at `currentIndex`.
    private var entry: Int

    init(decoder: TapeDecoder, array: Int, codingPath: [any CodingKey]) {
        self.decoder = decoder
        self.array = array
        self.codingPath = codingPath
        self.entry = array + 1
    }

    var count: Int? { decoder.tape[array].end }
    var isAtEnd: Bool { currentIndex >= count! }

    private var key: any CodingKey { TapeKey(intValue: currentIndex) }

    private func atEnd(_ type: Any.Type) -> DecodingError {
        .valueNotFound(type, .init(codingPath: codingPath + [key], debugDescription: "Unkeyed container is at end."))
    }

    private mutating func moveOn() {
        entry = decoder.tape[entry].next
        currentIndex += 1
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else { throw atEnd(Any?.self) }
        guard decoder.isNull(entry) else { return false }
        moveOn()
        return true
    }

    /// The next element read by `read`, moving past it only if it could be read.
    private mutating func read<T>(
        _ type: Any.Type, _ read: (TapeDecoder, Int, @autoclosure () -> [any CodingKey]) throws -> T
    ) throws -> T {
        guard !isAtEnd else { throw atEnd(type) }
        let value = try read(decoder, entry, codingPath + [key])
        moveOn()
        return value
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try read(type) { try $0.bool(at: $1, $2()) } }
    mutating func decode(_ type: String.Type) throws -> String { try read(type) { try $0.string(at: $1, $2()) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try read(type) { try $0.double(at: $1, $2()) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try read(type) { try $0.float(at: $1, $2()) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    private mutating func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        try read(type) { try $0.integer(type, at: $1, $2()) }
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let key = key
        return try read(type) { decoder, entry, _ in try decoder.unbox(type, at: entry, key: key) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try read(type) { decoder, entry, path in
            guard decoder.tape[entry].kind == .object else { throw decoder.mismatch([String: Any].self, at: entry, path()) }
            return KeyedDecodingContainer(TapeKeyedContainer<NestedKey>(decoder: decoder, object: entry, codingPath: path()))
        }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try read([Any].self) { decoder, entry, path in
            guard decoder.tape[entry].kind == .array else { throw decoder.mismatch([Any].self, at: entry, path()) }
            return TapeUnkeyedContainer(decoder: decoder, array: entry, codingPath: path())
        }
    }

    mutating func superDecoder() throws -> any Decoder {
        try read((any Decoder).self) { decoder, entry, path in
            TapeDecoder(tape: decoder.tape, bytes: decoder.bytes, at: entry, codingPath: path())
        }
    }
}

struct TapeSingleValueContainer: SingleValueDecodingContainer {
    let decoder: TapeDecoder
    let entry: Int
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { decoder.isNull(entry) }
    func decode(_ type: Bool.Type) throws -> Bool { try decoder.bool(at: entry, codingPath) }
    func decode(_ type: String.Type) throws -> String { try decoder.string(at: entry, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try decoder.double(at: entry, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { try decoder.float(at: entry, codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.integer(type, at: entry, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.unbox(type, at: entry) }
}
