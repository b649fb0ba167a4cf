import Postgres

/// The log's head as one database holds it: on a replica, how far it has replayed. The read
/// placement asks it of the replica and the primary; its lag, of the primary.
public enum LogHead {
    /// The position of the last event appended (or replayed), 0 when the log is empty.
    /// Prepared: asked once per read that must see a position the replica was not known to have.
    public static func read(from pool: PostgresPool) async throws -> Int64 {
        try await pool.query("SELECT position FROM log_head", prepared: true).single().decode(0, as: Int64.self)
    }

    /// The head, and how many seconds ago the event after `position` was appended: how long a
    /// replica at `position` has been behind (0 when there is no such event).
    public static func read(from pool: PostgresPool, after position: Int64) async throws -> (head: Int64, secondsBehind: Double) {
        let row = try await pool.query(
            """
            SELECT h.position, coalesce(
                (SELECT extract(epoch FROM clock_timestamp() - e.recorded_at) FROM events e WHERE e.position = \(position) + 1),
                0)::float8
            FROM log_head h
            """
        ).single()
        return (try row.decode(0, as: Int64.self), try row.decode(1, as: Double.self))
    }
}
