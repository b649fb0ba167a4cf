import Hummingbird
import Logging
import Postgres
import ServiceLifecycle

/// Where the server listens.
public struct ServerConfiguration: Sendable {
    public var host: String
    public var port: Int

    public init(host: String = "127.0.0.1", port: Int = 8080) {
        self.host = host
        self.port = port
    }
}

/// The request context of every route: Hummingbird's core, with a 1 MiB body limit.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage

    public init(source: Source) {
        self.coreContext = .init(source: source)
    }

    public var maxUploadSize: Int { 1024 * 1024 }
}

/// Every route, given what they depend on.
public func buildRouter(readiness: Readiness) -> Router<AppRequestContext> {
    let router = Router(context: AppRequestContext.self)
    router.add(middleware: UnexpectedErrorMiddleware())
    router.addRoutes(HealthController(readiness: readiness).endpoints, atPath: "/health")
    return router
}

/// The server, with the pool as a service that closes after the server has stopped.
public func buildApplication(
    configuration: ServerConfiguration, pool: PostgresPool, migrator: Migrator, logger: Logger
) -> some ApplicationProtocol {
    var application = Application(
        router: buildRouter(readiness: Readiness(pool: pool, migrator: migrator)),
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.host, port: configuration.port), serverName: "lender"),
        logger: logger)
    application.addServices(PoolService(pool: pool))
    return application
}

/// Keeps the pool open while the service group runs; closes it on shutdown.
/// Hummingbird shuts its HTTP server down first, so in-flight requests still have it.
struct PoolService: Service {
    let pool: PostgresPool

    func run() async throws {
        try? await gracefulShutdown()
        await pool.shutdown()
    }
}
