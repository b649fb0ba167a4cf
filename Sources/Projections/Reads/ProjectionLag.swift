import Postgres

/// How far each projection's checkpoint is behind the log head.
public struct ProjectionLag: Sendable {
    public var projection: String
    public var head: Int64
    /// In events: 0 for the inline views once their append commits.
    public var behind: Int64

    public static func read(from pool: PostgresPool) async throws -> [ProjectionLag] {
        try await pool.query(
            """
            SELECT c.name, h.position AS head, h.position - c.position AS lag
            FROM projection_checkpoints c CROSS JOIN log_head h
            """
        ).map { row in
            ProjectionLag(projection: try row.decode("name"), head: try row.decode("head"), behind: try row.decode("lag"))
        }
    }
}
