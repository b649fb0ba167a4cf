import Foundation
import Marketplace
import Postgres
import Testing
import TestSupport

@testable import Projections

/// The reads every request makes run prepared, and should be planned once, not at every run.
/// PostgreSQL plans a prepared statement anew each time while a custom plan's estimate looks
/// cheaper than the generic one's: always, for a `LIMIT $n` (a generic plan takes it for a
/// tenth of the rows), and for a value outside a column's most common ones (estimated at one
/// row). Each counts its plans in `pg_prepared_statements`, on the pool's one connection.
@Suite("Reads planned once")
struct PlanCacheTests {
    static func plans(_ pool: PostgresPool, like pattern: String) async throws -> (generic: Int, custom: Int) {
        let row = try await pool.query(
            """
            SELECT coalesce(sum(generic_plans), 0)::int AS generic, coalesce(sum(custom_plans), 0)::int AS custom
            FROM pg_prepared_statements WHERE statement LIKE \(pattern)
            """
        ).single()
        return (try row.decode("generic"), try row.decode("custom"))
    }

    /// A page's `LIMIT` is written into its statement, so that its generic plan is priced for
    /// the page, and kept after the first runs (five, then PostgreSQL compares).
    @Test func aPageOfTheMarketKeepsOnePlan() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE listed (id uuid PRIMARY KEY, category text, created_at timestamptz)")
                try await pool.query(
                    """
                    INSERT INTO listed SELECT gen_random_uuid(), 'c' || (n % 5), now() - n * interval '1 minute'
                    FROM generate_series(1, 5000) n
                    """)
                try await pool.query("CREATE INDEX ON listed (created_at DESC, id DESC)")
                try await pool.query("ANALYZE listed")
                var listing = MapListing()
                listing.limit = 20
                for run in 0..<8 {
                    let statement = listing.statement(
                        select: "id, category, created_at", from: "listed", id: "id", where: ["category = \("c\(run % 5)")"])
                    let rows = try await pool.query(statement, prepared: true)
                    #expect(rows.count == 21)
                }
                let plans = try await Self.plans(pool, like: "%FROM listed%")
                #expect(plans.generic == 3, "planned once for the runs after the fifth")
                #expect(plans.custom == 5)
            }
        }
    }

    /// `GET /v1/me`'s eight statements are planned once each for any user, from the first
    /// request; the setting that asks for it ends with the snapshot.
    @Test func theProfileIsPlannedOnceForAnyUser() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let profiles = ProfilesView(pool)
                for _ in 0..<3 {
                    // No such user: every statement still ran, before the answer was read.
                    let error = try await #require(throws: DomainError.self) {
                        try await profiles.privateProfile(UserID(), blocked: [])
                    }
                    #expect(error == .userNotFound)
                }
                let plans = try await Self.plans(pool, like: "%")
                #expect(plans.generic == 3 * 8)
                #expect(plans.custom == 0)
                let mode = try await pool.query("SELECT current_setting('plan_cache_mode') AS mode").single()
                #expect(try mode.decode("mode", as: String.self) == "auto")
            }
        }
    }

    /// The nearest page's point and box are parameters of type `cube`, read once when bound:
    /// sent as text, the generic plan cast them again for every row it looked at.
    @Test func aNearestPageReadsItsPointAndBoxOnce() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                var listing = MapListing()
                listing.near = (27.7172, 85.3240)
                listing.radiusKm = 25
                listing.byDistance = true
                let statement = listing.statement(
                    select: ItemResource.columns, from: "items_view", id: "item_id", where: ["status = 'available'"])
                #expect(try await pool.query(statement, prepared: true).isEmpty)
                let types = try await pool.query(
                    "SELECT parameter_types::text[] AS types FROM pg_prepared_statements WHERE statement LIKE '%earth <->%'"
                ).single().decode("types", as: [String].self)
                #expect(types.filter { $0 == "cube" }.count == 5, "\(types)")  // four points and the box
                #expect(!types.contains("text"), "\(types)")
            }
        }
    }

    /// The cart every cart command answers with is prepared, and keeps its plan.
    @Test func theCartIsPreparedOnce() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let carts = CartView(pool)
                for _ in 0..<7 { #expect(try await carts.cart(of: UserID()).lines.isEmpty) }
                let plans = try await Self.plans(pool, like: "%still_needed%")
                #expect(plans.generic + plans.custom == 7)
                #expect(plans.generic >= 1, "planned once for the runs after the fifth")
            }
        }
    }
}
