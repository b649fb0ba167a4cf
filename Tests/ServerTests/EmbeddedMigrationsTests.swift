import Foundation
import Migrations
import Postgres
import ServerTestSupport
import Testing
import TestSupport

@Suite("Migrations built into the binary")
struct EmbeddedMigrationsTests {
    /// `Package.swift` lists the folder's files as resources when the manifest is read: a file
    /// added since (a manifest cached from before) would be missing from the binary. The
    /// scripts' `build` rebuilds without SwiftPM's caches then; a plain `swift build` needs
    /// `--manifest-cache none --disable-build-manifest-caching` once.
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

    /// A binary copied without its resource folder says what is missing, and stops with an
    /// error, not a crash.
    @Test func aBinaryWithoutItsMigrationsSaysSo() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let alone = FileManager.default.temporaryDirectory.appendingPathComponent("lender-alone-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: alone, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: alone) }
        let binary = alone.appendingPathComponent("lender")
        try FileManager.default.copyItem(at: root.appendingPathComponent(".build/debug/lender"), to: binary)
        let process = Process()
        process.executableURL = binary
        process.arguments = ["migrate", "--status"]
        process.environment = ["DATABASE_URL": "postgresql://127.0.0.1:1/nothing", "LOG_LEVEL": "error"]
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = Pipe()
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 1)
        #expect(text.contains("lender_Migrations.resources"), "\(text)")
    }
}
