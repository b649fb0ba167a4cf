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
