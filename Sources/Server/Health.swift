import EventStore
import Hummingbird
import Logging
import Postgres

/// Whether the server can do its work: the database answers and its schema is current.
public struct Readiness: Sendable {
    public enum Report: Sendable, Equatable {
        case ready
        case notReady(code: String, detail: String)
    }

    let pool: PostgresPool
    let migrator: Migrator
    /// Whose appends to watch for a log found behind them (`LogBehind`).
    var store: EventStore?
    /// The read replica, whose lag the report gives.
    var replica: ReadReplica?

    public init(pool: PostgresPool, migrator: Migrator) {
        self.pool = pool
        self.migrator = migrator
    }

    func watching(_ store: EventStore, replica: ReadReplica?) -> Readiness {
        var readiness = self
        readiness.store = store
        readiness.replica = replica
        return readiness
    }

    /// How far the replica is behind, or why that is unknown; nil without one. A replica that
    /// does not answer (within a second) leaves the server ready: its reads go to the primary.
    func replicaStatus() async -> ReplicaStatus? {
        guard let replica else { return nil }
        guard let lag = await replica.lag(within: .seconds(1)) else {
            return ReplicaStatus(status: "unavailable", lagPositions: nil, lagSeconds: nil)
        }
        return ReplicaStatus(status: "streaming", lagPositions: lag.positions, lagSeconds: lag.seconds)
    }

    public func check() async -> Report {
        if let behind = store?.logBehind {
            return .notReady(
                code: "log_behind",
                detail: "The database lost commits this server acknowledged (\(behind)); writes are refused until an operator restarts the server.")
        }
        let status: MigrationStatus
        do {
            status = try await pool.withConnection { connection in try await migrator.status(on: connection) }
        } catch {
            return .notReady(code: "database_unavailable", detail: "The database does not answer: \(error)")
        }
        if let changed = status.changed.first {
            return .notReady(
                code: "schema_mismatch", detail: "Migration \(changed.name) was changed after it was applied.")
        }
        if !status.pending.isEmpty {
            let names = status.pending.map(\.name).joined(separator: ", ")
            return .notReady(
                code: "migrations_pending", detail: "The schema is behind: \(names) pending. Run `lender migrate`.")
        }
        return .ready
    }
}

/// `/health/live`: the process answers. `/health/ready`: it can serve (see `Readiness`).
struct HealthController<Context: RequestContext>: Sendable {
    let readiness: Readiness

    struct Status: ResponseEncodable {
        var status: String
        /// With a read replica (`READ_DATABASE_URL`): whether it answers, and its lag.
        var replica: ReplicaStatus?
    }

    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .get("live", use: live)
            .get("ready", use: ready)
    }

    @Sendable func live(_ request: Request, context: Context) async throws -> Status {
        Status(status: "live", replica: nil)
    }

    @Sendable func ready(_ request: Request, context: Context) async throws -> Status {
        switch await readiness.check() {
        case .ready:
            return Status(status: "ready", replica: await readiness.replicaStatus())
        case .notReady(let code, let detail):
            throw Problem(.serviceUnavailable, code: code, title: "Not ready", detail: detail)
        }
    }
}

/// The read replica as `/health/ready` reports it.
struct ReplicaStatus: Codable, Sendable {
    /// `streaming`, or `unavailable` when it does not answer.
    var status: String
    var lagPositions: Int64?
    var lagSeconds: Double?
}
