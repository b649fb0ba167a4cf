import EventStore
import Foundation
import Marketplace
import Postgres
import Projections
import Testing
import TestSupport

/// A database the second release wrote (SPEC §12.1): its rentals reserved and closed whole.
/// Migration 0028 turns its views into this release's, and a rebuild from the log finds
/// nothing to change.
@Suite("Upgrading a second release's database")
struct UpgradeTests {
    @Test func aSecondReleasesViewsMigrateToWhatARebuildMakes() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 3) { pool in
                // A log of the second release's shape (rentals reserved, closed and relisted), its
                // views written as the appends write them.
                let store = EventStore(pool: pool, logger: TestDatabase.logger, projections: lenderProjections)
                _ = try await InterleavedHistory(bookingsByDate: false).append(to: store)
                #expect(try await count(pool, "SELECT count(*) FROM events WHERE type = 'ItemReserved'") > 0)
                let rebuilder = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: TestDatabase.logger)
                let bookings = try await count(pool, "SELECT count(*) FROM bookings_view")
                #expect(bookings > 0)

                // The views as the second release left them: each rental as its last
                // reservation, closing or relisting left it, the market's cells counting only
                // what was available then, and none of this release's tables and columns.
                let reservedOrClosed = try await pool.query(
                    """
                    UPDATE items_view i
                    SET status = CASE e.type WHEN 'ItemReserved' THEN 'reserved' WHEN 'ItemClosed' THEN 'closed' ELSE i.status END
                    FROM (
                        SELECT DISTINCT ON (stream_id) stream_id, type FROM events
                        WHERE type IN ('ItemReserved', 'ItemClosed', 'ItemRelisted', 'ItemWithdrawn')
                        ORDER BY stream_id, position DESC
                    ) e
                    WHERE e.stream_id = 'item-' || i.item_id AND i.kind = 'rental' AND i.status = 'available'
                      AND e.type IN ('ItemReserved', 'ItemClosed')
                    RETURNING i.item_id
                    """)
                #expect(!reservedOrClosed.isEmpty, "the history holds rentals the second release showed as taken")
                for statement: PostgresQuery in [
                    "TRUNCATE market_cells",
                    """
                    INSERT INTO market_cells (level, cell_x, cell_y, count, sum_lat, sum_lng, sample)
                    SELECT l, mercator_x(i.lng) >> (24 - l), mercator_y(i.lat) >> (24 - l), count(*),
                           sum(round(i.lat * 1e7)::bigint), sum(round(i.lng * 1e7)::bigint), (array_agg(i.item_id ORDER BY i.item_id))[1]
                    FROM items_view i, unnest('{4,6,8,10,12,14,16}'::smallint[]) AS l
                    WHERE i.status = 'available'
                    GROUP BY 1, 2, 3
                    """,
                    "DROP TABLE bookings_view, blackouts_view",
                    "DROP INDEX bids_view_pending, items_view_window_end",
                    "ALTER TABLE reviews_view DROP COLUMN published",
                    "DELETE FROM schema_migrations WHERE version = 28",
                ] {
                    try await pool.query(statement)
                }

                // Upgraded in place, then held to a rebuild from the log.
                let migrator = try Migrator(directory: TestDatabase.migrationsDirectory, logger: TestDatabase.logger)
                let applied = try await pool.withConnection { connection in try await migrator.migrate(on: connection) }
                #expect(applied.map(\.version) == [28])
                // And what later migrations did to the table 0028 made, as they did it then.
                for file in try FileManager.default.contentsOfDirectory(atPath: TestDatabase.migrationsDirectory).sorted()
                where file.hasSuffix(".sql") && (Int(file.prefix(4)) ?? 0) > 28 {
                    let text = try String(contentsOfFile: TestDatabase.migrationsDirectory + "/" + file, encoding: .utf8)
                    let statements = text.split(separator: "\n").filter { !$0.hasPrefix("--") }.joined(separator: "\n")
                        .components(separatedBy: ";")
                    for statement in statements where statement.contains("ON bookings_view") || statement.contains("TABLE bookings_view") {
                        try await pool.query(PostgresQuery(unsafeSQL: statement))
                    }
                }
                #expect(try await count(pool, "SELECT count(*) FROM bookings_view") == bookings)
                #expect(try await count(pool, "SELECT count(*) FROM items_view WHERE kind = 'rental' AND status IN ('reserved', 'closed')") == 0)
                try await rebuilder.createSchema("rebuilt")
                let checked = try await rebuilder.build("rebuilt", after: 0)
                let (_, differences) = try await rebuilder.compare("rebuilt", builtTo: checked)
                #expect(differences.isEmpty, "\(differences.prefix(5))")
                try await rebuilder.dropSchema("rebuilt")
            }
        }
    }
}
