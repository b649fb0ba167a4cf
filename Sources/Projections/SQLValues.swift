import Marketplace
import Postgres

extension Day {
    /// The day as a typed `date` parameter (`PostgresDate`): read once, not cast on every row
    /// a condition on it filters.
    public var sql: PostgresDate { PostgresDate(description) }
}
