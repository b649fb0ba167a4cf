import Postgres

/// The words the listings have used (`search_words`, migration 0039): what a misspelt word of
/// a search is corrected to. Not a view of the log (a rebuild leaves it be) but a cache of the
/// views, learned from the items' and loans' rows written since the last time; words of
/// letters (numbers are taken as typed).
public struct SearchWords: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

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
                -- Numbers are not spelled: "12345" is no typo of "12346".
                WHERE word !~ '^[0-9]+$'
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
}
