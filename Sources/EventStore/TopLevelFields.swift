/// The top-level members of a JSON object's text, each as its key and the byte range of its
/// value, found by one scan without decoding anything: sealing a few fields of an event then
/// costs neither a parse of the whole body nor its encoding again. Nil for anything but one
/// well-formed object with plain keys (no escapes), which JSONEncoder never writes.
struct TopLevelFields {
    let bytes: [UInt8]
    let members: [(key: String, value: Range<Int>)]

    init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard let members = Self.scan(bytes) else { return nil }
        self.bytes = bytes
        self.members = members
    }

    private static func scan(_ bytes: [UInt8]) -> [(key: String, value: Range<Int>)]? {
        var members = [(key: String, value: Range<Int>)]()
        var index = 0
        func skipSpace() { while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 } }
        /// The end of the string starting at `index` (its opening quote), past its closing quote.
        func stringEnd(_ start: Int) -> Int? {
            var at = start + 1
            while at < bytes.count {
                switch bytes[at] {
                case UInt8(ascii: "\\"): at += 2
                case UInt8(ascii: "\""): return at + 1
                default: at += 1
                }
            }
            return nil
        }
        skipSpace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            skipSpace()
            return index == bytes.count ? [] : nil
        }
        while true {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let keyEnd = stringEnd(index) else { return nil }
            let keyBytes = bytes[(index + 1)..<(keyEnd - 1)]
            guard !keyBytes.contains(UInt8(ascii: "\\")), let key = String(validating: keyBytes, as: UTF8.self) else { return nil }
            index = keyEnd
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            skipSpace()
            let start = index
            var depth = 0
            scan: while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    guard let end = stringEnd(index) else { return nil }
                    index = end
                    if depth == 0 { break scan }
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    index += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if depth == 0 { break scan }
                    depth -= 1
                    index += 1
                    if depth == 0 { break scan }
                case UInt8(ascii: ","), 0x20, 0x0A, 0x0D, 0x09:
                    if depth == 0 { break scan }
                    index += 1
                default:
                    index += 1
                }
            }
            guard depth == 0, index > start else { return nil }
            members.append((key, start..<index))
            skipSpace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == UInt8(ascii: "}") else { return nil }
            index += 1
            skipSpace()
            return index == bytes.count ? members : nil
        }
    }

    func value(_ key: String) -> ArraySlice<UInt8>? {
        members.first { $0.key == key }.map { bytes[$0.value] }
    }

    /// The text with some values replaced (by key).
    func replacing(_ replacements: [String: String]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count + replacements.values.reduce(0) { $0 + $1.utf8.count })
        var copied = 0
        for member in members.sorted(by: { $0.value.lowerBound < $1.value.lowerBound }) {
            guard let replacement = replacements[member.key] else { continue }
            out += bytes[copied..<member.value.lowerBound]
            out += replacement.utf8
            copied = member.value.upperBound
        }
        out += bytes[copied...]
        return String(decoding: out, as: UTF8.self)
    }
}
