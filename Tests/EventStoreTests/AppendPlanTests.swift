import EventStore
import Foundation
import Postgres
import Testing
import TestSupport

@Suite("The append's plans as the log grows")
struct AppendPlanTests {
    /// A session keeps its plans, and may settle on a generic one: made after `streams` was
    /// analyzed at a page or two, for `stream_id = ANY(names)` it scans the whole table. In one
    /// bench run out of three, the flusher's session went on scanning `streams` at every batch
    /// as it grew to 24,000 rows: half the commands' throughput. `append_batch` now plans with
    /// each batch's values (migration 0026). The database's sessions are set here to the worst
    /// case, a generic plan always; without 0026 this reads 430,000 rows. A later
    /// `CREATE OR REPLACE FUNCTION append_batch` drops the function's settings: it must set
    /// `plan_cache_mode` again, and this test says so if it does not.
    @Test func aLogThatGrewIsStillLookedUpByIndex() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await withSuperuser(on: configuration) { admin in
                try await admin.query("ALTER DATABASE \(unsafeRaw: "\"" + configuration.database.replacingOccurrences(of: "\"", with: "\"\"") + "\"") SET plan_cache_mode = force_generic_plan")
                // No analysis but the test's own: the next would have the plans made anew.
                try await admin.query("ALTER TABLE streams SET (autovacuum_enabled = off)")
            }
            try await TestDatabase.withPool(configuration, size: 1, acquireTimeout: .seconds(60)) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger)
                // A new log, analyzed at 150 streams as autovacuum would, and appended to again.
                for chunk in 0..<5 { try await store.append(streams("new", chunk, 30)) }
                try await withSuperuser(on: configuration) { try await $0.query("ANALYZE streams") }
                try await store.append(streams("analyzed", 0, 30))
                // Grown to 20,000 streams, 500 at a time.
                for chunk in 0..<40 { try await store.append(streams("grown", chunk, 500)) }
                let before = try await streamsReadBySequentialScans(store, configuration)
                for chunk in 0..<20 { try await store.append(streams("late", chunk, 30)) }
                let after = try await streamsReadBySequentialScans(store, configuration)
                // The session's counts did arrive: every stream so far, the two appends that sent them too.
                #expect(after.inserted >= 150 + 30 + 20_000 + 600 + 2, "streams counted as inserted: \(after.inserted)")
                let read = after.read - before.read
                // A scan of the table would be 20,000 rows an append.
                #expect(read < 20_000, "\(read) rows of streams read by sequential scans in 21 appends")
            }
        }
    }

    func streams(_ kind: String, _ chunk: Int, _ count: Int) -> [StreamAppend] {
        (0..<count).map { StreamAppend(StreamID(kind, chunk * count + $0), expectedVersion: .noStream, events: [event()]) }
    }

    /// Rows of `streams` read by sequential scans so far, and inserted. A session sends its
    /// counts at most once a second, after a transaction: wait that out, then append once
    /// more to send them.
    func streamsReadBySequentialScans(_ store: EventStore, _ configuration: PostgresConfiguration) async throws
        -> (read: Int64, inserted: Int64)
    {
        try await Task.sleep(for: .milliseconds(1100))
        try await store.append(to: StreamID("flush", UUID()), expectedVersion: .noStream, events: [event()])
        return try await withSuperuser(on: configuration) { pool in
            // A new session each time: no statistics snapshot kept from before.
            let row = try await pool.query("SELECT seq_tup_read, n_tup_ins FROM pg_stat_user_tables WHERE relname = 'streams'")[0]
            return (try row.decode("seq_tup_read"), try row.decode("n_tup_ins"))
        }
    }
}
