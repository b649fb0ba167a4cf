import Foundation
import Postgres
import Synchronization
import Testing
import TestSupport

/// Records which backends are lent right now, and fails if one is lent twice at once.
final class LendingLedger: Sendable {
    private let state = Mutex<(inUse: Set<Int32>, seen: Set<Int32>, overlaps: Int)>(([], [], 0))

    func enter(_ pid: Int32) {
        state.withLock { state in
            if !state.inUse.insert(pid).inserted { state.overlaps += 1 }
            state.seen.insert(pid)
        }
    }

    func leave(_ pid: Int32) {
        state.withLock { _ = $0.inUse.remove(pid) }
    }

    var overlaps: Int { state.withLock { $0.overlaps } }
    var distinctBackends: Int { state.withLock { $0.seen.count } }
}

@Suite("The pool: bounded, scoped, self-healing")
struct PoolTests {
    @Test func twoHundredTasksOnFourConnectionsNeverShareOne() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 4, acquireTimeout: .seconds(60)) { pool in
                let ledger = LendingLedger()
                try await withThrowingTaskGroup(of: Int32.self) { group in
                    for _ in 0..<200 {
                        group.addTask {
                            // Spread arrivals so that both paths run: lending an idle connection
                            // and handing a returned one straight to a waiter.
                            try await Task.sleep(for: .milliseconds(Int.random(in: 0...400)))
                            return try await pool.withConnection { connection in
                                ledger.enter(connection.backendPID)
                                defer { ledger.leave(connection.backendPID) }
                                // The server's own word for which backend ran the query.
                                let pid = try await connection.query("SELECT pg_backend_pid() AS pid, pg_sleep(0.002)")
                                    .single().decode("pid", as: Int32.self)
                                #expect(pid == connection.backendPID)
                                return pid
                            }
                        }
                    }
                    var completed = 0
                    for try await _ in group { completed += 1 }
                    #expect(completed == 200)
                }
                #expect(ledger.overlaps == 0)
                #expect(ledger.distinctBackends <= 4)
                #expect(pool.usage.open <= 4)
                #expect(pool.usage.inUse == 0)
            }
        }
    }

    @Test func aCallerWaitingPastTheLimitIsToldTheDatabaseIsBusy() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1, acquireTimeout: .milliseconds(200)) { pool in
                try await pool.withConnection { connection in
                    let error = try await #require(throws: PostgresError.self) { try await pool.query("SELECT 1") }
                    #expect(error.kind == .poolExhausted)
                    #expect(error.message.contains("busy"))
                    _ = connection
                }
                // Once the connection is back, the pool serves again.
                #expect(try await pool.query("SELECT 1 AS one").single().decode("one", as: Int.self) == 1)
            }
        }
    }

    @Test func terminatedConnectionsAreReplacedAndTheNextQueriesSucceed() async throws {
        let admin = try TestDatabase.adminConfiguration()
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 4, acquireTimeout: .seconds(30)) { pool in
                // Open all four connections.
                let pids = try await withThrowingTaskGroup(of: Int32.self) { group in
                    for _ in 0..<4 {
                        group.addTask {
                            try await pool.withConnection { connection in
                                try await connection.query("SELECT pg_sleep(0.2)")
                                return connection.backendPID
                            }
                        }
                    }
                    return try await group.reduce(into: Set<Int32>()) { $0.insert($1) }
                }
                #expect(pids.count == 4)

                try await TestDatabase.withPool(admin, size: 1) { adminPool in
                    for pid in pids {
                        try await adminPool.query("SELECT pg_terminate_backend(\(pid), 5000)")
                    }
                    let alive = try await adminPool.query(
                        "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = ANY(\(pids.map(String.init).joined(separator: ",").postgresIntArray))"
                    ).single().decode("n", as: Int.self)
                    #expect(alive == 0)
                }

                for _ in 0..<8 {
                    let pid = try await pool.query("SELECT pg_backend_pid() AS pid").single().decode("pid", as: Int32.self)
                    #expect(!pids.contains(pid))
                }
            }
        }
    }

    @Test func aConnectionThatDiesWhileLentIsDroppedOnReturn() async throws {
        let admin = try TestDatabase.adminConfiguration()
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                await #expect(throws: PostgresError.self) {
                    try await pool.withConnection { connection in
                        try await TestDatabase.withPool(admin, size: 1) { adminPool in
                            try await adminPool.query("SELECT pg_terminate_backend(\(connection.backendPID), 5000)")
                        }
                        try await connection.query("SELECT 1")
                    }
                }
                let one = try await pool.query("SELECT 1 AS one").single().decode("one", as: Int.self)
                #expect(one == 1)
            }
        }
    }
}

extension String {
    /// `1,2,3` as a PostgreSQL integer array literal parameter.
    var postgresIntArray: PostgresIntArray { PostgresIntArray(text: "{\(self)}") }
}

struct PostgresIntArray: PostgresEncodable {
    var text: String
    var postgresBinding: PostgresBinding { PostgresBinding(type: PostgresType(rawValue: 1007), text: text) }
}
