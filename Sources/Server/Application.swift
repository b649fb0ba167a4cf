import Aggregates
import Crypto
import Foundation
import EventStore
import Hummingbird
import Logging
import Marketplace
import Media
import Postgres
import Projections
import ServiceLifecycle
import UseCases

/// Where the server listens.
public struct ServerConfiguration: Sendable {
    public var host: String
    public var port: Int

    public init(host: String = "127.0.0.1", port: Int = 8080) {
        self.host = host
        self.port = port
    }
}

/// Every route, given what they depend on: the whole table, each path with its middleware.
///
/// `replica`, when given, serves the lists and profiles that may lag a moment behind the
/// primary (a streaming replica): the market, loans, profiles and countries, unless
/// `X-Min-Position` asks for a position it has not replayed yet. Everything a command
/// answers, and every read a command decides on, comes from the primary.
///
/// `heartbeat`: how long a live stream (the auditors', a user's feed) stays silent before it writes a comment.
public func buildRouter(
    readiness: Readiness, accounts: Accounts, payments: PaymentsSetup, replica: ReadReplica? = nil,
    heartbeat: Duration = .seconds(15), writeLimits: WriteLimits = WriteLimits(), allowedOrigins: Set<String> = [],
    today: @escaping @Sendable () -> Day = { Day(Date()) }, mail: MailSettings = MailSettings(),
    requireVerifiedEmail: Bool = false, media: MediaSettings = MediaSettings(), mediaPool: PostgresPool? = nil,
    checkpointKey: Curve25519.Signing.PublicKey? = nil, webhooks: WebhookSettings = WebhookSettings()
) -> Router<AppRequestContext> {
    let gateway = accounts.gateway
    let primary = accounts.pool
    let cardPayments = CardPayments(payments, gateway: gateway)
    let limiter = WriteLimiter(writeLimits)
    let accountRoutes = AccountsController(accounts: accounts, limiter: limiter, today: today)
    let recovery = RecoveryController(accounts: accounts, mail: mail)
    let payouts = PayoutsController(
        payouts: Payouts(
            gateway: gateway, processor: payments.makePayoutProcessor(primary), verifyAboveCents: payments.payoutVerifyAboveCents),
        view: PayoutsView(primary))
    let notifications = NotificationsController(
        settings: NotificationSettings(pool: primary), devices: Devices(pool: primary),
        unsubscribe: mail.unsubscribe ?? UnsubscribeTokens(key: payments.fingerprinter.derivedKey(for: "mail-unsubscribe")))
    let bidding = Bidding(gateway: gateway, payments: cardPayments, fees: payments.rentalFees)
    let items = ItemsController(
        gateway: gateway, bidding: bidding, items: ItemsView(primary), auditors: Auditors(primary), today: today)
    let savedSearches = SavedSearchesController(searches: SavedSearches(pool: primary))
    let bookings = BookingsController(
        gateway: gateway, commands: bidding.commands, bookings: BookingsView(primary), conversations: ConversationsView(primary),
        today: today)
    let market = MarketController(items: Replicated(ItemsView.init, primary: primary, replica: replica))
    let profiles = ProfilesController(
        profiles: Profiles(gateway: gateway), primary: ProfilesView(primary),
        reads: Replicated(ProfilesView.init, primary: primary, replica: replica), conversations: ConversationsView(primary),
        notifications: notifications, savedSearches: SavedSearches(pool: primary), reports: ReportsView(primary))
    let wallet = WalletController(
        wallet: Wallet(gateway: gateway, payments: cardPayments, fingerprinter: payments.fingerprinter), today: today)
    let loans = LoansController(
        gateway: gateway, repayments: Repayments(gateway: gateway, payments: cardPayments), loans: LoansView(primary),
        lists: Replicated(LoansView.init, primary: primary, replica: replica), today: today)
    let cart = CartController(carts: Carts(gateway: gateway, payments: cardPayments), view: CartView(primary), today: today)
    let countries = CountriesController(countries: Replicated(CountriesView.init, primary: primary, replica: replica))
    let events = EventsController(store: gateway.store, accounts: accounts, auditors: Auditors(primary), heartbeat: heartbeat)
    let photos = PhotosController(
        photos: PhotoLibrary(gateway: gateway, worker: media.worker, quotaBytes: media.quotaBytes, reads: mediaPool),
        items: ItemsView(primary), loans: LoansView(primary), profiles: ProfilesView(primary),
        streams: MediaStreams(perAddress: media.streamsPerAddress))
    let conversations = ConversationsController(
        gateway: gateway, bidding: items.bidding, items: ItemsView(primary), views: ConversationsView(primary),
        hub: FeedHub(pool: primary, logger: gateway.store.logger, heartbeat: heartbeat), accounts: accounts, heartbeat: heartbeat)

    let moderation = Moderation(
        commands: ItemCommands(gateway: gateway, processor: payments.makeProcessor(primary)), sessions: accounts.sessions)
    let safety = SafetyController(
        reports: Reports(gateway: gateway), view: ReportsView(primary), moderation: moderation,
        items: ItemsView(primary), loans: LoansView(primary), bookings: BookingsView(primary),
        conversations: ConversationsView(primary), today: today)
    let adminReads = AdminReads(view: AdminView(primary), reports: ReportsView(primary), accounts: accounts)
    let adminRoutes = AdminController(reads: adminReads, moderation: moderation)
    let exportRoutes = ExportsController(exports: Exports(primary))
    let readiness = readiness.watching(gateway.store, replica: replica)
    let desk = DeskController(
        pages: .bundled,
        sessions: DeskSessions(
            accounts: accounts, operators: Operators(primary), csrfKey: payments.fingerprinter.derivedKey(for: "desk-csrf")),
        reads: adminReads, reports: Reports(gateway: gateway), reportsView: ReportsView(primary), moderation: moderation,
        items: ItemsView(primary), bookings: BookingsView(primary), store: gateway.store, readiness: readiness,
        trustedKey: checkpointKey, audits: LastMoneyAudit(), today: today, logger: gateway.store.logger)

    let webhookRoutes = WebhooksController(
        webhooks: Webhooks(
            store: gateway.store, sealingKey: payments.fingerprinter.derivedKey(for: Webhooks.sealingKeyPurpose),
            settings: webhooks, logger: gateway.store.logger))

    _ = LenderMetrics.registry
    let router = Router(context: AppRequestContext.self, options: .autoGenerateHeadEndpoints)
    router.add(middleware: RequestLogMiddleware())
    router.add(middleware: MetricsMiddleware())
    if !allowedOrigins.isEmpty { router.add(middleware: CORSMiddleware(allowedOrigins: allowedOrigins)) }
    router.add(middleware: ReadCachingMiddleware())
    router.add(middleware: UnexpectedErrorMiddleware())
    router.add(middleware: QueryTextMiddleware())

    // Operators.
    router.get("/metrics", use: MetricsController(pool: primary, replica: replica).metrics)
    router.addRoutes(
        HealthController(readiness: readiness).endpoints, atPath: "/health")
    router.get("/openapi.json") { request, context in try await OpenAPIDocument.serve(request, context: context) }
    // Images, for <img src>: no token (the digest is the name, and it is public wherever it is shown).
    router.get("/v1/media/:digest") { request, context in try await photos.media(request, context: context) }

    // The operator's desk (SPEC §12.6): pages, signed in with a cookie of its own.
    desk.addRoutes(to: router)

    // Anyone: an account, a session.
    router.post("/v1/users", use: accountRoutes.register)
    router.post("/v1/sessions", use: accountRoutes.login)
    router.post("/v1/password-resets", use: recovery.requestReset)
    router.post("/v1/password-resets/confirm", use: recovery.confirmReset)
    // A mail's unsubscribe link: signed, no login (RFC 8058).
    router.get("/v1/unsubscribe", use: notifications.page)
    router.post("/v1/unsubscribe", use: notifications.unsubscribe)

    // A signed-in user (401 without a live token). Only here is a token looked up: health,
    // metrics and the public routes answer without the database's sessions.
    let signedIn = router.group("/v1").add(middleware: BearerAuthenticator(accounts: accounts))
        .add(middleware: SuspendedUsersRead())
        .group(context: UserContext.self)
    signedIn.delete("sessions/current", use: accountRoutes.logout)
    signedIn.get("me/export", use: profiles.export)
    signedIn.delete("me", use: accountRoutes.close)
    signedIn.put("me/password", use: recovery.changePassword)
    signedIn.post("me/email-verification", use: recovery.requestVerification)
    signedIn.post("me/email-verification/confirm", use: recovery.confirmVerification)
    signedIn.get("me/feed", use: conversations.feed)
    signedIn.get("me/notification-settings", use: notifications.show)
    signedIn.get("me/devices", use: notifications.list)
    signedIn.get("me/saved-searches", use: savedSearches.list)
    signedIn.get("me/feed/stream", use: conversations.feedStream)
    signedIn.get("users/:userID/reviews", use: conversations.userReviews)
    signedIn.get("items/:itemID/reviews", use: conversations.itemReviews)
    signedIn.get("bids/:bidID/messages", use: conversations.messages)

    // Reads a replica may serve (`X-Min-Position`, `X-Read-From`).
    let replicaReads = signedIn.group().add(middleware: ReadPlacementMiddleware(replica: replica))
    replicaReads.get("me", use: profiles.me)
    replicaReads.get("me/posts", use: profiles.posts)
    replicaReads.get("me/bids", use: profiles.bids)
    replicaReads.get("me/bids/received", use: profiles.bidsReceived)
    replicaReads.get("me/loans", use: profiles.loans)
    replicaReads.get("users/:userID", use: profiles.user)
    replicaReads.get("countries", use: countries.list)
    replicaReads.get("market", use: market.market)
    replicaReads.get("market/clusters", use: market.clusters)
    replicaReads.get("market/facets", use: market.facets)
    replicaReads.get("loans", use: loans.list)

    // Commands: a repeated `Idempotency-Key` answers again; writes count against hourly limits.
    let user = signedIn.group().add(
        middleware: IdempotencyMiddleware(
            store: gateway.store, digestKey: payments.fingerprinter.derivedKey(for: "http-idempotency")))
    var postings = user.group().add(middleware: WriteLimitMiddleware(limiter: limiter, kind: .postings))
    var bids = user.group().add(middleware: WriteLimitMiddleware(limiter: limiter, kind: .bids))
    if requireVerifiedEmail {
        postings = postings.add(middleware: VerifiedEmailMiddleware(gateway: gateway))
        bids = bids.add(middleware: VerifiedEmailMiddleware(gateway: gateway))
    }
    let changes = user.group().add(middleware: WriteLimitMiddleware(limiter: limiter, kind: .changes))

    changes.patch("me", use: profiles.updateProfile)
    changes.post("me/blocks", use: profiles.block)
    changes.patch("me/notification-settings", use: notifications.change)
    changes.post("me/devices", use: notifications.register)
    changes.delete("me/devices/:token", use: notifications.remove)
    changes.post("me/saved-searches", use: savedSearches.save)
    changes.delete("me/saved-searches/:searchID", use: savedSearches.delete)
    changes.delete("me/blocks/:userID", use: profiles.unblock)
    user.post("me/cards", use: wallet.addCard)
    user.delete("me/cards/:cardID", use: wallet.removeCard)
    user.post("me/deposits", use: wallet.deposit)
    signedIn.get("me/balance-history", use: wallet.balanceHistory)
    user.put("me/payout-method", use: payouts.setMethod)
    user.post("me/payouts", use: payouts.request)
    signedIn.get("me/payouts", use: payouts.list)

    postings.post("rentals", use: items.postRental)
    postings.post("requests", use: items.postRequest)
    user.get("items/:itemID", use: items.item)
    changes.patch("items/:itemID", use: items.revise)
    changes.post("items/:itemID/withdraw", use: items.withdraw)
    changes.post("items/:itemID/complete", use: items.complete)
    changes.post("items/:itemID/relist", use: items.relist)
    user.get("items/:itemID/availability", use: bookings.availability)
    changes.post("items/:itemID/blackouts", use: bookings.addBlackout)
    changes.delete("items/:itemID/blackouts/:blackoutID", use: bookings.removeBlackout)
    user.get("bookings/:bookingID", use: bookings.booking)
    user.get("me/bookings", use: bookings.myBookings)
    changes.post("bookings/:bookingID/complete", use: bookings.complete)
    changes.post("bookings/:bookingID/cancel", use: bookings.cancel)
    changes.post("bookings/:bookingID/reviews", use: bookings.review)
    changes.post("bookings/:bookingID/claims", use: bookings.claim)
    changes.post("bookings/:bookingID/disputes", use: bookings.dispute)
    bids.post("items/:itemID/bids", use: items.placeBid)
    user.get("items/:itemID/bids", use: items.bids)
    user.get("items/:itemID/bids/history", use: items.bidHistory)
    changes.post("bids/:bidID/approve", use: items.approveBid)
    changes.post("bids/:bidID/withdraw", use: items.withdrawBid)
    changes.post("bids/:bidID/reject", use: items.rejectBid)
    changes.post("items/:itemID/reviews", use: conversations.review)
    changes.post("bids/:bidID/messages", use: conversations.sendMessage)

    // Photos: bodies of up to 10 MiB, so outside the idempotency middleware's digest of the
    // body; a repeat is harmless anyway (the same image is the same digest, added once).
    // Uploads count in a bucket of their own, removals as changes.
    let uploads = signedIn.group().add(middleware: WriteLimitMiddleware(limiter: limiter, kind: .photos))
    let photoChanges = signedIn.group().add(middleware: WriteLimitMiddleware(limiter: limiter, kind: .changes))
    uploads.post("items/:itemID/photos", use: photos.addToItem)
    photoChanges.delete("items/:itemID/photos/:digest", use: photos.removeFromItem)
    uploads.post("loans/:loanID/photos", use: photos.addToLoan)
    photoChanges.delete("loans/:loanID/photos/:digest", use: photos.removeFromLoan)
    uploads.put("me/photo", use: photos.setProfilePhoto)
    photoChanges.delete("me/photo", use: photos.removeProfilePhoto)

    postings.post("loans", use: loans.postLoan)
    user.get("loans/:loanID", use: loans.loan)
    user.post("loans/:loanID/repayments", use: loans.recordRepayment)

    changes.get("cart", use: cart.show)
    changes.delete("cart", use: cart.clear)
    changes.post("cart/items", use: cart.add)
    changes.patch("cart/items/:loanID", use: cart.change)
    changes.delete("cart/items/:loanID", use: cart.remove)
    changes.post("cart/checkout", use: cart.checkout)

    // Trust and safety (SPEC §12.5): reports by anyone signed in, acts by operators alone
    // (403 `not_operator`), each an event whose actor is the operator.
    changes.post("reports", use: safety.file)
    signedIn.get("me/reports", use: safety.mine)
    // The role first, then the idempotency key: a stranger's key or body is never looked at.
    let operators = signedIn.group().add(middleware: OperatorsOnly(operators: Operators(primary)))
    operators.get("admin/reports", use: safety.list)
    operators.get("admin/users", use: adminRoutes.users)
    operators.get("admin/users/:userID", use: adminRoutes.user)
    operators.get("admin/bookings", use: adminRoutes.bookings)
    // Webhooks (SPEC §12.6): settings of the server, not events, so not behind idempotency keys.
    operators.get("admin/webhooks", use: webhookRoutes.list)
    operators.post("admin/webhooks", use: webhookRoutes.register)
    operators.delete("admin/webhooks/:webhookID", use: webhookRoutes.delete)
    operators.post("admin/webhooks/:webhookID/position", use: webhookRoutes.rewind)
    // CSV files for an accountant (SPEC §12.6), streamed batch by batch.
    operators.get("admin/exports/ledger.csv", use: exportRoutes.ledger)
    operators.get("admin/exports/users.csv", use: exportRoutes.users)
    operators.get("admin/exports/bookings.csv", use: exportRoutes.bookings)
    let admin = operators.group().add(
        middleware: IdempotencyMiddleware(
            store: gateway.store, digestKey: payments.fingerprinter.derivedKey(for: "http-idempotency")))
    admin.post("admin/reports/:reportID/resolve", use: safety.resolve)
    admin.post("admin/items/:itemID/takedown", use: safety.takeDown)
    admin.post("admin/loans/:loanID/takedown", use: safety.takeDownLoan)
    admin.post("admin/messages/:messageID/hide", use: safety.hideMessage)
    admin.post("admin/reviews/:reviewID/hide", use: safety.hideReview)
    admin.post("admin/bookings/:bookingID/resolve", use: safety.resolveBooking)
    admin.post("admin/bookings/:bookingID/cancel", use: safety.cancelBooking)
    admin.post("admin/users/:userID/suspend", use: safety.suspend)
    admin.post("admin/users/:userID/reinstate", use: safety.reinstate)
    admin.post("admin/users/:userID/verify-identity", use: adminRoutes.verifyIdentity)

    // Auditors only (403 for anyone else).
    let auditors = signedIn.group().add(middleware: AuditorsOnly(auditors: items.auditors))
    auditors.get("events", use: events.page)
    auditors.get("events/stream", use: events.stream)
    auditors.get("audit/checkpoints", use: events.checkpoints)
    return router
}

