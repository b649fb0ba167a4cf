import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Errors carry SQLSTATE; transactions commit or roll back")
struct ErrorAndTransactionTests {
    @Test func uniqueViolationCarriesSQLStateAndConstraint() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE handles (handle text CONSTRAINT handles_handle_key UNIQUE)")
                try await pool.query("INSERT INTO handles VALUES (\("ada"))")
                let error = try await #require(throws: PostgresError.self) {
                    try await pool.query("INSERT INTO handles VALUES (\("ada"))")
                }
                #expect(error.kind == .server)
                #expect(error.sqlState == "23505")
                #expect(error.isUniqueViolation)
                #expect(error.constraint == "handles_handle_key")
                #expect(error.table == "handles")
                #expect(error.detail?.contains("ada") == true)
            }
        }
    }

    @Test func syntaxErrorIsAServerErrorNotAConnectionError() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let error = try await #require(throws: PostgresError.self) { try await pool.query("SELEC 1") }
                #expect(error.sqlState == "42601")
                #expect(!error.isConnectionFailure)
                // The connection is still good afterwards.
                #expect(try await pool.query("SELECT 1 AS one").single().decode("one", as: Int.self) == 1)
            }
        }
    }

    struct Boom: Error {}

    @Test func aThrowingTransactionLeavesNoRow() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE t (n int)")
                await #expect(throws: Boom.self) {
                    try await pool.withTransaction { connection in
                        try await connection.query("INSERT INTO t VALUES (1)")
                        try await connection.query("INSERT INTO t VALUES (2)")
                        throw Boom()
                    }
                }
                try await pool.withTransaction { connection in
                    try await connection.query("INSERT INTO t VALUES (3)")
                }
                let rows = try await pool.query("SELECT n FROM t ORDER BY n")
                #expect(try rows.map { try $0.decode("n", as: Int.self) } == [3])
            }
        }
    }

    @Test func aFailedStatementCaughtInsideTheBodyStillFailsTheCommit() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("CREATE TABLE t (n int PRIMARY KEY)")
                await #expect(throws: PostgresError.self) {
                    try await pool.withTransaction { connection in
                        try await connection.query("INSERT INTO t VALUES (1)")
                        _ = try? await connection.query("INSERT INTO t VALUES (1)")
                    }
                }
                let count = try await pool.query("SELECT count(*) AS n FROM t").single().decode("n", as: Int.self)
                #expect(count == 0)
            }
        }
    }

    @Test func preparedStatementsRunWithNewParametersAndSurviveDiscard() async throws {
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.withConnection { connection in
                    for value in [1, 2, 3] {
                        let row = try await connection.query("SELECT \(value) * 10 AS n", prepared: true).single()
                        #expect(try row.decode("n", as: Int.self) == value * 10)
                    }
                    let count = try await connection.query(
                        "SELECT count(*) AS n FROM pg_prepared_statements WHERE name LIKE 'lender_%'"
                    ).single().decode("n", as: Int.self)
                    #expect(count == 1)
                    try await connection.query("DISCARD ALL")
                    let row = try await connection.query("SELECT \(4) * 10 AS n", prepared: true).single()
                    #expect(try row.decode("n", as: Int.self) == 40)
                }
            }
        }
    }

    @Test func aFailedConnectionNamesHostPortAndDatabase() async throws {
        let configuration = try PostgresConfiguration("postgresql://nobody@127.0.0.1:1/nowhere_db")
        try await TestDatabase.withPool(configuration, size: 1) { pool in
            let error = try await #require(throws: PostgresError.self) { try await pool.query("SELECT 1") }
            #expect(error.kind == .connection)
            #expect(error.message.contains("127.0.0.1"))
            #expect(error.message.contains("port 1"))
            #expect(error.message.contains("nowhere_db"))
        }
    }

    @Test func aMalformedURLIsRefusedUpFront() throws {
        #expect(throws: PostgresError.self) { try PostgresConfiguration("postgresql://host:notaport:/x?bad") }
        let socket = try PostgresConfiguration("postgresql:///lender?host=/run/lender/socket")
        #expect(socket.host == "/run/lender/socket")
        #expect(socket.database == "lender")
    }
}
