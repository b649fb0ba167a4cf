import EventStore
import Hummingbird
import Marketplace
import Projections
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

/// The request context of every route: Hummingbird's core, with a 1 MiB body limit, and
/// who is asking once `AuthenticationMiddleware` has said.
public struct AppRequestContext: AuthenticatedRequestContext {
    public var coreContext: CoreRequestContextStorage
    public var identity: UserID?
    public var bearerToken: String?
    public let clientAddress: String?

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.clientAddress = source.channel.remoteAddress?.ipAddress.map(ClientAddress.key)
    }

    public var maxUploadSize: Int { 1024 * 1024 }

    /// Writes JSON as it goes, without Foundation's intermediate tree (see the type).
    public var responseEncoder: StreamingJSONEncoder { StreamingJSONEncoder() }
}

/// Every route, given what they depend on.
///
/// `reads`, when given, serves the lists and profiles that may lag a moment behind the
/// primary (a streaming replica): the market, loans, profiles and countries. Everything a
/// command answers, and every read a command decides on, comes from the primary.
///
/// `heartbeat`: how long the auditors' live stream stays silent before it writes a comment.
public func buildRouter(
    readiness: Readiness, accounts: Accounts, payments: PaymentsSetup, reads: PostgresPool? = nil,
    heartbeat: Duration = .seconds(15), writeLimits: WriteLimits = WriteLimits(), allowedOrigins: Set<String> = []
) -> Router<AppRequestContext> {
    let reads = reads ?? accounts.pool
    let router = Router(context: AppRequestContext.self)
    _ = LenderMetrics.registry
    router.add(middleware: RequestLogMiddleware())
    router.add(middleware: MetricsMiddleware())
    if !allowedOrigins.isEmpty { router.add(middleware: CORSMiddleware(allowedOrigins: allowedOrigins)) }
    router.add(middleware: UnexpectedErrorMiddleware())
    router.add(middleware: QueryTextMiddleware())
    MetricsController(pool: accounts.pool).addRoutes(to: router)
    router.addRoutes(HealthController(readiness: readiness).endpoints, atPath: "/health")
    OpenAPIDocument.addRoute(to: router)
    AccountsController(accounts: accounts).addRoutes(to: router)
    let authentication = AuthenticationMiddleware<AppRequestContext>(accounts: accounts)
    let idempotency = IdempotencyMiddleware<AppRequestContext>(
        store: accounts.gateway.store, digestKey: payments.fingerprinter.derivedKey(for: "http-idempotency"))
    let processor = payments.makeProcessor(accounts.pool)
    let cardPayments = CardPayments(
        processor: processor, limits: PaymentLimits(pool: accounts.pool, perHour: payments.attemptsPerHour),
        gateway: accounts.gateway)
    let limiter = WriteLimiter(writeLimits)
    ItemsController(gateway: accounts.gateway)
        .addRoutes(to: router, authentication: authentication, idempotency: idempotency, limiter: limiter)
    MeController(gateway: accounts.gateway)
        .addRoutes(to: router, authentication: authentication, idempotency: idempotency, limiter: limiter)
    MarketController(pool: reads).addRoutes(to: router, authentication: authentication, idempotency: idempotency)
    ProfilesController(pool: reads, gateway: accounts.gateway).addRoutes(to: router, authentication: authentication)
    WalletController(
        gateway: accounts.gateway, processor: processor, fingerprinter: payments.fingerprinter, cardPayments: cardPayments)
        .addRoutes(to: router, authentication: authentication, idempotency: idempotency)
    LoansController(gateway: accounts.gateway, cardPayments: cardPayments, reads: reads)
        .addRoutes(to: router, authentication: authentication, idempotency: idempotency, limiter: limiter)
    CartController(gateway: accounts.gateway, cardPayments: cardPayments)
        .addRoutes(to: router, authentication: authentication, idempotency: idempotency, limiter: limiter)
    CountriesController(pool: reads).addRoutes(to: router, authentication: authentication)
    EventsController(store: accounts.gateway.store, heartbeat: heartbeat).addRoutes(to: router, authentication: authentication)
    return router
}

/// The server, with the pool as a service that closes after the server has stopped.
public func buildApplication(
    configuration: ServerConfiguration, pool: PostgresPool, migrator: Migrator, logger: Logger, payments: PaymentsSetup,
    bcryptCost: UInt8 = 12, readPool: PostgresPool? = nil, heartbeat: Duration = .seconds(15),
    auditCheckpoints: AuditCheckpointSchedule? = nil, connections: ConnectionLimits = ConnectionLimits(),
    writeLimits: WriteLimits = WriteLimits(), allowedOrigins: Set<String> = []
) -> some ApplicationProtocol {
    let store = EventStore(pool: pool, logger: logger, projections: lenderProjections)
    let gateway = CommandGateway(store: store, logger: logger)
    var application = Application(
        router: buildRouter(
            readiness: Readiness(pool: pool, migrator: migrator),
            accounts: Accounts(pool: pool, gateway: gateway, bcryptCost: bcryptCost), payments: payments,
            reads: readPool, heartbeat: heartbeat, writeLimits: writeLimits, allowedOrigins: allowedOrigins),
        server: connections.server(),
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.host, port: configuration.port), serverName: "lender"),
        logger: logger)
    application.addServices(PoolService(pool: pool))
    if let readPool { application.addServices(PoolService(pool: readPool)) }
    if let auditCheckpoints {
        application.addServices(AuditCheckpointService(store: store, schedule: auditCheckpoints, logger: logger))
    }
    return application
}

/// Every inline view, in the order they are applied.
public let lenderProjections: [any InlineProjection] = [
    UsersProjection(), ItemsProjection(), LoansProjection(), CartsProjection(),
]

/// Keeps the pool open while the service group runs; closes it on shutdown.
/// Hummingbird shuts its HTTP server down first, so in-flight requests still have it.
struct PoolService: Service {
    let pool: PostgresPool

    func run() async throws {
        try? await gracefulShutdown()
        await pool.shutdown()
    }
}
