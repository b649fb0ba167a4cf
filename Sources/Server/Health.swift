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

    public init(pool: PostgresPool, migrator: Migrator) {
        self.pool = pool
        self.migrator = migrator
    }

    public func check() async -> Report {
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
    }

    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .get("live", use: live)
            .get("ready", use: ready)
    }

    @Sendable func live(_ request: Request, context: Context) async throws -> Status {
        Status(status: "live")
    }

    @Sendable func ready(_ request: Request, context: Context) async throws -> Status {
        switch await readiness.check() {
        case .ready:
            return Status(status: "ready")
        case .notReady(let code, let detail):
            throw Problem(.serviceUnavailable, code: code, title: "Not ready", detail: detail)
        }
    }
}
