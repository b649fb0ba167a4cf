import Foundation

/// A typed identifier: a UUID that cannot be mistaken for another kind's.
public struct Identifier<Tag>: Hashable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: UUID

    public init(_ rawValue: UUID = UUID()) { self.rawValue = rawValue }

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
    public var description: String { rawValue.uuidString.lowercased() }
}

public enum UserTag {}
public enum ItemTag {}
public enum BidTag {}
public enum CardTag {}

public typealias UserID = Identifier<UserTag>
public typealias ItemID = Identifier<ItemTag>
public typealias BidID = Identifier<BidTag>
public typealias CardID = Identifier<CardTag>
