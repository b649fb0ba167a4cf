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
    func unescape(_ range: Range<Int>) -> String? { unescapeJSON(bytes, range) }

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

/// An escaped string's value: nil for invalid UTF-8 or a lone surrogate, which
/// `JSONDecoder` refuses too.
func unescapeJSON(_ bytes: [UInt8], _ range: Range<Int>) -> String? {
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
