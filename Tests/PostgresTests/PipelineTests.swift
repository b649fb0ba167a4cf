import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Pipelined statements")
struct PipelineTests {
    @Test func manyWritesArriveInOrderAcrossSyncsAndTheConnectionIsNormalAfter() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE t (n integer PRIMARY KEY, total bigint)")
                try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        try session.withTransaction { session in
                            try session.pipelined { session in
                                // More than one pipeline's depth, prepared and not, each depending on the last.
                                for n in 1...1234 {
                                    try session.query(
                                        "INSERT INTO t VALUES (\(n), coalesce((SELECT total FROM t WHERE n = \(n - 1)), 0) + \(n))",
                                        prepared: n % 2 == 0)
                                }
                            }
                        }
                        #expect(try session.query("SELECT 41 + 1 AS x").single().decode("x", as: Int.self) == 42)
                    }
                }
                let total = try await pool.query("SELECT total FROM t WHERE n = 1234").single().decode("total", as: Int.self)
                #expect(total == 1234 * 1235 / 2)
            }
        }
    }

    @Test func anErrorIsThrownAndItsTransactionWritesNothing() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE t (n integer PRIMARY KEY)")
                let error = try await #require(throws: PostgresError.self) {
                    try await pool.withConnection { connection in
                        try await connection.withBlockingSession { session in
                            try session.withTransaction { session in
                                try session.pipelined { session in
                                    for n in [1, 2, 2, 3] { try session.query("INSERT INTO t VALUES (\(n))", prepared: true) }
                                }
                            }
                        }
                    }
                }
                #expect(error.sqlState == "23505")
                #expect(try await pool.query("SELECT count(*) AS c FROM t").single().decode("c", as: Int.self) == 0)
                // The connection still works, prepared statements included.
                try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        try session.query("INSERT INTO t VALUES (\(7))", prepared: true)
                    }
                }
                #expect(try await pool.query("SELECT count(*) AS c FROM t").single().decode("c", as: Int.self) == 1)
            }
        }
    }
}

@Suite("Prepared statements in a failed pipeline")
struct PipelinePrepareTests {
    /// A prepare that an earlier error in the pipeline skipped never happened: the next use
    /// prepares it again rather than executing a statement the server does not have.
    @Test func aPrepareSkippedByAnErrorIsPreparedAgainNextTime() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        let failed = #expect(throws: PostgresError.self) {
                            try session.pipelined { session in
                                try session.query("SELECT 1 / 0 AS boom")
                                try session.query("SELECT \(7) + 1 AS x", prepared: true)
                            }
                        }
                        #expect(failed?.sqlState == "22012")
                        try session.pipelined { session in try session.query("SELECT \(7) + 1 AS x", prepared: true) }
                        #expect(try session.query("SELECT \(7) + 1 AS x", prepared: true).single().decode("x", as: Int.self) == 8)
                    }
                }
            }
        }
    }

    /// Lists prepare a statement per set of filters; a connection that lives for days must not
    /// keep every one of them. Past the limit it forgets them all and prepares anew.
    @Test func aConnectionKeepsABoundedNumberOfStatementsPrepared() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let limit = PostgresSession.preparedLimit
                for shape in 0..<(limit + 40) {
                    let statement = PostgresQuery(unsafeSQL: "SELECT \(shape) + 1 AS x")
                    let rows = try await pool.query(statement, prepared: true)
                    #expect(try rows.single().decode("x", as: Int.self) == shape + 1)
                }
                let kept = try await pool.query("SELECT count(*) AS c FROM pg_prepared_statements").single().decode("c", as: Int.self)
                #expect(kept == 40)
                // A statement forgotten with the rest is prepared again when it comes back.
                #expect(try await pool.query("SELECT 0 + 1 AS x", prepared: true).single().decode("x", as: Int.self) == 1)
            }
        }
    }
}

