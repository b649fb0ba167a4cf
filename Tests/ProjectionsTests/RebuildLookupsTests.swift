import EventStore
import Postgres
import Testing
import TestSupport

@testable import Projections

/// A rebuild's tables have only their keys (but the feed's, in a build from the first event:
/// `keysAfterRows`) and the columns of `ViewRebuilder.lookups` indexed until its end; the
/// rest wait (`createSchema`). That list is kept by hand: a projection that came to find rows
/// by another column would make every batch of a rebuild scan its table, never wrong and so
/// never caught, only slow on a large log. Here every kind of event is applied with
/// sequential scans priced out (`enable_seqscan = off`): the planner then scans only a table
/// that has no index for the statement, and the transaction's own counts say which. Not
/// caught: a table with some index, which the planner then reads whole for a column it does
/// not lead with (the bids by key, without their key, through the index by bidder: a second
/// release's reservations made a 200,000-event build 5.5 times slower).
@Suite("A rebuild's lookups")
struct RebuildLookupsTests {
    @Test func aRebuildAndACatchUpFindEveryRowByAnIndex() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger)
                let events = try await InterleavedHistory().append(to: store)
                let rebuilder = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: TestDatabase.logger)
                try await rebuilder.createSchema("fresh")
                try await rebuilder.createSchema("caught_up")
                let projections = rebuilder.projections
                let scanned = try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        try session.withTransaction { session -> [String] in
                            _ = try session.query("SET LOCAL enable_seqscan = off")
                            // The session's counts not yet reported (making a table's indexes
                            // counts as scanning it) are the baseline.
                            func scans(_ session: inout PostgresSession) throws -> [String: Int] {
                                let rows = try session.query(
                                    """
                                    SELECT schemaname || '.' || relname AS t, seq_scan AS n FROM pg_stat_xact_user_tables
                                    WHERE schemaname IN ('fresh', 'caught_up')
                                    """)
                                return Dictionary(uniqueKeysWithValues: try rows.map { (try $0.decode("t", as: String.self), try $0.decode("n", as: Int.self)) })
                            }
                            let before = try scans(&session)
                            let all = try ViewRebuilder.readBatch(&session, nil, after: 0, until: .max, limit: .max)
                            #expect(all.count == events)
                            // A build from the first event (`rebuild`), in halves, so the second
                            // half finds the first's rows; then the appends' way (`apply`).
                            let memory = RebuildMemory()
                            try ViewRebuilder.dropKeysAfterRows(&session, "fresh", rebuilder.tables)
                            for half in [all.prefix(events / 2), all.dropFirst(events / 2)] {
                                try ViewRebuilder.inSchema("fresh", &session) { session in
                                    for projection in projections { try projection.rebuild(Array(half), &session, memory) }
                                }
                                try ViewRebuilder.apply(Array(half), &session, "caught_up", projections)
                            }
                            let scanned = try scans(&session).filter { $0.value > before[$0.key, default: 0] }
                                .map { "\($0.key) \($0.value - before[$0.key, default: 0])" }.sorted()
                            // The build's end (its cells made from a scan of the items, its
                            // undecided bids written), not counted.
                            try ViewRebuilder.inSchema("fresh", &session) { session in
                                for projection in projections { try projection.finishRebuild(&session, memory) }
                            }
                            return scanned
                        }
                    }
                }
                #expect(scanned == [], "tables scanned for want of an index (add the column to ViewRebuilder.lookups)")
                let built = try await pool.query("SELECT count(*)::int AS n FROM fresh.bids_view").single()
                #expect(try built.decode("n", as: Int.self) == 30, "the bids were written, the undecided ones at the end")
                // The build's items, held until its end, all written then.
                let items = try await pool.query(
                    "SELECT (SELECT count(*) FROM fresh.items_view)::int AS fresh, (SELECT count(*) FROM caught_up.items_view)::int AS caught_up"
                ).single()
                #expect(try items.decode("fresh", as: Int.self) == items.decode("caught_up", as: Int.self))
                // The appends' way moved the cells by its own moves alone, not by anything the
                // build did before it in the same transaction: each level holds each available
                // item once.
                let available = try await pool.query(
                    "SELECT count(*)::int AS n FROM caught_up.items_view WHERE status = 'available'"
                ).single().decode("n", as: Int.self)
                let levels = try await pool.query(
                    "SELECT sum(count)::int AS n FROM caught_up.market_cells GROUP BY level ORDER BY level"
                ).map { try $0.decode("n", as: Int.self) }
                #expect(available > 0)
                #expect(levels == Array(repeating: available, count: 7))
            }
        }
    }
}
