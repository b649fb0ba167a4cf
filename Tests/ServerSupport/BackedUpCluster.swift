import Foundation
import Postgres
import Testing

/// A cluster of its own with pgBackRest's backups and WAL archive (SPEC §12.8), made by
/// `scripts/db` under a temporary `LENDER_LOCAL`, for the restore drills: the suite's shared
/// cluster archives nothing.
public final class BackedUpCluster: Sendable {
    public let local: String

    /// Starts the cluster; `lender migrate` is the caller's.
    public init() throws {
        local = FileManager.default.temporaryDirectory.appendingPathComponent("lender-backup-\(UUID().uuidString.prefix(8))").path
        do {
            try db(["start"])
        } catch {
            remove()
            throw error
        }
    }

    /// Runs `scripts/db` here; what it printed, and its exit status.
    @discardableResult
    public func run(_ arguments: [String]) throws -> (output: String, status: Int32) { try scriptsDB(arguments, local: local) }

    /// `scripts/db` that must succeed: what it printed.
    @discardableResult
    public func db(_ arguments: [String]) throws -> String { try scriptsDBChecked(arguments, local: local) }

    /// The owner's URL of this cluster's `lender` database.
    public func owner() throws -> PostgresConfiguration {
        try PostgresConfiguration(
            try String(contentsOfFile: "\(local)/database-url", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// The superuser, for what the tests look at directly.
    public func admin() throws -> PostgresConfiguration {
        let port = try String(contentsOfFile: "\(local)/pg/port", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return try PostgresConfiguration("postgresql://postgres@127.0.0.1:\(port)/lender")
    }

    /// Restores the cluster as it stood at `time` into a folder of its own; its owner URL.
    public func restore(to time: String, into directory: String) throws -> PostgresConfiguration {
        let printed = try db(["restore", "--to", time, "--into", directory])
        let url = try #require(printed.split(separator: "\n").last { $0.hasPrefix("postgresql://") })
        return try PostgresConfiguration(String(url))
    }

    /// Stops the cluster and its restored copies, and removes their folders.
    public func remove(restored: [String] = []) {
        for directory in restored { _ = try? run(["restored-stop", directory]) }
        _ = try? run(["stop", "immediate"])
        try? FileManager.default.removeItem(atPath: local)
    }
}
