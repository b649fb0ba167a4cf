import Foundation

extension JSONDocument {
    /// The value rewritten so that the same value has the same bytes, whatever its key order,
    /// spacing or string escapes: objects' members sorted by key, no whitespace, strings
    /// escaped one way (`"`, `\` and control characters, each control as `\u00XX`; nothing
    /// else). Numbers and literals are kept as written. Nil when a string is not text (invalid
    /// UTF-8 or a lone surrogate), which no decoder takes either.
    ///
    /// The idempotency digest reads this (a client retrying with its keys in another order
    /// sends the same request); its bytes are the digests' already kept, so they never change.
    /// One walk of the tape and a sort per object: an 80,000-key body costs milliseconds, where
    /// a round trip through `JSONSerialization` cost seconds (issue 15's amplification).
    public func canonical() -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        return write(root, into: &out) ? out : nil
    }

    private func write(_ value: Int, into out: inout [UInt8]) -> Bool {
        switch kind(value) {
        case .null, .bool, .number:
            out.append(contentsOf: bytes[range(value)])
        case .string:
            return writeString(value, into: &out)
        case .array:
            out.append(UInt8(ascii: "["))
            for (offset, element) in elements(of: value).enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                guard write(element, into: &out) else { return false }
            }
            out.append(UInt8(ascii: "]"))
        case .object:
            var written: [(key: [UInt8], value: [UInt8])] = []
            for (key, member) in members(of: value) {
                var keyBytes: [UInt8] = [], valueBytes: [UInt8] = []
                guard writeString(key, into: &keyBytes), write(member, into: &valueBytes) else { return false }
                written.append((keyBytes, valueBytes))
            }
            // By the keys' bytes as written here, quotes included (`"a!"` before `"a"`).
            written.sort { Self.precedes($0.key, $1.key) }
            out.append(UInt8(ascii: "{"))
            for (offset, member) in written.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: member.key)
                out.append(UInt8(ascii: ":"))
                out.append(contentsOf: member.value)
            }
            out.append(UInt8(ascii: "}"))
        }
        return true
    }

    /// A plain string is copied as written (it holds no quote, backslash or control); an
    /// escaped one is read and written the one way.
    private func writeString(_ string: Int, into out: inout [UInt8]) -> Bool {
        out.append(UInt8(ascii: "\""))
        if isPlain(string) {
            out.append(contentsOf: written(string))
        } else {
            guard let text = self.string(string) else { return false }
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
                case ..<0x20: JSONSink.appendUnicodeEscape(byte, to: &out)
                default: out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
        return true
    }

    /// Byte order, by `memcmp`: the sort of a huge object's keys is most of its digest's cost.
    private static func precedes(_ left: [UInt8], _ right: [UInt8]) -> Bool {
        let common = min(left.count, right.count)
        let order =
            common == 0
            ? 0 : left.withUnsafeBytes { left in right.withUnsafeBytes { memcmp(left.baseAddress!, $0.baseAddress!, common) } }
        return order != 0 ? order < 0 : left.count < right.count
    }
}
