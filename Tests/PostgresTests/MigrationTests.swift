import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Migrations")
struct MigrationTests {
    /// A migrations folder of its own, with the given files.
    func folder(_ files: [String: String]) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (name, sql) in files {
            try sql.write(toFile: (directory as NSString).appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        return directory
    }

    let files = [
        "0001_accounts.sql": "CREATE TABLE accounts (id bigint PRIMARY KEY);\nCREATE TABLE applied_log (file text);\nINSERT INTO applied_log VALUES ('0001');",
        "0002_names.sql": "ALTER TABLE accounts ADD COLUMN name text;\nINSERT INTO applied_log VALUES ('0002');",
    ]

    func appliedLog(_ pool: PostgresPool) async throws -> [String] {
        try await pool.query("SELECT file FROM applied_log ORDER BY file").map { try $0.decode("file", as: String.self) }
    }

    @Test func appliesInOrderOnAnEmptyDatabaseThenIsANoOp() async throws {
        let migrator = try Migrator(directory: try folder(files), logger: TestDatabase.logger)
        #expect(migrator.migrations.map(\.name) == ["0001_accounts.sql", "0002_names.sql"])
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let before = try await pool.withConnection { try await migrator.status(on: $0) }
                #expect(before.pending.count == 2)
                #expect(!before.isUpToDate)

                let first = try await pool.withConnection { try await migrator.migrate(on: $0) }
                #expect(first.map(\.name) == ["0001_accounts.sql", "0002_names.sql"])
                let second = try await pool.withConnection { try await migrator.migrate(on: $0) }
                #expect(second.isEmpty)
                #expect(try await appliedLog(pool) == ["0001", "0002"])

                let after = try await pool.withConnection { try await migrator.status(on: $0) }
                #expect(after.isUpToDate)
                #expect(after.applied.map(\.checksum) == migrator.migrations.map(\.checksum))
            }
        }
    }

    @Test func aChangedAppliedFileStopsEverythingAndIsNamed() async throws {
        let directory = try folder(files)
        let migrator = try Migrator(directory: directory, logger: TestDatabase.logger)
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.withConnection { try await migrator.migrate(on: $0) }
                try "ALTER TABLE accounts ADD COLUMN name varchar(10);".write(
                    toFile: directory + "/0002_names.sql", atomically: true, encoding: .utf8)
                try "CREATE TABLE later (id int);".write(
                    toFile: directory + "/0003_later.sql", atomically: true, encoding: .utf8)
                let edited = try Migrator(directory: directory, logger: TestDatabase.logger)
                let error = try await #require(throws: MigrationError.self) {
                    try await pool.withConnection { try await edited.migrate(on: $0) }
                }
                #expect(error == .changed("0002_names.sql"))
                #expect(error.description.contains("0002_names.sql"))
                // Nothing after it was applied either.
                let later = try await pool.query("SELECT to_regclass('later') IS NULL AS absent").single()
                #expect(try later.decode("absent", as: Bool.self))
                let status = try await pool.withConnection { try await edited.status(on: $0) }
                #expect(status.changed.map(\.name) == ["0002_names.sql"])
            }
        }
    }

    @Test func aFailingMigrationLeavesNothingOfItself() async throws {
        let migrator = try Migrator(
            directory: try folder([
                "0001_ok.sql": "CREATE TABLE ok (id int);",
                "0002_broken.sql": "CREATE TABLE half (id int);\nSELECT no_such_function();",
            ]), logger: TestDatabase.logger)
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                await #expect(throws: PostgresError.self) {
                    try await pool.withConnection { try await migrator.migrate(on: $0) }
                }
                let row = try await pool.query(
                    "SELECT to_regclass('ok') IS NOT NULL AS ok, to_regclass('half') IS NOT NULL AS half").single()
                #expect(try row.decode("ok", as: Bool.self))
                #expect(try !row.decode("half", as: Bool.self))
                let status = try await pool.withConnection { try await migrator.status(on: $0) }
                #expect(status.pending.map(\.name) == ["0002_broken.sql"])
            }
        }
    }

    @Test func twoRunnersAtOnceApplyEachFileOnce() async throws {
        // Without the lock, the second runner would apply 0001 again, or fail on CREATE TABLE.
        var slow = files
        slow["0001_accounts.sql"] = "SELECT pg_sleep(0.3);\n" + files["0001_accounts.sql"]!
        let directory = try folder(slow)
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let applied = try await withThrowingTaskGroup(of: [String].self) { group in
                    for _ in 0..<2 {
                        group.addTask {
                            let migrator = try Migrator(directory: directory, logger: TestDatabase.logger)
                            return try await pool.withConnection { try await migrator.migrate(on: $0) }.map(\.name)
                        }
                    }
                    return try await group.reduce(into: [[String]]()) { $0.append($1) }
                }
                #expect(applied.sorted { $0.count < $1.count } == [[], ["0001_accounts.sql", "0002_names.sql"]])
                #expect(try await appliedLog(pool) == ["0001", "0002"])
            }
        }
    }

    @Test func badFileNamesAndDuplicateNumbersAreRefused() throws {
        #expect(throws: MigrationError.badFileName("1_short.sql")) {
            try Migration.load(from: try folder(["1_short.sql": "SELECT 1;"]))
        }
        #expect(throws: MigrationError.self) {
            try Migration.load(from: try folder(["0001_a.sql": "SELECT 1;", "0001_b.sql": "SELECT 2;"]))
        }
    }

    @Test func theRepositoryMigrationsApplyCleanly() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let migrator = try Migrator(directory: TestDatabase.migrationsDirectory, logger: TestDatabase.logger)
                let status = try await pool.withConnection { try await migrator.status(on: $0) }
                #expect(status.isUpToDate)
                #expect(status.applied.count == migrator.migrations.count)
            }
        }
    }
}