/// The server, with the pool as a service that closes after the server has stopped.
///
/// `masterKeys` wrap every person's data key (`DATA_KEY_FILE`, read again from
/// `masterKeyFile` when a key wrapped by a newer master key turns up).
/// `sessionCache`: how long a checked session is taken on trust (zero: never); a logout
/// anywhere ends it everywhere at once (`SessionAnnouncements`).
public func buildApplication(
    configuration: ServerConfiguration, pool: PostgresPool, migrator: Migrator, logger: Logger, payments: PaymentsSetup,
    bcryptCost: UInt8 = 12, readPool: PostgresPool? = nil, heartbeat: Duration = .seconds(15),
    auditCheckpoints: AuditCheckpointSchedule? = nil, connections: ConnectionLimits = ConnectionLimits(),
    writeLimits: WriteLimits = WriteLimits(), allowedOrigins: Set<String> = [], sessionCache: Duration = .seconds(10),
    masterKeys: MasterKeys, masterKeyFile: String? = nil, today: @escaping @Sendable () -> Day = { Day(Date()) },
    jobsEvery: Duration? = nil, searchAlertsEvery: Duration? = nil, mail: MailSettings = MailSettings(),
    delivery: MailDelivery? = nil,
    requireVerifiedEmail: Bool = false, media: MediaSettings = MediaSettings(),
    checkpointKey: Curve25519.Signing.PublicKey? = nil, webhooks: WebhookSettings = WebhookSettings()
) -> some ApplicationProtocol {
    var mail = mail
    mail.unsubscribe = UnsubscribeTokens(key: payments.fingerprinter.derivedKey(for: "mail-unsubscribe"))
    let dataKeys = DataKeys(pool: pool, masters: masterKeys, file: masterKeyFile)
    let store = EventStore(
        pool: pool, logger: logger, projections: lenderProjections,
        personalData: PersonalData(keys: dataKeys, fields: lenderPersonalFields))
    let gateway = CommandGateway(store: store, logger: logger)
    let sessions = SessionCache(lifetime: sessionCache)
    // Images are read on connections of their own (`PhotoLibrary.reads`).
    let mediaPool = PostgresPool(configuration: pool.configuration, options: .init(size: media.poolSize), logger: logger)
    var application = Application(
        router: buildRouter(
            readiness: Readiness(pool: pool, migrator: migrator),
            accounts: {
                var accounts = Accounts(pool: pool, gateway: gateway, bcryptCost: bcryptCost, sessions: sessions)
                accounts.processor = payments.makeProcessor(pool)
                return accounts
            }(), payments: payments,
            replica: readPool.map { ReadReplica(pool: $0, primary: pool, logger: logger) }, heartbeat: heartbeat, writeLimits: writeLimits, allowedOrigins: allowedOrigins,
            today: today, mail: mail, requireVerifiedEmail: requireVerifiedEmail, media: media, mediaPool: mediaPool,
            checkpointKey: checkpointKey ?? auditCheckpoints?.signingKey.publicKey, webhooks: webhooks),
        server: connections.server(),
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.host, port: configuration.port), serverName: "lender"),
        logger: logger)
    application.addServices(PoolService(pool: pool), PoolService(pool: mediaPool))
    if sessionCache > .zero {
        application.addServices(SessionAnnouncements(sessions: sessions, configuration: pool.configuration, logger: logger))
    }
    if let readPool { application.addServices(PoolService(pool: readPool)) }
    if let auditCheckpoints {
        application.addServices(AuditCheckpointService(store: store, schedule: auditCheckpoints, logger: logger))
    }
    if let delivery {
        var outbox = Outbox(pool: pool, settings: mail, logger: logger)
        outbox.backoffSeconds = delivery.retrySeconds
        application.addServices(
            OutboxService(
                outbox: outbox, notifier: Notifier(pool: pool, mail: mail), pusher: SandboxPush(pool: pool), delivery: delivery,
                logger: logger))
    }
    // Webhooks out (SPEC §12.6), only where some host may receive them.
    if !webhooks.allowedHosts.isEmpty {
        application.addServices(
            WebhookService(
                webhooks: Webhooks(
                    store: store, sealingKey: payments.fingerprinter.derivedKey(for: Webhooks.sealingKeyPurpose),
                    settings: webhooks, logger: logger),
                poster: HTTPWebhookPoster(settings: webhooks, logger: logger), logger: logger))
    }
    if let jobsEvery {
        let commands = ItemCommands(gateway: gateway, processor: payments.makeProcessor(pool))
        application.addServices(JobsService(jobs: Jobs(commands: commands), interval: jobsEvery, logger: logger))
    }
    if let searchAlertsEvery {
        let commands = ItemCommands(gateway: gateway, processor: payments.makeProcessor(pool))
        application.addServices(SearchAlertsService(alerts: SearchAlerts(commands: commands), interval: searchAlertsEvery, logger: logger))
    }
    return application
}

/// How photos are decoded, stored and served (issue 48).
public struct MediaSettings: Sendable {
    /// The child process uploads are decoded in (nil: in this process, unbounded in time).
    public var worker: ImageWorker?
    /// The bytes of stored images one user may have uploaded (`MEDIA_QUOTA_MIB`).
    public var quotaBytes: Int
    /// Connections for reading images, apart from the commands' (`MEDIA_POOL_SIZE`).
    public var poolSize: Int
    /// Images sent to one client address at once (`MEDIA_STREAMS_PER_ADDRESS`).
    public var streamsPerAddress: Int

    public init(
        worker: ImageWorker? = nil, quotaBytes: Int = PhotoLibrary.defaultQuotaBytes, poolSize: Int = 2,
        streamsPerAddress: Int = 8
    ) {
        self.worker = worker
        self.quotaBytes = quotaBytes
        self.poolSize = poolSize
        self.streamsPerAddress = streamsPerAddress
    }
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
