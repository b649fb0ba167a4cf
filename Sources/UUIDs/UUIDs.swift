import Foundation

/// UUIDs made, written and read without Foundation's slow paths, which each id of a command,
/// a row and an event went through: `UUID()` reads `/dev/urandom`, `uuidString` goes
/// through sprintf, and `UUID(uuidString:)` through sscanf.
extension UUID {
    /// A new random (version 4) UUID. Foundation's `UUID()` opens, reads and closes
    /// `/dev/urandom` for each one here (3.1 µs, 3% of a command's CPU in `perf`); the
    /// system generator is a `getrandom` call a word (0.8 µs for the two).
    public static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        var words = (generator.next() as UInt64, generator.next() as UInt64)
        var bytes = withUnsafeBytes(of: &words) { $0.load(as: uuid_t.self) }
        bytes.6 = bytes.6 & 0x0F | 0x40  // version 4
        bytes.8 = bytes.8 & 0x3F | 0x80  // RFC 4122 variant
        return UUID(uuid: bytes)
    }

    /// The canonical lower-case text, written from the bytes (`uuidString.lowercased()`).
    public var lowercaseText: String {
        withUnsafeBytes(of: uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { text in
                let hex: StaticString = "0123456789abcdef"
                var index = 0
                for (offset, byte) in bytes.enumerated() {
                    if offset == 4 || offset == 6 || offset == 8 || offset == 10 {
                        text[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    text[index] = hex.utf8Start[Int(byte >> 4)]
                    text[index + 1] = hex.utf8Start[Int(byte & 0x0F)]
                    index += 2
                }
                return index
            }
        }
    }

    /// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in hex digits of either case, what
    /// `UUID(uuidString:)` reads, read straight from the bytes; nil for anything else.
    public init?(text: some StringProtocol) {
        guard let uuid = text.utf8.withContiguousStorageIfAvailable(Self.parse) ?? Self.parse(Array(text.utf8)) else {
            return nil
        }
        self = uuid
    }

    /// The same, from the text's UTF-8 bytes.
    public init?(utf8: UnsafeBufferPointer<UInt8>) {
        guard let uuid = Self.parse(utf8) else { return nil }
        self = uuid
    }

    private static func parse(_ utf8: some RandomAccessCollection<UInt8>) -> UUID? {
        guard utf8.count == 36 else { return nil }
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let parsed = withUnsafeMutableBytes(of: &bytes) { out -> Bool in
            var index = utf8.startIndex
            for offset in 0..<16 {
                if offset == 4 || offset == 6 || offset == 8 || offset == 10 {
                    guard utf8[index] == UInt8(ascii: "-") else { return false }
                    index = utf8.index(after: index)
                }
                let next = utf8.index(after: index)
                guard let high = utf8[index].hexDigitValue, let low = utf8[next].hexDigitValue else { return false }
                out[offset] = high << 4 | low
                index = utf8.index(after: next)
            }
            return true
        }
        return parsed ? UUID(uuid: bytes) : nil
    }
}

extension UInt8 {
    /// The value of this byte as a hex digit of either case; nil for any other byte. (UUIDs,
    /// `bytea` and percent-encoded text are read with it.)
    public var hexDigitValue: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
