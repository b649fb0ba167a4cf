import Foundation
import JSONStream

/// JSON rewritten so that the same value has the same bytes, whatever its key order, spacing
/// or string escapes: objects' members sorted by key (by their UTF-8 bytes), no whitespace,
/// strings re-escaped one way. Numbers and literals are kept as written.
///
/// One pass over the bytes, then a sort per object: an 80,000-key body costs milliseconds,
/// where a round trip through `JSONSerialization` cost seconds (issue 15's amplification).
/// nil for a body that is not JSON.
enum CanonicalJSON {
    static func canonical(_ bytes: [UInt8]) -> [UInt8]? {
        var parser = Parser(bytes: bytes)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count)
        guard parser.value(into: &out) else { return nil }
        parser.skipSpace()
        return parser.index == bytes.count ? out : nil
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0
        var depth = 0

        mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func value(into out: inout [UInt8]) -> Bool {
            skipSpace()
            guard index < bytes.count else { return false }
            switch bytes[index] {
            case UInt8(ascii: "{"): return object(into: &out)
            case UInt8(ascii: "["): return array(into: &out)
            case UInt8(ascii: "\""): return string(into: &out)
            default: return token(into: &out)
            }
        }

        /// A number or a literal, copied as written.
        mutating func token(into out: inout [UInt8]) -> Bool {
            let start = index
            scan: while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: ","), UInt8(ascii: ":"), UInt8(ascii: "]"), UInt8(ascii: "}"), 0x20, 0x09, 0x0A, 0x0D: break scan
                default: index += 1
                }
            }
            guard index > start else { return false }
            let text = bytes[start..<index]
            guard text.elementsEqual("true".utf8) || text.elementsEqual("false".utf8) || text.elementsEqual("null".utf8)
                || text.allSatisfy({ "0123456789+-.eE".utf8.contains($0) })
            else { return false }
            out.append(contentsOf: text)
            return true
        }

        mutating func array(into out: inout [UInt8]) -> Bool {
            index += 1
            depth += 1
            defer { depth -= 1 }
            guard depth <= 64 else { return false }
            out.append(UInt8(ascii: "["))
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                out.append(UInt8(ascii: "]"))
                return true
            }
            while true {
                guard value(into: &out) else { return false }
                skipSpace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    out.append(UInt8(ascii: "]"))
                    return true
                }
                guard bytes[index] == UInt8(ascii: ",") else { return false }
                index += 1
                out.append(UInt8(ascii: ","))
            }
        }

        mutating func object(into out: inout [UInt8]) -> Bool {
            index += 1
            depth += 1
            defer { depth -= 1 }
            guard depth <= 64 else { return false }
            var members = [(key: [UInt8], value: [UInt8])]()
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                out.append(contentsOf: "{}".utf8)
                return true
            }
            while true {
                skipSpace()
                var keyBytes = [UInt8]()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), string(into: &keyBytes) else { return false }
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
                index += 1
                var valueBytes = [UInt8]()
                guard value(into: &valueBytes) else { return false }
                members.append((keyBytes, valueBytes))
                skipSpace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    break
                }
                guard bytes[index] == UInt8(ascii: ",") else { return false }
                index += 1
            }
            members.sort { Self.precedes($0.key, $1.key) }
            out.append(UInt8(ascii: "{"))
            for (offset, member) in members.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: member.key)
                out.append(UInt8(ascii: ":"))
                out.append(contentsOf: member.value)
            }
            out.append(UInt8(ascii: "}"))
            return true
        }

        /// A string, written canonically: its raw runs copied, each escape read and written
        /// the one way (`"`, `\\` and control characters escaped, nothing else). False when malformed.
        mutating func string(into out: inout [UInt8]) -> Bool {
            index += 1
            out.append(UInt8(ascii: "\""))
            var run = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    out.append(contentsOf: bytes[run..<index])
                    out.append(UInt8(ascii: "\""))
                    index += 1
                    return true
                }
                guard byte == UInt8(ascii: "\\") else {
                    index += 1
                    continue
                }
                out.append(contentsOf: bytes[run..<index])
                guard index + 1 < bytes.count else { return false }
                let escape = bytes[index + 1]
                index += 2
                let scalar: Unicode.Scalar
                switch escape {
                case UInt8(ascii: "\""): scalar = "\""
                case UInt8(ascii: "\\"): scalar = "\\"
                case UInt8(ascii: "/"): scalar = "/"
                case UInt8(ascii: "b"): scalar = "\u{08}"
                case UInt8(ascii: "f"): scalar = "\u{0C}"
                case UInt8(ascii: "n"): scalar = "\n"
                case UInt8(ascii: "r"): scalar = "\r"
                case UInt8(ascii: "t"): scalar = "\t"
                case UInt8(ascii: "u"):
                    guard var unit = hex4() else { return false }
                    // A surrogate pair makes one scalar.
                    if (0xD800...0xDBFF).contains(unit), index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                        bytes[index + 1] == UInt8(ascii: "u")
                    {
                        index += 2
                        guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return false }
                        unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let decoded = Unicode.Scalar(unit) else { return false }
                    scalar = decoded
                default: return false
                }
                Self.write(scalar, into: &out)
                run = index
            }
            return false
        }

        /// Byte order, by `memcmp`: the sort of a huge object's keys is most of its digest's cost.
        static func precedes(_ left: [UInt8], _ right: [UInt8]) -> Bool {
            let common = min(left.count, right.count)
            let order =
                common == 0
                ? 0 : left.withUnsafeBytes { left in right.withUnsafeBytes { memcmp(left.baseAddress!, $0.baseAddress!, common) } }
            return order != 0 ? order < 0 : left.count < right.count
        }

        mutating func hex4() -> UInt32? {
            guard index + 4 <= bytes.count, let value = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
            else { return nil }
            index += 4
            return value
        }

        /// One scalar of a string, as canonical JSON writes it.
        static func write(_ scalar: Unicode.Scalar, into out: inout [UInt8]) {
            switch scalar {
            case "\"": out.append(contentsOf: "\\\"".utf8)
            case "\\": out.append(contentsOf: "\\\\".utf8)
            case _ where scalar.value < 0x20: JSONSink.appendUnicodeEscape(UInt8(scalar.value), to: &out)
            default: out.append(contentsOf: String(scalar).utf8)
            }
        }
    }
}
