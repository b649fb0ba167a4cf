import Foundation
import Migrations
import Postgres
import ServerTestSupport
import Testing
import TestSupport

@Suite("Migrations built into the binary")
struct EmbeddedMigrationsTests {
    /// `Package.swift` lists the folder's files as resources when the manifest is read: a file
    /// added since (a manifest cached from before) would be missing from the binary.
    @Test func theBinaryHoldsEveryMigrationOfTheFolderByteForByte() throws {
        let embedded = try EmbeddedMigrations.load()
        let folder = try Migration.load(from: TestDatabase.migrationsDirectory)
        #expect(embedded.map(\.name) == folder.map(\.name))
        #expect(embedded.map(\.checksum) == folder.map(\.checksum))
        #expect(embedded.count >= 13)
    }

    /// A deployed binary has no checkout: from `/`, with only `DATABASE_URL`, it migrates and
    /// reports the schema.
    @Test func lenderMigratesFromAnyFolderWithOnlyTheDatabaseURL() async throws {
        try await TestDatabase.withEmpty { database in
            let environment = ["DATABASE_URL": database.connectionString]
            let pending = try await runLenderAside(
                ["migrate", "--status"], database: nil, expectedStatus: 0, environment: environment, directory: "/")
            #expect(pending.contains("pending  0001_event_log.sql"), "\(pending)")
            #expect(pending.contains("The schema is behind"))
            let applied = try await runLenderAside(["migrate"], database: nil, environment: environment, directory: "/")
            #expect(applied.contains("applied  0013_unique_emails.sql"), "\(applied)")
            let status = try await runLenderAside(["migrate", "--status"], database: nil, environment: environment, directory: "/")
            #expect(status.contains("The schema is up to date."), "\(status)")
        }
    }
}
