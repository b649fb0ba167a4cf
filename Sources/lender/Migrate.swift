import ArgumentParser
import Foundation
import Postgres

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply the pending migrations in order, each in its own transaction.")

    @OptionGroup var database: DatabaseOptions

    @Flag(help: "List applied and pending migrations; change nothing.")
    var status = false

    func run() async throws {
        let logger = Logs.bootstrap()
        let migrator = try database.migrator(logger: logger)
        try await database.withPool(logger: logger) {
            pool in try await run(migrator: migrator, pool: pool)
        }
    }

    private func run(migrator: Migrator, pool: PostgresPool) async throws {
        if status {
            let status = try await pool.withConnection { try await migrator.status(on: $0) }
            let formatter = ISO8601DateFormatter()
            for applied in status.applied {
                let note = applied.isChanged ? "  CHANGED since applied" : applied.isMissing ? "  (no such file)" : ""
                print("applied  \(applied.name)  \(formatter.string(from: applied.appliedAt))\(note)")
            }
            for pending in status.pending { print("pending  \(pending.name)") }
            print(status.isUpToDate ? "The schema is up to date." : "The schema is behind: run `lender migrate`.")
            if !status.changed.isEmpty { throw ExitCode(1) }
            return
        }
        let applied = try await pool.withConnection { try await migrator.migrate(on: $0) }
        if applied.isEmpty {
            print("Nothing to apply: the schema is up to date.")
        } else {
            for migration in applied { print("applied  \(migration.name)") }
        }
    }
}
