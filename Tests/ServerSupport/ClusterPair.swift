import Foundation
import Postgres
import Testing

/// A primary and its streaming standby of their own, made by `scripts/db` under a temporary
/// `LENDER_LOCAL`, for the tests that stop a primary: the suite's shared cluster stays up.
public final class ClusterPair: Sendable {
    public let local: String

    /// Starts a primary with the `lender` database migrated, and a standby of it.
    public init() throws {
        local = FileManager.default.temporaryDirectory.appendingPathComponent("lender-pair-\(UUID().uuidString.prefix(8))").path
        try db(["start"])
        try db(["replica"])
    }

    /// Runs `scripts/db` on this pair and returns what it printed; throws when it fails.
    @discardableResult
    public func db(_ arguments: [String]) throws -> String { try scriptsDBChecked(arguments, local: local) }

    private func url(_ file: String) throws -> PostgresConfiguration {
        let text = try String(contentsOfFile: "\(local)/\(file)", encoding: .utf8)
        return try PostgresConfiguration(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Both hosts, for whichever accepts writes: what a server follows a failover with. Without
    /// `target_session_attrs`, which the scripts' URL spells out: the server asks for
    /// `read-write` by itself when given several hosts.
    public func failoverOwner() throws -> PostgresConfiguration {
        let text = try url("failover-database-url").connectionString
        return try PostgresConfiguration(text.replacingOccurrences(of: "?target_session_attrs=read-write", with: ""))
    }
    /// The standby alone: `READ_DATABASE_URL`.
    public func replicaOwner() throws -> PostgresConfiguration { try url("replica-database-url") }

    public func primaryPort() throws -> String { try port("pg/port") }
    public func replicaPort() throws -> String { try port("pg-replica/port") }

    private func port(_ file: String) throws -> String {
        try String(contentsOfFile: "\(local)/\(file)", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The standby's superuser, for pausing its replay.
    public func replicaAdmin() throws -> PostgresConfiguration {
        try PostgresConfiguration("postgresql://postgres@127.0.0.1:\(try replicaPort())/postgres")
    }

    /// Stops both servers and removes their folders.
    public func remove() {
        _ = try? db(["replica", "stop"])
        _ = try? db(["stop", "immediate"])
        try? FileManager.default.removeItem(atPath: local)
    }
}
