import Postgres

/// The words the listings have used (`search_words`, migration 0039): what a misspelt word of
/// a search is corrected to. Not a view of the log (a rebuild leaves it be) but a cache of the
/// views, learned from the items' and loans' rows written since the last time; words of
/// letters (numbers are taken as typed).
public struct SearchWords: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    /// The words worth learning: not numbers ("12345" is no typo of "12346"), and at most
    /// 64 letters (a typo's search compares at most 255, migration 0043).
    static func learnable(_ column: String) -> String { "\(column) !~ '^[0-9]+$' AND length(\(column)) <= 64" }

    /// The words of the items `items` (new postings, found by `SearchAlerts`): learned at
    /// once, rather than at the jobs' next run, so that a word just posted is spelled out.
    public static func learn(items: [String], on connection: PostgresConnection) async throws {
        try await connection.query(
            """
            INSERT INTO search_words (word)
            SELECT DISTINCT word FROM items_view, unnest(tsvector_to_array(search)) AS word
            WHERE item_id = ANY (\(items)::uuid[]) AND \(unsafeRaw: learnable("word"))
            ON CONFLICT DO NOTHING
            """)
    }

    /// Adds the words of every row written since the position last read; returns how many
    /// were new. One statement, one snapshot: rows commit in the log's order, so none written
    /// at or before the position it moves to can appear after.
    @discardableResult
    public func learn() async throws -> Int {
        try await pool.query(
            """
            WITH since AS (SELECT position FROM search_words_learned),
            rows AS (
                SELECT search, position FROM items_view WHERE position > (SELECT position FROM since)
                UNION ALL
                SELECT search, position FROM loans_view WHERE position > (SELECT position FROM since)
            ),
            learned AS (
                INSERT INTO search_words (word)
                SELECT DISTINCT word FROM rows, unnest(tsvector_to_array(search)) AS word
                WHERE \(unsafeRaw: Self.learnable("word"))
                ON CONFLICT DO NOTHING
                RETURNING 1
            ),
            moved AS (
                UPDATE search_words_learned SET position = greatest(position, (SELECT max(position) FROM rows))
                WHERE EXISTS (SELECT FROM rows)
            )
            SELECT count(*)::int AS n FROM learned
            """
        ).single().decode("n", as: Int.self)
    }

    /// Forgets the words no item or loan shows any more: a forgotten poster's texts read
    /// `[removed]`, and their words (a name, a street) must not outlive them here. One pass
    /// over the views' words (`ts_stat`); the jobs run it once an hour. A word learned by a
    /// posting committed during the pass may go too: it is then matched as a prefix, not
    /// spelled out, until it is posted again.
    @discardableResult
    public func prune() async throws -> Int {
        try await pool.query(
            """
            WITH used AS MATERIALIZED (
                SELECT word FROM ts_stat('SELECT search FROM items_view')
                UNION SELECT word FROM ts_stat('SELECT search FROM loans_view')
            ),
            gone AS (DELETE FROM search_words WHERE word NOT IN (SELECT word FROM used) RETURNING 1)
            SELECT count(*)::int AS n FROM gone
            """
        ).single().decode("n", as: Int.self)
    }
}
