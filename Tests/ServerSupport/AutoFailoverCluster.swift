import Foundation
import Postgres
import Testing

/// pg_auto_failover's monitor and two nodes (SPEC §12.8), made by `scripts/db ha` under a
/// temporary `LENDER_LOCAL`: the automatic failover drill's, apart from the suite's cluster.
public final class AutoFailoverCluster: Sendable {
    public let local: String

    public init() throws {
        local = FileManager.default.temporaryDirectory.appendingPathComponent("lender-ha-\(UUID().uuidString.prefix(8))").path
        do {
            try db(["ha"])
        } catch {
            // Half made: its keepers would outlive the test (no `remove` runs for an init that threw).
            remove()
            throw error
        }
    }

    /// `scripts/db` here; throws with what it printed when it fails.
    @discardableResult
    public func db(_ arguments: [String]) throws -> String { try scriptsDBChecked(arguments, local: local) }

    /// Both nodes, for whichever accepts writes; the server asks for `read-write` by itself.
    public func owner() throws -> PostgresConfiguration {
        let text = try String(contentsOfFile: "\(local)/ha/database-url", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return try PostgresConfiguration(text.replacingOccurrences(of: "?target_session_attrs=read-write", with: ""))
    }

    /// The node that takes writes now (`node1` or `node2`).
    public func primary() throws -> String { try db(["ha", "primary"]).trimmingCharacters(in: .whitespacesAndNewlines) }

    /// Waits until a node other than `old` takes writes; how long it took.
    public func waitForPrimary(otherThan old: String, timeout: Duration = .seconds(60)) async throws -> Duration {
        let clock = ContinuousClock()
        let started = clock.now
        while clock.now - started < timeout {
            if let now = try? primary(), now != old { return clock.now - started }
            try await Task.sleep(for: .milliseconds(250))
        }
        throw ScriptsDBError(arguments: ["ha", "primary"], output: "no primary but \(old) after \(timeout)")
    }

    /// The last lines of the monitor's and each node's log, for a failure's message.
    public func logs() -> String {
        ["monitor", "node1", "node2"].map { name in
            let text = (try? String(contentsOfFile: "\(local)/ha/\(name).log", encoding: .utf8)) ?? ""
            return "== \(name)\n" + text.split(separator: "\n").suffix(25).joined(separator: "\n")
        }.joined(separator: "\n")
    }

    public func remove() {
        _ = try? db(["ha", "stop"])
        try? FileManager.default.removeItem(atPath: local)
    }
}
