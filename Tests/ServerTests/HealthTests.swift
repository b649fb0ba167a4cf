import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import Server
import ServerTestSupport
import Testing
import TestSupport

@Suite("Health")
struct HealthTests {
    func withApplication(
        _ configuration: PostgresConfiguration, migrator: Migrator,
        _ test: @escaping @Sendable (any TestClientProtocol) async throws -> Void
    ) async throws {
        // As the server runs: as lender_app, which may read the migrations table.
        var configuration = configuration
        configuration.role = "lender_app"
        let pool = PostgresPool(configuration: configuration, options: .init(size: 2), logger: TestDatabase.logger)
        let application = buildApplication(
            configuration: ServerConfiguration(host: "127.0.0.1", port: 0), pool: pool, migrator: migrator,
            logger: TestDatabase.logger, payments: try .sandbox(secret: testCardSecret), masterKeys: testMasterKeys)
        try await application.test(.router, test)
    }

    @Test func readyWhenTheDatabaseAnswersAndTheSchemaIsCurrent() async throws {
        try await TestDatabase.withMigrated { configuration in
            let migrator = try Migrator(directory: TestDatabase.migrationsDirectory, logger: TestDatabase.logger)
            try await withApplication(configuration, migrator: migrator) { client in
                try await client.execute(uri: "/health/live", method: .get) { response in
                    #expect(response.status == .ok)
                }
                try await client.execute(uri: "/health/ready", method: .get) { response in
                    #expect(response.status == .ok)
                    #expect(String(buffer: response.body).contains("ready"))
                }
            }
        }
    }

    @Test func notReadyWithAPendingMigration() async throws {
        try await TestDatabase.withMigrated { configuration in
            let applied = try Migration.load(from: TestDatabase.migrationsDirectory)
            let migrator = Migrator(
                migrations: applied + [Migration(version: 9999, name: "9999_pending.sql", sql: "SELECT 1;")],
                logger: TestDatabase.logger)
            try await withApplication(configuration, migrator: migrator) { client in
                try await client.execute(uri: "/health/ready", method: .get) { response in
                    #expect(response.status == .serviceUnavailable)
                    #expect(response.headers[.contentType] == "application/problem+json")
                    let problem = try JSONDecoder().decode(Problem.Body.self, from: Data(buffer: response.body))
                    #expect(problem.code == "migrations_pending")
                    #expect(problem.status == 503)
                    #expect(problem.detail.contains("9999_pending.sql"))
                }
                // Liveness does not depend on the schema.
                try await client.execute(uri: "/health/live", method: .get) { response in
                    #expect(response.status == .ok)
                }
            }
        }
    }

    @Test func theServerRoleIsSetOnEveryConnection() async throws {
        try await TestDatabase.withMigrated { configuration in
            var configuration = configuration
            configuration.role = "lender_app"
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let user = try await pool.query("SELECT current_user AS name").single().decode("name", as: String.self)
                #expect(user == "lender_app")
                let error = try await #require(throws: PostgresError.self) {
                    try await pool.query("DELETE FROM events")
                }
                #expect(error.sqlState == SQLState.insufficientPrivilege)
            }
        }
    }

    @Test func notReadyWhenTheDatabaseIsUnreachable() async throws {
        let unreachable = try PostgresConfiguration("postgresql://lender@127.0.0.1:1/lender")
        let migrator = Migrator(migrations: [], logger: TestDatabase.logger)
        try await withApplication(unreachable, migrator: migrator) { client in
            try await client.execute(uri: "/health/ready", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                let problem = try JSONDecoder().decode(Problem.Body.self, from: Data(buffer: response.body))
                #expect(problem.code == "database_unavailable")
            }
        }
    }
}
