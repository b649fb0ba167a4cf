import Aggregates
import ArgumentParser
import EventStore
import Foundation
import LineLog
import Logging
import Migrations
import Postgres
import Projections
import UseCases

/// Where the database and the migration files are.
struct DatabaseOptions: ParsableArguments {
    @Option(
        name: .customLong("database-url"),
        help: "PostgreSQL URL (default: $DATABASE_URL, else the checkout's own cluster from scripts/db).")
    var databaseURL: String?

    @Option(help: "A migrations folder to use instead of the ones built in (default: $LENDER_MIGRATIONS, else built in).")
    var migrations: String?

    func configuration() throws -> PostgresConfiguration {
        if let url = databaseURL ?? ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty {
            return try PostgresConfiguration(url)
        }
        // scripts/db writes the local cluster's URL here.
        if let file = Checkout.find(".local/database-url"),
            let url = try? String(contentsOfFile: file, encoding: .utf8)
        {
            return try PostgresConfiguration(url.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        throw ValidationError(
            "No database: set DATABASE_URL, pass --database-url, or start the local cluster with `scripts/db start`.")
    }

    /// A pool of `size` connections on the database, closed after `body`.
    func withPool<Result>(
        size: Int = 1, logger: Logger, isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresPool) async throws -> Result
    ) async throws -> Result {
        try await PostgresPool.with(configuration: try configuration(), options: .init(size: size), logger: logger, body)
    }

    /// A command gateway writing as the server writes: the role that may append to the log
    /// and never rewrite it (`DATABASE_ROLE`, `lender_app` by default), the views inline,
    /// personal data sealed with the master key. For the commands that act as the server does
    /// (`lender jobs run`, `lender loans expire`).
    func withGateway<Result: Sendable>(
        logger: Logger, _ body: @Sendable (CommandGateway) async throws -> Result
    ) async throws -> Result {
        var configuration = try configuration()
        let role = ProcessInfo.processInfo.environment["DATABASE_ROLE"] ?? "lender_app"
        configuration.role = role.isEmpty ? nil : role
        return try await PostgresPool.with(configuration: configuration, options: .init(size: 2), logger: logger) { pool in
            let store = EventStore(
                pool: pool, logger: logger, projections: lenderProjections,
                personalData: try DataKeyOptions.personalData(pool: pool))
            return try await body(CommandGateway(store: store, logger: logger))
        }
    }

    /// The migrations built into the binary, unless a folder is named.
    func migrator(logger: Logger) throws -> Migrator {
        if let directory = migrations ?? ProcessInfo.processInfo.environment["LENDER_MIGRATIONS"], !directory.isEmpty {
            return try Migrator(directory: directory, logger: logger)
        }
        return Migrator(migrations: try EmbeddedMigrations.load(), logger: logger)
    }
}

/// The checkout that holds Package.swift, found from the working directory or the executable.
enum Checkout {
    static func find(_ relativePath: String) -> String? {
        let starts = [
            FileManager.default.currentDirectoryPath,
            URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path,
        ]
        for start in starts {
            var directory = URL(fileURLWithPath: start)
            while true {
                let candidate = directory.appendingPathComponent(relativePath).path
                if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path),
                    FileManager.default.fileExists(atPath: candidate)
                {
                    return candidate
                }
                let parent = directory.deletingLastPathComponent()
                if parent.path == directory.path { break }
                directory = parent
            }
        }
        return nil
    }
}

enum Logs {
    /// Logs to standard error at `LOG_LEVEL` (default info).
    static func bootstrap() -> Logger {
        let level = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0.lowercased()) }
        LoggingSystem.bootstrap { label in
            var handler = LineLogHandler(StreamLogHandler.standardError(label: label))
            handler.logLevel = level ?? .info
            return handler
        }
        return Logger(label: "lender")
    }
}

/// Where the master keys are (`DATA_KEY_FILE`, else the checkout's `.local/data-keys` that
/// `scripts/serve` makes): required wherever events are written or views rebuilt, since a
/// rebuild without them would read everyone as forgotten.
enum DataKeyOptions {
    static func file(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String {
        if let path = environment["DATA_KEY_FILE"], !path.isEmpty { return path }
        if let path = Checkout.find(".local/data-keys") { return path }
        throw ValidationError(
            """
            No master key: set DATA_KEY_FILE to a file of master keys. Make one with
              (umask 077; lender keys new-master > data-keys)
            and keep it safe and backed up: without it no personal data in the log can be read.
            """)
    }

    static func personalData(pool: PostgresPool) throws -> PersonalData {
        let file = try file()
        return PersonalData(
            keys: DataKeys(pool: pool, masters: try MasterKeys(file: file), file: file), fields: lenderPersonalFields)
    }
}
