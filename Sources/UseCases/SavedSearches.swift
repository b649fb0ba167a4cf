import Foundation
import Marketplace
import Postgres
import Projections

/// A saved search as its owner reads it back.
public struct SavedSearchResource: Codable, Sendable {
    public var id: UUID
    public var name: String
    /// The market's query string, as it was given.
    public var query: String
    public var createdAt: Date
}

/// Saved searches (SPEC §12.7): market queries a user keeps, at most
/// `SavedSearchLimits.perUser`, and the searches a new posting meets. Settings of a person, in
/// `saved_searches` (migration 0040); what they cause (`SavedSearchesMatched`) is in the log.
public struct SavedSearches: Sendable {
    let pool: PostgresPool

    public init(pool: PostgresPool) { self.pool = pool }

    static let tooMany = DomainError(
        .conflict, "too_many_saved_searches",
        "At most \(SavedSearchLimits.perUser) saved searches: delete one to save another.")
    public static let notFoundError = DomainError(.notFound, "saved_search_not_found", "No saved search of yours has this id.")

    /// Keeps `filter` (read from `query`) under `name`. The count and the insert run under a
    /// lock on the user, so twenty-one saved at once keep twenty.
    public func save(_ user: UserID, name: String, query: String, filter: MarketFilter) async throws -> SavedSearchResource {
        let id = UUID()
        let listing = filter.listing
        // The longest word keys the search (`saved_search_keys`): the rarest, most likely.
        let keyWord = listing.words.max { $0.count < $1.count }
        let box = listing.box
        let created: Date = try await pool.withTransaction { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\("saved-searches:\(user)"), 0))")
            let count = try await connection.query("SELECT count(*)::int AS n FROM saved_searches WHERE user_id = \(user.rawValue)")
                .single().decode("n", as: Int.self)
            guard count < SavedSearchLimits.perUser else { throw Self.tooMany }
            let row = try await connection.query(
                """
                INSERT INTO saved_searches (
                    search_id, user_id, name, query, words, kind, category, min_price, max_price, country, near_earth,
                    radius_chord, min_lng, min_lat, max_lng, max_lat, min_rating, from_day, until_day)
                VALUES (
                    \(id), \(user.rawValue), \(name), \(query), search_query(\(listing.words)), \(filter.kind?.rawValue),
                    \(filter.category?.rawValue), \(filter.minPriceCents), \(filter.maxPriceCents), \(filter.country),
                    CASE WHEN \(listing.near?.lat)::float8 IS NOT NULL
                         THEN stored_earth_point(\(listing.near?.lat)::float8, \(listing.near?.lng)::float8) END,
                    \(listing.radiusKm.map(Earth.chord(ofArcKm:))), \(box?.minLng), \(box?.minLat), \(box?.maxLng), \(box?.maxLat),
                    \(filter.minRating), \(filter.availableOn?.from.sql), \(filter.availableOn?.until.sql))
                RETURNING created_at
                """
            ).single()
            if let keyWord {
                try await connection.query(
                    """
                    INSERT INTO saved_search_keys (key, search_id)
                    SELECT DISTINCT left(choice, 3), \(id) FROM unnest(search_choices(\(keyWord))) AS choice
                    ON CONFLICT DO NOTHING
                    """)
            }
            return try row.decode("created_at", as: Date.self)
        }
        return SavedSearchResource(id: id, name: name, query: query, createdAt: created)
    }

    /// The user's saved searches, oldest first.
    public func list(_ user: UserID) async throws -> [SavedSearchResource] {
        try await pool.query(
            """
            SELECT search_id, name, query, created_at FROM saved_searches WHERE user_id = \(user.rawValue)
            ORDER BY created_at, search_id
            """
        ).map { row in
            SavedSearchResource(
                id: try row.decode("search_id"), name: try row.decode("name"), query: try row.decode("query"),
                createdAt: try row.decode("created_at"))
        }
    }

    /// Deletes one of the user's saved searches; another's is not found, as a missing one.
    public func delete(_ user: UserID, _ id: UUID) async throws {
        let rows = try await pool.query(
            "DELETE FROM saved_searches WHERE search_id = \(id) AND user_id = \(user.rawValue) RETURNING 1 AS gone")
        guard !rows.isEmpty else { throw Self.notFoundError }
    }

    /// What a new posting is, for matching.
    public struct Posting: Sendable {
        public var owner: UserID
        public var kind: ItemKind
        public var title: String
        public var description: String
        public var category: Marketplace.Category
        public var priceCents: Int?
        public var location: Location
        public var windowFrom: Day?
        public var windowUntil: Day?

        public init(rental post: PostRental, owner: UserID) {
            self.owner = owner
            kind = .rental
            title = post.title
            description = post.description
            category = post.category
            priceCents = post.dailyPriceCents
            location = post.location
            windowFrom = post.availableFrom
            windowUntil = post.availableUntil
        }

        public init(request post: PostRequest, owner: UserID) {
            self.owner = owner
            kind = .request
            title = post.title
            description = post.description
            category = post.category
            priceCents = post.maxDailyPriceCents
            location = post.location
            windowFrom = post.neededFrom
            windowUntil = post.neededUntil
        }
    }

    /// Other users' saved searches that `posting` meets, as the market would find it: the
    /// searches keyed by the first letters of the posting's words, and those with no words,
    /// each then checked in full. Never every saved search: 10,000 saved cost a posting about
    /// what none do (`scripts/bench`, posting_with_saved_searches).
    public func matches(for posting: Posting) async throws -> [SavedSearchMatch] {
        let rows = try await pool.query(
            """
            WITH item AS (
                SELECT stored_search_vector(\(posting.title), \(posting.description)) AS v,
                       stored_earth_point(\(posting.location.lat)::float8, \(posting.location.lng)::float8) AS earth
            ),
            prefixes AS (
                SELECT DISTINCT left(l, n) AS key
                FROM item, unnest(tsvector_to_array(item.v)) AS l, generate_series(1, least(3, length(l))) AS n
            ),
            candidates AS (
                SELECT k.search_id FROM saved_search_keys k WHERE k.key IN (SELECT key FROM prefixes)
                UNION
                SELECT s.search_id FROM saved_searches s WHERE s.words IS NULL
            )
            SELECT s.user_id, s.search_id
            FROM candidates c JOIN saved_searches s USING (search_id), item
            WHERE s.user_id <> \(posting.owner.rawValue)
              AND (s.words IS NULL OR item.v @@ s.words)
              AND (s.kind IS NULL OR s.kind = \(posting.kind.rawValue))
              AND (s.category IS NULL OR s.category = \(posting.category.rawValue))
              AND (s.min_price IS NULL OR \(posting.priceCents)::int >= s.min_price)
              AND (s.max_price IS NULL OR \(posting.priceCents)::int <= s.max_price)
              AND (s.country IS NULL OR s.country = (SELECT country FROM users_view WHERE user_id = \(posting.owner.rawValue)))
              AND (s.radius_chord IS NULL OR (item.earth <-> s.near_earth) <= s.radius_chord)
              AND (s.min_lat IS NULL OR (\(posting.location.lat)::float8 BETWEEN s.min_lat AND s.max_lat
                   AND CASE WHEN s.min_lng <= s.max_lng THEN \(posting.location.lng)::float8 BETWEEN s.min_lng AND s.max_lng
                            ELSE \(posting.location.lng)::float8 >= s.min_lng OR \(posting.location.lng)::float8 <= s.max_lng END))
              -- A new posting has no rating yet.
              AND s.min_rating IS NULL
              AND (s.from_day IS NULL OR (\(posting.kind.rawValue) = 'rental'
                   AND coalesce(\(posting.windowFrom?.sql)::date <= s.from_day, true)
                   AND coalesce(\(posting.windowUntil?.sql)::date >= s.until_day, true)))
            ORDER BY s.created_at, s.search_id
            LIMIT \(literal: SavedSearchLimits.matchesPerPosting)
            """, prepared: true)
        return try rows.map { row in
            SavedSearchMatch(userID: UserID(try row.decode("user_id", as: UUID.self)), searchID: try row.decode("search_id"))
        }
    }
}
