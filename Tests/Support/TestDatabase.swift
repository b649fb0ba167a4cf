import Foundation
import Logging
import Postgres

/// Fresh databases on the cluster that `scripts/test` starts, one per test, so tests never
/// see each other's rows. `DATABASE_URL` is the owner role (it may create databases);
/// `LENDER_ADMIN_URL` is a superuser, for the few tests that must act as one.
public enum TestDatabase {
    public static let logger = Logger(label: "lender.tests")

    /// The cluster's owner-role configuration; fails loudly when the scripts did not set it.
    public static func ownerConfiguration() throws -> PostgresConfiguration {
        try configuration("DATABASE_URL")
    }

    public static func adminConfiguration() throws -> PostgresConfiguration {
        try configuration("LENDER_ADMIN_URL")
    }

    /// The repository's migrations/ folder.
    public static var migrationsDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("migrations").path
    }

    /// Creates an empty database, runs `body` with its configuration, then drops it.
    public static func withEmpty<Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConfiguration) async throws -> Result
    ) async throws -> Result {
        let owner = try ownerConfiguration()
        let name = "lender_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await withAdminConnection(owner) { connection in
            try await connection.query("CREATE DATABASE \(unsafeRaw: name)")
        }
        let result: Result
        do {
            result = try await body(owner.database(name))
        } catch {
            try? await drop(name, owner: owner)
            throw error
        }
        try await drop(name, owner: owner)
        return result
    }

    /// Like `withEmpty`, with every migration of the repository applied.
    public static func withMigrated<Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConfiguration) async throws -> Result
    ) async throws -> Result {
        try await withEmpty { configuration in
            let migrator = try Migrator(directory: migrationsDirectory, logger: logger)
            try await withPool(configuration, size: 1) { pool in
                try await pool.withConnection { connection in try await migrator.migrate(on: connection) }
            }
            return try await body(configuration)
        }
    }

    /// A pool on `configuration`, shut down after `body`.
    @discardableResult
    public static func withPool<Result>(
        _ configuration: PostgresConfiguration, size: Int = 4, acquireTimeout: Duration = .seconds(10),
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresPool) async throws -> Result
    ) async throws -> Result {
        try await PostgresPool.with(
            configuration: configuration, options: .init(size: size, acquireTimeout: acquireTimeout), logger: logger, body)
    }

    /// As the superuser when there is one: FORCE must end every backend still in the database,
    /// and a superuser test pool's backend may still be exiting after its connection closed,
    /// which only a superuser may end.
    static func drop(_ name: String, owner: PostgresConfiguration) async throws {
        try await withAdminConnection((try? adminConfiguration()) ?? owner) { connection in
            try await connection.query("DROP DATABASE IF EXISTS \(unsafeRaw: name) WITH (FORCE)")
        }
    }

    /// A connection to the maintenance database `postgres`, for CREATE and DROP DATABASE.
    static func withAdminConnection(
        _ owner: PostgresConfiguration, _ body: @Sendable (PostgresConnection) async throws -> Void
    ) async throws {
        try await withPool(owner.database("postgres"), size: 1) { pool in
            try await pool.withConnection { connection in try await body(connection) }
        }
    }

    static func configuration(_ variable: String) throws -> PostgresConfiguration {
        guard let url = ProcessInfo.processInfo.environment[variable], !url.isEmpty else {
            throw TestSetupError(
                description: "\(variable) is not set: run the tests with scripts/test, which starts the database.")
        }
        // The suite creates many databases at once on a shared machine: a slow connection
        // is not a failure of what a test checks.
        return try PostgresConfiguration(url, connectTimeoutSeconds: 30)
    }
}

public struct TestSetupError: Error, CustomStringConvertible {
    public var description: String
}
