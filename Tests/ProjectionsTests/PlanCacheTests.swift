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

    /// A row of the listing `everyPageSizeReadsThroughAFewStatements` pages through.
    struct Listed: Encodable, Sendable {
        var at: Date
        var id: UUID
    }

    /// Every page size a client may ask for (1–100) reads through one of four statements,
    /// each page holding what was asked for and a cursor exactly when there is more: a size
    /// each would have filled a connection's prepared statements (256) with a list's alone.
    @Test func everyPageSizeReadsThroughAFewStatements() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE listed (id uuid PRIMARY KEY, category text, created_at timestamptz)")
                try await pool.query(
                    "INSERT INTO listed SELECT gen_random_uuid(), 'c', now() - n * interval '1 minute' FROM generate_series(1, 60) n")
                for limit in 1...100 {
                    var listing = MapListing()
                    listing.limit = limit
                    let statement = listing.statement(select: "id, created_at", from: "listed", id: "id", where: [])
                    let rows = try await pool.query(statement, prepared: true)
                    let page = try listing.page(rows, at: { $0.at }, id: { $0.id }) { row in
                        Listed(at: try row.decode("created_at", as: Date.self), id: try row.decode("id", as: UUID.self))
                    }
                    #expect(page.data.count == min(limit, 60), "limit \(limit)")
                    #expect((page.nextCursor != nil) == (limit < 60), "limit \(limit)")
                }
                let prepared = try await pool.query("SELECT count(*)::int FROM pg_prepared_statements WHERE statement LIKE '%FROM listed%'")
                    .single().decode(0, as: Int.self)
                #expect(prepared == PageSize.steps.count)
            }
        }
    }

    /// `GET /v1/me`'s eight statements are planned once each for any user, from the first
    /// request, and each list in its index's order: where most users have a few posts, a
    /// generic plan left to itself sorts what a bitmap scan finds, every post of one who has
    /// hundreds.
    /// The settings that ask for it end with the snapshot.
    @Test func theProfileIsPlannedOnceForAnyUserInItsIndexesOrder() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let heavy = UserID()
                try await pool.query(
                    """
                    INSERT INTO users_view (user_id, handle, display_name, email, member_since, updated_at)
                    VALUES (\(heavy.rawValue), 'heavy', 'Heavy', 'heavy@example.org', now(), now())
                    """)
                // 750 users with four posts each, and one with 300.
                try await pool.query(
                    """
                    INSERT INTO items_view (item_id, kind, owner_id, owner_handle, title, description, category, lat, lng, place,
                                            status, created_at, updated_at, position)
                    SELECT gen_random_uuid(), 'rental',
                           CASE WHEN n <= 300 THEN \(heavy.rawValue) ELSE ('00000000-0000-0000-0000-' || lpad((n / 4)::text, 12, '0'))::uuid END,
                           'someone', 'Post ' || n, '', 'tools', 27.7, 85.3, 'Kathmandu', 'available',
                           now() - n * interval '1 minute', now(), n
                    FROM generate_series(1, 3300) n
                    """)
                try await pool.query("ANALYZE items_view")
                let before = try await pool.query("SELECT current_setting('enable_sort') AS sort").single()
                let profiles = ProfilesView(pool)
                for _ in 0..<3 {
                    let profile = try await profiles.privateProfile(heavy, blocked: [])
                    #expect(profile.handle == "heavy")
                    #expect(profile.posts.map(\.title) == (1...20).map { "Post \($0)" })
                    #expect(profile.links.posts != nil)
                    #expect(profile.bids.isEmpty && profile.loans.isEmpty && profile.cards.isEmpty)
                }
                let plans = try await Self.plans(pool, like: "%")
                #expect(plans.generic == 3 * 8)
                #expect(plans.custom == 0)
                // The posts' kept plan, for the user with 300: in the index's order, no sort.
                let name = try await pool.query(
                    "SELECT name FROM pg_prepared_statements WHERE statement LIKE '%FROM items_view WHERE owner_id%'"
                ).single().decode("name", as: String.self)
                // Explained in a snapshot of the profile's kind: a kept plan can be dropped at any
                // time (a busy suite once had it planned anew, outside the snapshot, with a sort),
                // and is then made again under the snapshot's settings.
                let plan = try await pool.snapshot(
                    [PostgresQuery(unsafeSQL: "EXPLAIN EXECUTE \(name)('\(heavy.rawValue.uuidString.lowercased())')")],
                    prepared: true, genericIndexPlans: true
                )[0].map { try $0.decode("QUERY PLAN", as: String.self) }
                #expect(!plan.joined(separator: "\n").contains("Sort"), "\(plan)")
                let after = try await pool.query(
                    "SELECT current_setting('plan_cache_mode') AS mode, current_setting('enable_sort') AS sort"
                ).single()
                #expect(try after.decode("mode", as: String.self) == "auto")
                #expect(try after.decode("sort", as: String.self) == before.decode("sort", as: String.self))
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
                listing.sort = .distance
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

    /// An item's bids (as its owner reads them), a bid's messages, reviews and a user's feed
    /// are prepared, one statement for each set of filters (no `IS NULL OR`), and keep their
    /// plans; so is a bid decision's lookup of its item.
    @Test func theListsOfConversationsAndBidsArePreparedOnce() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let items = ItemsView(pool), conversations = ConversationsView(pool)
                let cursor = Cursor(at: Date(), id: UUID())
                for _ in 0..<7 {
                    #expect(try await items.bids(on: ItemID(), onlyBy: nil, limit: 20, after: nil).data.isEmpty)
                    #expect(try await items.bids(on: ItemID(), onlyBy: nil, limit: 20, after: cursor).data.isEmpty)
                    #expect(try await conversations.messages(onBid: BidID(), limit: 20, before: 9).data.isEmpty)
                    #expect(try await conversations.reviews(ofItem: ItemID(), limit: 20, after: cursor).data.isEmpty)
                    #expect(try await conversations.feed(of: UserID(), after: 0, limit: 20).data.isEmpty)
                    await #expect(throws: DomainError.self) { try await items.item(ofBid: BidID()) }
                }
                let statements = try await pool.query(
                    "SELECT statement FROM pg_prepared_statements WHERE statement ~ 'bids_view|messages_view|feed_view|reviews_view'"
                ).map { try $0.decode("statement", as: String.self) }
                #expect(statements.count == 6, "\(statements)")
                #expect(!statements.contains { $0.contains("IS NULL OR") }, "\(statements)")
                for pattern in [
                    "%price ON true WHERE item_id%", "%m.bid_id =%", "%FROM feed_view%", "SELECT item_id FROM bids_view%", "%r.item_id =%",
                ] {
                    let plans = try await Self.plans(pool, like: pattern)
                    #expect(plans.generic >= 1, "\(pattern): planned once for the runs after the fifth")
                }
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
