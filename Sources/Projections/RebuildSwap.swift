import Aggregates
import EventStore
import Foundation
import Logging
import Postgres
import Synchronization

extension ViewRebuilder {
    /// Swaps the rebuilt tables in for the live ones, with appends blocked only for a short
    /// final step: `schema` is caught up outside any lock until it trails the log by at most
    /// `closeEnough` events; then, under the log head's lock, the last few events are applied,
    /// the live tables locked (waiting at most `lockWait` for readers; else everything is
    /// rolled back, appends go on for `pause`, and it is caught up and tried again, for up to
    /// `patience` in all), moved out, and the rebuilt ones moved in,
    /// in one transaction. Readers wait for the moment of the swap and never see a half-built
    /// view; appends wait and then write to the new tables. Returns the position the views
    /// stand at.
    public func swapIn(
        _ schema: String, builtTo position: Int64, closeEnough: Int64 = 500, lockWait: Duration = .milliseconds(100),
        pause: Duration = .milliseconds(250), patience: Duration = .seconds(120)
    ) async throws -> Int64 {
        let tables = tables
        let projections = projections
        let retired = "\(schema)_retired"
        var built = position
        var attempt = 0
        let clock = ContinuousClock()
        let started = clock.now
        while true {
            attempt += 1
            built = try await catchUp(schema, from: built, closeEnough: closeEnough)
            let from = built
            let lockTimeout = "\(Int(lockWait / .milliseconds(1)))ms"
            let swapped: Int64
            do {
                swapped = try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        try session.withTransaction { session -> Int64 in
                            _ = try session.query("SELECT set_config('lock_timeout', \(lockTimeout), true)")
                            let head = try session.query("SELECT position FROM log_head FOR UPDATE").single()
                                .decode("position", as: Int64.self)
                            // A burst since the catch-up: let it go and catch up again, rather
                            // than apply it while every append waits.
                            guard head - from <= 2 * closeEnough else { throw SwapDeferred() }
                            var done = from
                            while done < head {
                                done = try Self.applyBatch(&session, schema, projections, personalData, after: done, until: head, limit: 50_000)
                            }
                            _ = try session.query(
                                "LOCK TABLE \(unsafeRaw: tables.map { "public.\($0)" }.joined(separator: ", ")) IN ACCESS EXCLUSIVE MODE")
                            _ = try session.query("CREATE SCHEMA \(unsafeRaw: retired)")
                            for table in tables {
                                _ = try session.query("ALTER TABLE public.\(unsafeRaw: table) SET SCHEMA \(unsafeRaw: retired)")
                                _ = try session.query("ALTER TABLE \(unsafeRaw: schema).\(unsafeRaw: table) SET SCHEMA public")
                            }
                            try EventStore.checkpoint(projections, at: head, in: &session)
                            return head
                        }
                    }
                }
            } catch let error where (error as? PostgresError)?.sqlState == "55P03" || error is SwapDeferred {
                // lock_not_available: a reader held a live view (or an append the head) longer
                // than `lockWait`; or the log ran ahead. All rolled back, appends go on; catch
                // up and try again.
                guard clock.now - started < patience else { throw RebuildError.swapBlocked(attempts: attempt) }
                logger.info("the live views were busy; trying the swap again", metadata: ["attempt": "\(attempt)"])
                try await Task.sleep(for: pause)
                continue
            }
            _ = try await pool.query("DROP SCHEMA \(unsafeRaw: retired) CASCADE")
            _ = try await pool.query("DROP SCHEMA \(unsafeRaw: schema) CASCADE")
            return swapped
        }
    }

    private struct SwapDeferred: Error {}

    /// Builds `schema` on, outside any lock, until it trails the head by at most `closeEnough`
    /// events (or stops gaining on it); returns the position it reached.
    func catchUp(_ schema: String, from position: Int64, closeEnough: Int64) async throws -> Int64 {
        var built = position
        var gap = Int64.max
        while true {
            built = try await build(schema, after: built)
            let head = try await pool.query("SELECT position FROM log_head").single().decode("position", as: Int64.self)
            let behind = head - built
            if behind <= closeEnough || behind >= gap { return built }
            gap = behind
        }
    }

    /// Catches `schema` up and compares it, row by row, with the live views, all in one
    /// snapshot: the live views stand at the snapshot's head (inline projections commit with
    /// the events), and `schema` is caught up to that same head. No lock is held on the log,
    /// so appends go on meanwhile. Nothing live is changed.
    public func compare(_ schema: String, builtTo position: Int64) async throws -> (position: Int64, differences: [ViewDifference]) {
        let tables = tables
        let projections = projections
        let built = try await catchUp(schema, from: position, closeEnough: 0)
        return try await pool.withConnection { connection in
            try await connection.withBlockingSession { session in
                try session.withTransaction(.snapshot) { session -> (Int64, [ViewDifference]) in
                    let head = try session.query("SELECT position FROM log_head").single().decode("position", as: Int64.self)
                    var done = built
                    while done < head {
                        done = try Self.applyBatch(&session, schema, projections, personalData, after: done, until: head, limit: 50_000)
                    }
                    var differences = [ViewDifference]()
                    for table in tables {
                        let keys = try session.query(
                            """
                            SELECT a.attname AS name FROM pg_index i
                            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                            WHERE i.indrelid = \("public.\(table)")::regclass AND i.indisprimary ORDER BY a.attnum
                            """
                        ).map { try $0.decode("name", as: String.self) }
                        let key = "jsonb_build_object(" + keys.map { "'\($0)', t.\($0)" }.joined(separator: ", ") + ")"
                        let rows = try session.query(
                            """
                            SELECT coalesce(l.k, r.k)::text AS key, l.v::text AS live, r.v::text AS rebuilt
                            FROM (SELECT \(unsafeRaw: key) AS k, to_jsonb(t) AS v FROM public.\(unsafeRaw: table) t) l
                            FULL JOIN (SELECT \(unsafeRaw: key) AS k, to_jsonb(t) AS v FROM \(unsafeRaw: schema).\(unsafeRaw: table) t) r
                                ON l.k = r.k
                            WHERE l.v IS DISTINCT FROM r.v
                            ORDER BY 1
                            """)
                        for row in rows {
                            differences.append(
                                ViewDifference(
                                    table: table, key: try row.decode("key"), live: try row.decode("live", as: String?.self),
                                    rebuilt: try row.decode("rebuilt", as: String?.self)))
                        }
                    }
                    return (head, differences)
                }
            }
        }
    }
}
