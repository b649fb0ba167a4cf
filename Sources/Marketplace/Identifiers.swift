import Foundation
import UUIDs

/// A typed identifier: a UUID that cannot be mistaken for another kind's.
public struct Identifier<Tag>: Hashable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: UUID

    public init(_ rawValue: UUID = .random()) { self.rawValue = rawValue }

    public init?(_ text: String) {
        guard let uuid = UUID(text: text) else { return nil }
        self.rawValue = uuid
    }

    /// As Foundation decodes a `UUID`, the same error included, without its sscanf.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        guard let uuid = UUID(text: try container.decode(String.self)) else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "Attempted to decode UUID from invalid UUID string."))
        }
        rawValue = uuid
    }

    /// Lower-case, like the stream names and URLs it appears in (Foundation writes upper case).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    /// Lower-case, as it appears in stream names and URLs.
    public var description: String { rawValue.lowercaseText }
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

extension UserID {
    /// The actor of what an operator runs from the command line, or the server's jobs: not a user.
    public static let system = UserID(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
}
