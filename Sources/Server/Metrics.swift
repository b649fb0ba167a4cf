import Foundation
import Hummingbird
import Logging
import Metrics
import Postgres
import Projections
import Prometheus

/// The process's metrics, in Prometheus's text format at `GET /metrics`: Hummingbird's
/// requests by route and status with latency histograms, and Lender's own counters
/// (commands by type and outcome, events appended, expected-version retries, idempotent
/// replays) and gauges (the pool in use and waiting, sampled at each scrape).
public enum LenderMetrics {
    /// The one registry: swift-metrics can be bootstrapped once per process.
    public static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5),
        ]
        MetricsSystem.bootstrap(factory)
        return registry
    }()

    static var idempotentReplays: Metrics.Counter { Metrics.Counter(label: "lender_idempotent_replays_total") }
}

struct MetricsController<Context: RequestContext>: Sendable {
    let pool: PostgresPool
    let replica: ReadReplica?

    @Sendable func metrics(_ request: Request, context: Context) async throws -> Response {
        let usage = pool.usage
        Gauge(label: "lender_pool_connections_in_use").record(usage.inUse)
        Gauge(label: "lender_pool_waiting").record(usage.waiting)
        Gauge(label: "lender_pool_connections_open").record(usage.open)
        await recordProjectionLag(context.logger)
        await recordReplicaLag()
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: LenderMetrics.registry.emitToBuffer())))
    }

    /// `lender_replica_lag_events` and `lender_replica_lag_seconds`, with a read replica;
    /// `lender_replica_up` 0 while it does not answer (within a second: the scrape goes on).
    func recordReplicaLag() async {
        guard let replica else { return }
        guard let lag = await replica.lag(within: .seconds(1)) else {
            Gauge(label: "lender_replica_up").record(0)
            return
        }
        Gauge(label: "lender_replica_lag_events").record(lag.positions)
        Gauge(label: "lender_replica_lag_seconds").record(lag.seconds)
        Gauge(label: "lender_replica_up").record(1)
    }

    /// How far each projection's checkpoint is behind the log head, in events: 0 for the inline
    /// ones once their append commits; what a follower of the log would be behind by. Left as
    /// it was when the database does not answer: the metrics still come.
    func recordProjectionLag(_ logger: Logger) async {
        do {
            for lag in try await ProjectionLag.read(from: pool) {
                Gauge(label: "lender_projection_lag_events", dimensions: [("projection", lag.projection)]).record(lag.behind)
                Gauge(label: "lender_log_head_position").record(lag.head)
            }
        } catch {
            logger.warning("metrics: cannot read the projection checkpoints", metadata: ["error": "\(error)"])
        }
    }
}
