import Foundation

/// A typed identifier: a UUID that cannot be mistaken for another kind's.
public struct Identifier<Tag>: Hashable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: UUID

    public init(_ rawValue: UUID = .random()) { self.rawValue = rawValue }

    public init?(_ text: String) {
        guard let uuid = UUID(uuidString: text) else { return nil }
        self.rawValue = uuid
    }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(UUID.self)
    }

    /// Lower-case, like the stream names and URLs it appears in (Foundation writes upper case).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    /// Lower-case, as it appears in stream names and URLs.
    public var description: String { rawValue.lowercaseText }
}

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

    /// The canonical lower-case text, written from the bytes: `uuidString` goes through
    /// sprintf and `lowercased()` copies it again, for every id a response carries.
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
}

public enum UserTag {}
public enum ItemTag {}
public enum BidTag {}
public enum CardTag {}

public typealias UserID = Identifier<UserTag>
public typealias ItemID = Identifier<ItemTag>
public typealias BidID = Identifier<BidTag>
public typealias CardID = Identifier<CardTag>
public enum MessageTag {}
public typealias MessageID = Identifier<MessageTag>
