import Foundation

/// A user's saved search that a new posting met (SPEC §12.7).
public struct SavedSearchMatch: Codable, Hashable, Sendable {
    public var userID: UserID
    public var searchID: UUID

    public init(userID: UserID, searchID: UUID) {
        self.userID = userID
        self.searchID = searchID
    }
}

/// A new posting met other users' saved searches: each of them hears of it (`new_match`).
/// Which searches it met is decided with the posting, from the searches saved then, and kept
/// with it, so the feed is made from the log alone.
public struct SavedSearchesMatched: EventBody, Hashable {
    public static let eventType = "SavedSearchesMatched"
    /// The posting's owner, whom the notices name as their source.
    public var ownerID: UserID
    public var matches: [SavedSearchMatch]

    public init(ownerID: UserID, matches: [SavedSearchMatch]) {
        self.ownerID = ownerID
        self.matches = matches
    }

    /// Each user once, in the order first matched.
    public var users: [UserID] {
        var seen = Set<UserID>()
        return matches.map(\.userID).filter { seen.insert($0).inserted }
    }
}

/// At most this many saved searches a user (`too_many_saved_searches`).
public enum SavedSearchLimits {
    public static let perUser = 20
    public static let nameLength = 1...80
    /// A posting notifies at most this many searches: the rest are not told of it (a posting
    /// that matches more is news to the market, not to a list of followers).
    public static let matchesPerPosting = 1_000
}
