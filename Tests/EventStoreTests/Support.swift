import EventStore
import Foundation
import Postgres
import TestSupport

/// A store on a freshly migrated database of its own.
func withStore<Result>(
    poolSize: Int = 8, isolation: isolated (any Actor)? = #isolation,
    _ body: (EventStore, PostgresConfiguration) async throws -> Result
) async throws -> Result {
    try await TestDatabase.withMigrated { configuration in
        try await TestDatabase.withPool(configuration, size: poolSize, acquireTimeout: .seconds(60)) { pool in
            try await body(EventStore(pool: pool, logger: TestDatabase.logger), configuration)
        }
    }
}

func event(_ type: String = "Something", _ body: [String: Int] = ["n": 1]) -> NewEvent {
    NewEvent(type: type, data: try! JSONB(body))
}

/// The test database, as the cluster's superuser: for what only a superuser may do.
func withSuperuser<Result>(
    on configuration: PostgresConfiguration, isolation: isolated (any Actor)? = #isolation,
    _ body: (PostgresPool) async throws -> Result
) async throws -> Result {
    let admin = try TestDatabase.adminConfiguration().database(configuration.database)
    return try await TestDatabase.withPool(admin, size: 1) { pool in try await body(pool) }
}