@Suite("Snapshots: several reads, one round trip")
struct SnapshotTests {
    @Test func readsAnswerInOrderInOneReadOnlyRepeatableReadTransaction() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE t (n integer PRIMARY KEY)")
                try await pool.query("INSERT INTO t SELECT generate_series(1, 5)")
                let answers = try await pool.snapshot([
                    "SELECT n FROM t WHERE n <= \(2) ORDER BY n",
                    "SELECT current_setting('transaction_isolation') AS isolation, current_setting('transaction_read_only') AS ro",
                    "SELECT count(*) AS c FROM t WHERE n > \(3)",
                ])
                #expect(answers.count == 3)
                #expect(try answers[0].map { try $0.decode("n", as: Int.self) } == [1, 2])
                #expect(try answers[1].single().decode("isolation", as: String.self) == "repeatable read")
                #expect(try answers[1].single().decode("ro", as: String.self) == "on")
                #expect(try answers[2].single().decode("c", as: Int.self) == 2)
            }
        }
    }

    /// Prepared, the first run sends each statement's prepare in the pipeline: its answer is
    /// not a statement's rows, so the rows still come back in order, then and after.
    @Test func preparedReadsAnswerInOrderTheFirstTimeAndAfter() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE t (n integer PRIMARY KEY)")
                try await pool.query("INSERT INTO t SELECT generate_series(1, 5)")
                for bound in [2, 4, 2] {
                    let answers = try await pool.snapshot(
                        [
                            "SELECT n FROM t WHERE n <= \(bound) ORDER BY n",
                            "SELECT count(*) AS c FROM t WHERE n > \(bound)",
                            "SELECT current_setting('transaction_isolation') AS isolation",
                        ], prepared: true)
                    #expect(answers.count == 3)
                    #expect(try answers[0].map { try $0.decode("n", as: Int.self) } == Array(1...bound))
                    #expect(try answers[1].single().decode("c", as: Int.self) == 5 - bound)
                    #expect(try answers[2].single().decode("isolation", as: String.self) == "repeatable read")
                }
                // A statement that cannot be prepared fails the snapshot, and is not taken as prepared.
                for _ in 0..<2 {
                    let error = try await #require(throws: PostgresError.self) {
                        try await pool.snapshot(["SELECT n FROM t WHERE n = \(1)", "SELECT n FROM missing"], prepared: true)
                    }
                    #expect(error.sqlState == "42P01")
                }
                try await pool.query("CREATE TABLE missing (n integer)")
                let after = try await pool.snapshot(["SELECT n FROM t WHERE n = \(1)", "SELECT n FROM missing"], prepared: true)
                #expect(try after[0].single().decode("n", as: Int.self) == 1)
                #expect(after[1].isEmpty)
                // Prepared, each statement sends two messages the first time: a snapshot that would
                // not fit one sync is refused, not answered with rows out of place.
                let many = (0..<300).map { index -> PostgresQuery in "SELECT \(index)::int AS n, 'many' AS m" }
                let tooMany = try await #require(throws: PostgresError.self) { try await pool.snapshot(many, prepared: true) }
                #expect(tooMany.kind == .encoding)
                let answers = try await pool.snapshot(many)
                #expect(try answers.map { try $0.single().decode("n", as: Int.self) } == Array(0..<300))
            }
        }
    }

    /// With generic plans in index order, the answers are still the statements' own, in order,
    /// and the settings hold for the snapshot alone: after it, and after one that failed, the
    /// connection plans as before.
    @Test func genericIndexPlansHoldForTheSnapshotAlone() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE t (n integer PRIMARY KEY)")
                try await pool.query("INSERT INTO t SELECT generate_series(1, 5)")
                let settings: PostgresQuery =
                    "SELECT current_setting('plan_cache_mode') AS mode, current_setting('enable_sort') AS sort"
                for bound in [2, 4] {
                    let answers = try await pool.snapshot(
                        ["SELECT n FROM t WHERE n <= \(bound) ORDER BY n", settings, "SELECT count(*) AS c FROM t"],
                        prepared: true, genericIndexPlans: true)
                    #expect(answers.count == 3)
                    #expect(try answers[0].map { try $0.decode("n", as: Int.self) } == Array(1...bound))
                    #expect(try answers[1].single().decode("mode", as: String.self) == "force_generic_plan")
                    #expect(try answers[1].single().decode("sort", as: String.self) == "off")
                    #expect(try answers[2].single().decode("c", as: Int.self) == 5)
                }
                _ = try await #require(throws: PostgresError.self) {
                    try await pool.snapshot(["SELECT 1 / 0 AS boom"], prepared: true, genericIndexPlans: true)
                }
                let after = try await pool.query(settings).single()
                #expect(try after.decode("mode", as: String.self) == "auto")
                #expect(try after.decode("sort", as: String.self) == "on")
            }
        }
    }

    @Test func anErrorIsThrownAndTheConnectionIsIdleAfter() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let error = try await #require(throws: PostgresError.self) {
                    try await pool.snapshot(["SELECT 1 AS one", "SELECT 1 / 0 AS boom", "SELECT 3 AS three"])
                }
                #expect(error.sqlState == "22012")
                // A write inside is refused: the transaction is read-only.
                let readOnly = try await #require(throws: PostgresError.self) {
                    try await pool.snapshot(["CREATE TABLE t (n integer)"])
                }
                #expect(readOnly.sqlState == "25006")
                // The same (only) connection, out of the failed transaction and out of pipeline mode.
                #expect(try await pool.query("SELECT 41 + 1 AS x").single().decode("x", as: Int.self) == 42)
                let answers = try await pool.snapshot(["SELECT 7 AS seven"])
                #expect(try answers[0].single().decode("seven", as: Int.self) == 7)
                // A statement refused before it is sent, after others were: the same connection
                // after it, not one the pool had to replace.
                let backend: PostgresQuery = "SELECT pg_backend_pid() AS pid"
                let pid = try await pool.query(backend).single().decode("pid", as: Int.self)
                let refused = try await #require(throws: PostgresError.self) {
                    try await pool.snapshot(["SELECT 1 AS one", "SELECT \("a\u{0}b")::text AS t"], prepared: true, genericIndexPlans: true)
                }
                #expect(refused.kind == .encoding)
                #expect(try await pool.query(backend).single().decode("pid", as: Int.self) == pid)
                #expect(try await pool.snapshot(["SELECT 7 AS seven"])[0].single().decode("seven", as: Int.self) == 7)
            }
        }
    }

    @Test func recordedStatementsAreNotSentUntilAnotherConnectionSendsThemInOrder() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                try await pool.query("CREATE TABLE t (n integer PRIMARY KEY, total bigint)")
                let statements = try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        let statements = try session.recording { session in
                            for n in 1...300 {
                                let rows = try session.query(
                                    "INSERT INTO t VALUES (\(n), coalesce((SELECT total FROM t WHERE n = \(n - 1)), 0) + \(n))",
                                    prepared: n % 2 == 0)
                                #expect(rows.isEmpty)
                            }
                        }
                        // Kept, not sent: this connection is as it was, and wrote nothing.
                        #expect(try session.query("SELECT count(*) AS c FROM t").single().decode("c", as: Int.self) == 0)
                        return statements
                    }
                }
                #expect(statements.count == 300)
                #expect(try await pool.query("SELECT count(*) AS c FROM t").single().decode("c", as: Int.self) == 0)
                // Sent by another connection (the pool's other one, held alongside).
                try await pool.withConnection { first in
                    try await pool.withConnection { second in
                        try await second.withBlockingSession { session in
                            try session.withTransaction { session in try session.pipelined(recorded: statements) }
                        }
                    }
                    _ = first
                }
                let total = try await pool.query("SELECT total FROM t WHERE n = 300").single().decode("total", as: Int.self)
                #expect(total == 300 * 301 / 2)
                // A failing body records nothing and leaves the session usable.
                struct Stop: Error {}
                let stopped = try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session -> Bool in
                        do {
                            _ = try session.recording { session in
                                try session.query("DELETE FROM t")
                                throw Stop()
                            }
                            return false
                        } catch is Stop {
                            // Run, not kept: the session is out of recording.
                            return try session.query("SELECT 1 AS x").count == 1
                        }
                    }
                }
                #expect(stopped)
                #expect(try await pool.query("SELECT count(*) AS c FROM t").single().decode("c", as: Int.self) == 300)
            }
        }
    }

    /// A pipeline keeps no more statements prepared than a connection's limit: past it, a new
    /// shape (a write-back's set of columns, as many as a revision's fields combine to) is
    /// sent unprepared, and still runs.
    @Test func aPipelinePreparesNoMoreThanTheLimit() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE t (n integer PRIMARY KEY)")
                let shapes = PostgresSession.preparedLimit + 50
                try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        try session.withTransaction { session in
                            try session.pipelined { session in
                                for n in 1...shapes {
                                    try session.query(PostgresQuery(unsafeSQL: "INSERT INTO t VALUES ($1) -- \(n)", bindings: [n.postgresBinding]), prepared: true)
                                }
                            }
                        }
                        let kept = try session.query("SELECT count(*)::int AS n FROM pg_prepared_statements").single()
                        #expect(try kept.decode("n", as: Int.self) <= PostgresSession.preparedLimit)
                    }
                }
                #expect(try await pool.query("SELECT count(*)::int AS c FROM t").single().decode("c", as: Int.self) == shapes)
            }
        }
    }
}
