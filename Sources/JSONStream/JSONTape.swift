import Foundation

/// One JSON value on the tape, in document order: a container is followed by its members (an
/// object's as key, value, key, value).
struct TapeEntry {
    enum Kind: UInt8 {
        case null, `true`, `false`, number, string, escapedString, array, object
    }
    var kind: Kind
    /// A container's count of members (beside `kind`: an entry stays four words).
    var count: UInt32 = 0
    /// A string's first byte after its quote, a number's first byte, a container's opener.
    var start: Int
    /// A string's closing quote; the byte after a number, a literal or a container's closer.
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
    /// Bounds checked as the bytes are read, so that a body far past one stops there.
    let limits: JSONDocument.Limits?
    /// Commas read: one fewer than the values, container by container.
    private var separators = 0

    init(bytes: UnsafeBufferPointer<UInt8>, limits: JSONDocument.Limits? = nil) {
        self.bytes = bytes
        self.limits = limits
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
        if let limits, depth >= limits.depth { throw JSONDocument.LimitExceeded.depth }
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
                    separators += 1
                    if let limits, separators >= limits.values { throw JSONDocument.LimitExceeded.values }
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
        tape[at].count = UInt32(count)
        tape[at].end = index
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
        // Past the limit is refused there, whether or not the string ends: the limit is the
        // loop's bound, so the events' decoding (no limits) pays nothing for it.
        let stop = limits.map { min(bytes.count, start + $0.stringBytes + 1) } ?? bytes.count
        while true {
            guard index < stop else {
                if stop < bytes.count { throw JSONDocument.LimitExceeded.stringBytes }
                throw corrupted("Unterminated string")
            }
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

func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}
