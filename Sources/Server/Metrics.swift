import Foundation
import Hummingbird
import Metrics
import Postgres
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

    /// A command by its case name (`postRental`, never its fields).
    static func command(_ command: Any, outcome: String) {
        self.command(named: Mirror(reflecting: command).children.first?.label ?? String(describing: command), outcome: outcome)
    }

    static func command(named name: String, outcome: String) {
        Counter(label: "lender_commands_total", dimensions: [("command", name), ("outcome", outcome)]).increment()
    }

    static let retries = Counter(label: "lender_expected_version_retries_total")
    static let idempotentReplays = Counter(label: "lender_idempotent_replays_total")
}

struct MetricsController<Context: RequestContext>: Sendable {
    let pool: PostgresPool

    func addRoutes(to router: Router<Context>) {
        router.get("/metrics") { _, _ in
            let usage = pool.usage
            Gauge(label: "lender_pool_connections_in_use").record(usage.inUse)
            Gauge(label: "lender_pool_waiting").record(usage.waiting)
            Gauge(label: "lender_pool_connections_open").record(usage.open)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: LenderMetrics.registry.emitToBuffer())))
        }
    }
}
