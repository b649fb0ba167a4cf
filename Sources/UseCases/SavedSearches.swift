import EventStore
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
                    radius_chord, min_lng, min_lat, max_lng, max_lat, from_day, until_day)
                VALUES (
                    \(id), \(user.rawValue), \(name), \(query), search_prefix_query(\(listing.words)), \(filter.kind?.rawValue),
                    \(filter.category?.rawValue), \(filter.minPriceCents), \(filter.maxPriceCents), \(filter.country),
                    CASE WHEN \(listing.near?.lat)::float8 IS NOT NULL
                         THEN stored_earth_point(\(listing.near?.lat)::float8, \(listing.near?.lng)::float8) END,
                    \(listing.radiusKm.map(Earth.chord(ofArcKm:))), \(box?.minLng), \(box?.minLat), \(box?.maxLng), \(box?.maxLat),
                    \(filter.availableOn?.from.sql), \(filter.availableOn?.until.sql))
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
}

/// Tells saved searches of new postings (SPEC §12.7): follows the log from
/// `saved_search_position`, finds the searches each new posting in a batch meets in one
/// statement (the searches keyed by the first letters of its words, and those with no words
/// in its category, each then checked in full: never every saved search), and appends each
/// item's `SavedSearchesMatched` through its decider, which tells them once, while the item is
/// in the market. The position moves after the appends: a crash between repeats the batch, and
/// the decider finds the items told already. Several servers take turns (a session lock).
public struct SearchAlerts: Sendable {
    let commands: ItemCommands
    /// Events read at most a round.
    public var batch = 1_000

    public init(commands: ItemCommands) { self.commands = commands }

    /// One round; how many events it read past (0: none new, or another server at it).
    ///
    /// Each statement commits on its own, under a session lock that makes the round one
    /// server's: a transaction held open across the appends kept its locks on the views, and a
    /// replay's swap, which locks them while holding the log's head, gave up (review).
    public func run() async throws -> Int {
        let pool = commands.gateway.store.pool
        return try await pool.withConnection { connection in
            guard try await connection.query("SELECT pg_try_advisory_lock(hashtextextended('search-alerts', 0)) AS got").single()
                .decode("got", as: Bool.self)
            else { return 0 }
            do {
                let read = try await round(on: connection)
                try await connection.query("SELECT pg_advisory_unlock(hashtextextended('search-alerts', 0))")
                return read
            } catch {
                // The pooled connection must not keep the lock.
                _ = try? await connection.query("SELECT pg_advisory_unlock(hashtextextended('search-alerts', 0))")
                throw error
            }
        }
    }

    private func round(on connection: PostgresConnection) async throws -> Int {
        let after = try await connection.query("SELECT position FROM saved_search_position").single().decode("position", as: Int64.self)
        guard
            let last = try await connection.query(
                "SELECT max(position) AS last FROM (SELECT position FROM events WHERE position > \(after) ORDER BY position LIMIT \(batch)) p"
            ).single().decode("last", as: Int64?.self)
        else { return 0 }
        let posted = try await connection.query(
            """
            SELECT substr(stream_id, 6)::uuid AS item_id FROM events
            WHERE position > \(after) AND position <= \(last) AND type IN ('RentalPosted', 'RequestPosted')
            """
        ).map { try $0.decode("item_id", as: UUID.self).uuidString }
        if !posted.isEmpty {
            try await SearchWords.learn(items: posted, on: connection)
            var found = [ItemID: [SavedSearchMatch]]()
            for row in try await connection.query(Self.matches(posted)) {
                let match = SavedSearchMatch(
                    userID: UserID(try row.decode("user_id", as: UUID.self)), searchID: try row.decode("search_id"))
                found[ItemID(try row.decode("item_id", as: UUID.self)), default: []].append(match)
            }
            for (item, matches) in found {
                _ = try await commands.handle(
                    .tellSavedSearches(matches), on: item, actor: .system, metadata: EventMetadata(actorID: "operator:search alerts"))
            }
        }
        // After the appends: a crash before this repeats the batch, and the decider finds the
        // items told already.
        try await connection.query("UPDATE saved_search_position SET position = \(last) WHERE position = \(after)")
        return Int(last - after)
    }

    /// The saved searches each of `items` meets, as the market would find the item: one a
    /// user (their oldest), users in no order of their making, so that whoever saves first
    /// does not take the places of `SavedSearchLimits.matchesPerPosting`. Each key and each search is looked up by its index one at a time
    /// (`LATERAL ... OFFSET 0`): joined as sets, the planner scanned every search.
    static func matches(_ items: [String]) -> PostgresQuery {
        """
        WITH posted AS MATERIALIZED (
            SELECT i.item_id, i.owner_id, i.kind, i.category, i.price_cents, i.lat, i.lng, i.earth, i.search, i.window_from,
                   i.window_until, i.created_at, (SELECT country FROM users_view WHERE user_id = i.owner_id) AS country
            FROM items_view i WHERE i.item_id = ANY (\(items)::uuid[]) AND i.status = 'available'
        ),
        keys AS MATERIALIZED (
            SELECT DISTINCT p.item_id, left(l, n) AS key
            FROM posted p, unnest(tsvector_to_array(p.search)) AS l, generate_series(1, 3) AS n
            WHERE n <= length(l)
        ),
        candidates AS MATERIALIZED (
            SELECT keys.item_id, k.search_id
            FROM keys, LATERAL (SELECT search_id FROM saved_search_keys WHERE key = keys.key OFFSET 0) k
            UNION
            SELECT p.item_id, w.search_id
            FROM posted p,
                 LATERAL (SELECT search_id FROM saved_searches
                          WHERE words IS NULL AND (category IS NULL OR category = p.category) OFFSET 0) w
        )
        SELECT DISTINCT ON (c.item_id, s.user_id) c.item_id, s.user_id, s.search_id
        FROM candidates c JOIN posted p USING (item_id),
             LATERAL (SELECT * FROM saved_searches WHERE search_id = c.search_id OFFSET 0) s
        WHERE s.user_id <> p.owner_id
          AND s.created_at <= p.created_at
          AND (s.words IS NULL OR p.search @@ s.words)
          AND (s.kind IS NULL OR s.kind = p.kind)
          AND (s.category IS NULL OR s.category = p.category)
          AND (s.min_price IS NULL OR p.price_cents >= s.min_price)
          AND (s.max_price IS NULL OR p.price_cents <= s.max_price)
          AND (s.country IS NULL OR s.country = p.country)
          AND (s.radius_chord IS NULL OR (p.earth <-> s.near_earth) <= s.radius_chord)
          AND (s.min_lat IS NULL OR (p.lat BETWEEN s.min_lat AND s.max_lat
               AND CASE WHEN s.min_lng <= s.max_lng THEN p.lng BETWEEN s.min_lng AND s.max_lng
                        ELSE p.lng >= s.min_lng OR p.lng <= s.max_lng END))
          AND (s.from_day IS NULL OR (p.kind = 'rental'
               AND coalesce(p.window_from <= s.from_day, true) AND coalesce(p.window_until >= s.until_day, true)))
        ORDER BY c.item_id, s.user_id, s.created_at, s.search_id
        """
    }
}
