import Crypto
import Foundation
import Logging

/// One `migrations/NNNN_name.sql` file.
public struct Migration: Sendable, Hashable {
    public let version: Int
    /// The file name, `0001_event_log.sql`.
    public let name: String
    public let sql: String
    /// SHA-256 of the file, lower-case hex.
    public let checksum: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
        self.checksum = Data(SHA256.hash(data: Data(sql.utf8))).hexString
    }

    /// Reads every `NNNN_name.sql` in `directory`, in version order.
    public static func load(from directory: String) throws -> [Migration] {
        let files: [String]
        do {
            files = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw MigrationError.unreadableDirectory(directory)
        }
        var migrations = [Migration]()
        for file in files where file.hasSuffix(".sql") {
            let digits = file.prefix { $0.isASCII && $0.isNumber }
            guard digits.count == 4, let version = Int(digits), file.dropFirst(4).first == "_" else {
                throw MigrationError.badFileName(file)
            }
            let path = (directory as NSString).appendingPathComponent(file)
            guard let data = FileManager.default.contents(atPath: path), let sql = String(data: data, encoding: .utf8)
            else { throw MigrationError.unreadableFile(file) }
            if let twin = migrations.first(where: { $0.version == version }) {
                throw MigrationError.duplicateVersion(twin.name, file)
            }
            migrations.append(Migration(version: version, name: file, sql: sql))
        }
        return migrations.sorted { $0.version < $1.version }
    }
}

public enum MigrationError: Error, Equatable, CustomStringConvertible {
    case unreadableDirectory(String)
    case unreadableFile(String)
    case badFileName(String)
    case duplicateVersion(String, String)
    /// An applied file was edited afterwards.
    case changed(String)

    public var description: String {
        switch self {
        case .unreadableDirectory(let path): "cannot read the migrations folder \(path)"
        case .unreadableFile(let name): "cannot read migration \(name) as UTF-8 text"
        case .badFileName(let name): "migration file \(name) is not named NNNN_name.sql"
        case .duplicateVersion(let first, let second): "migrations \(first) and \(second) share a number"
        case .changed(let name):
            "migration \(name) was changed after it was applied (its SHA-256 differs from the recorded one); "
                + "restore the file and put the change in a new migration"
        }
    }
}

/// Where the database stands against the migration files.
public struct MigrationStatus: Sendable, Equatable {
    public struct Applied: Sendable, Equatable {
        public var version: Int
        public var name: String
        public var checksum: String
        public var appliedAt: Date
        /// The file's checksum no longer matches the recorded one.
        public var isChanged: Bool
        /// No file has this version any more.
        public var isMissing: Bool
    }

    public var applied: [Applied]
    public var pending: [Migration]

    public var changed: [Applied] { applied.filter(\.isChanged) }
    public var isUpToDate: Bool { pending.isEmpty && changed.isEmpty }
}

/// Applies migrations in order, each in its own transaction, recording each file's SHA-256.
/// A session advisory lock makes concurrent runners take turns, so each file applies once.
public struct Migrator: Sendable {
    public let migrations: [Migration]
    public let logger: Logger

    /// Arbitrary, fixed: the advisory lock key that serializes migration runs.
    static let lockKey = 7_403_920_611

    public init(migrations: [Migration], logger: Logger) {
        self.migrations = migrations
        self.logger = logger
    }

    public init(directory: String, logger: Logger) throws {
        self.init(migrations: try Migration.load(from: directory), logger: logger)
    }

    public func status(on connection: PostgresConnection) async throws -> MigrationStatus {
        let exists = try await connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS exists")
            .single().decode("exists", as: Bool.self)
        guard exists else { return MigrationStatus(applied: [], pending: migrations) }
        let rows = try await connection.query(
            """
            SELECT version, name, checksum, applied_at
            FROM schema_migrations
            ORDER BY version
            """)
        let files = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
        var applied = [MigrationStatus.Applied]()
        for row in rows {
            let version = try row.decode("version", as: Int.self)
            let checksum = try row.decode("checksum", as: String.self)
            applied.append(
                MigrationStatus.Applied(
                    version: version, name: try row.decode("name"), checksum: checksum,
                    appliedAt: try row.decode("applied_at"),
                    isChanged: files[version].map { $0.checksum != checksum } ?? false,
                    isMissing: files[version] == nil))
        }
        let appliedVersions = Set(applied.map(\.version))
        return MigrationStatus(applied: applied, pending: migrations.filter { !appliedVersions.contains($0.version) })
    }

    /// Applies every pending migration and returns them; throws `.changed` before applying
    /// anything when an applied file was edited.
    @discardableResult
    public func migrate(on connection: PostgresConnection) async throws -> [Migration] {
        try await connection.query("SELECT pg_advisory_lock(\(Self.lockKey))")
        do {
            let applied = try await migrateHoldingLock(on: connection)
            try await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))")
            return applied
        } catch {
            _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))")
            throw error
        }
    }

    private func migrateHoldingLock(on connection: PostgresConnection) async throws -> [Migration] {
        try await connection.execute(
            unsafeSQL: """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version integer PRIMARY KEY,
                    name text NOT NULL,
                    checksum text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """)
        let status = try await status(on: connection)
        if let changed = status.changed.first {
            throw MigrationError.changed(changed.name)
        }
        for migration in status.pending {
            logger.info("applying migration", metadata: ["migration": "\(migration.name)"])
            try await connection.withTransaction { connection in
                try await connection.execute(unsafeSQL: migration.sql)
                try await connection.query(
                    """
                    INSERT INTO schema_migrations (version, name, checksum)
                    VALUES (\(migration.version), \(migration.name), \(migration.checksum))
                    """)
            }
        }
        return status.pending
    }
}
