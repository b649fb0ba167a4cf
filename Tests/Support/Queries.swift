import Postgres

/// The one number a `SELECT count(*) ...` answers.
public func count(_ admin: PostgresPool, _ sql: PostgresQuery) async throws -> Int {
    try await admin.query(sql).single().decode(0, as: Int.self)
}
