import Aggregates
import Crypto
import EventStore
import Foundation
import Logging
import Marketplace
import Metrics
import Postgres
import Projections

/// How webhooks are sent (`WEBHOOK_*`, read by `lender serve`).
public struct WebhookSettings: Sendable {
    /// `WEBHOOK_ALLOWED_HOSTS`: none, no webhooks.
    public var allowedHosts: WebhookHosts
    /// A post's whole time, from connecting to the answer's end (`WEBHOOK_TIMEOUT_SECONDS`).
    public var timeoutSeconds: Int
    /// Connecting's share of it.
    public var connectTimeoutSeconds: Int
    /// Tries of one event before it is dead-lettered (`WEBHOOK_MAX_ATTEMPTS`).
    public var maxAttempts: Int
    /// The first retry's wait, doubled at each try (`WEBHOOK_RETRY_SECONDS`), up to
    /// `retryMaxSeconds` (`WEBHOOK_RETRY_MAX_SECONDS`).
    public var retrySeconds: Int
    public var retryMaxSeconds: Int
    /// Endpoints sent to at once (`WEBHOOK_CONCURRENCY`): a receiver that hangs holds one
    /// turn for its timeout, never the others.
    public var concurrency: Int
    /// How often due endpoints are looked for once a round finds nothing to do.
    public var interval: Duration

    public init(
        allowedHosts: WebhookHosts = WebhookHosts([]), timeoutSeconds: Int = 10, connectTimeoutSeconds: Int = 3,
        maxAttempts: Int = 10, retrySeconds: Int = 5, retryMaxSeconds: Int = 3600, concurrency: Int = 4,
        interval: Duration = .seconds(1)
    ) {
        self.allowedHosts = allowedHosts
        self.timeoutSeconds = timeoutSeconds
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.maxAttempts = maxAttempts
        self.retrySeconds = retrySeconds
        self.retryMaxSeconds = retryMaxSeconds
        self.concurrency = concurrency
        self.interval = interval
    }
}

/// An endpoint as operators read it: no secret, and how far it has got.
public struct WebhookResource: Codable, Sendable, Hashable {
    public var id: UUID
    public var url: String
    public var types: [String]
    public var createdAt: Date
    /// Every event up to this log position was delivered, dead-lettered or not of its types.
    public var position: Int64
    /// Events answered 2xx, and when the last was.
    public var delivered: Int64
    public var deliveredAt: Date?
    /// Failed tries of the next event, the next try's time and the last failure (none while
    /// nothing fails).
    public var attempts: Int
    public var nextAttemptAt: Date?
    public var lastError: String?
    /// Events given up after the last try.
    public var deadLetters: Int
}

/// An endpoint just registered, with its secret: the one answer that shows it.
public struct CreatedWebhook: Codable, Sendable, Hashable {
    public var id: UUID
    public var url: String
    public var types: [String]
    /// Signs every delivery: `Lender-Signature: t=…,v1=hex(HMAC-SHA-256(secret, t + "." + body))`,
    /// the key this text's UTF-8 bytes.
    public var secret: String
    public var createdAt: Date
    public var position: Int64
}

/// Where one round posts an endpoint's events, and what signs them.
public struct WebhookTarget: Sendable {
    public var url: String
    public var secret: String
    public var destination: WebhookDestination

    public init(url: String, secret: String, destination: WebhookDestination) {
        self.url = url
        self.secret = secret
        self.destination = destination
    }
}

/// Posts webhooks (the server's, over HTTP). A round of one endpoint runs in `withConnection`,
/// whose connections close when it returns: none outlives its round.
public protocol WebhookPoster: Sendable {
    func withConnection(to target: WebhookTarget, _ body: (any WebhookConnection) async throws -> Void) async throws
}

/// Posts one event, signed: returns once the receiver answered 2xx; throws on any other
/// answer (a redirect too: never followed), a timeout or a failure to connect.
public protocol WebhookConnection: Sendable {
    func post(_ event: RecordedEvent) async throws
}

/// `Lender-Signature`: `t=<unix seconds>,v1=<hex HMAC-SHA-256 of "<t>.<body>">`, keyed by the
/// secret's UTF-8 bytes (Stripe's scheme: the time inside what is signed stops a replay).
public enum WebhookSignature {
    public static func header(secret: String, timestamp: Int, body: [UInt8]) -> String {
        var code = HMAC<SHA256>(key: SymmetricKey(data: Data(secret.utf8)))
        code.update(data: Data("\(timestamp).".utf8))
        code.update(data: body)
        return "t=\(timestamp),v1=\(Data(code.finalize()).hexString)"
    }
}

/// Webhooks (SPEC §12.6): the log pushed to receivers operators register, each event of an
/// endpoint's types at least once and in log order, signed with the endpoint's secret.
///
/// An endpoint keeps its position in the log. A sender claims due endpoints (`FOR UPDATE SKIP
/// LOCKED`, then a lapse time, as the outbox claims rows), so that two servers never send to
/// one at once; reads the events after its position (as stored: personal fields sealed, as
/// auditors read them); and posts them in order, moving the position after each 2xx, each on
/// its own commit: a crash sends again at most the one in flight. A failure stops the endpoint
/// for the round (the events behind it wait: order holds) and waits a doubling time; after
/// `maxAttempts` the event goes to `webhook_dead_letters` and the endpoint moves past it. An
/// operator moves the position back to replay (`rewind`).
public struct Webhooks: Sendable {
    let store: EventStore
    /// Seals the secrets at rest (derived from the server's secret, `CARD_FINGERPRINT_SECRET`).
    let sealingKey: SymmetricKey
    public let settings: WebhookSettings
    let logger: Logger
    /// Events posted to one endpoint at most a round, and log positions read past at most
    /// looking for its types.
    public var batch = 100
    public var scanWindow: Int64 = 10_000

    public init(store: EventStore, sealingKey: SymmetricKey, settings: WebhookSettings, logger: Logger) {
        self.store = store
        self.sealingKey = sealingKey
        self.settings = settings
        self.logger = logger
    }

    var pool: PostgresPool { store.pool }
    var operators: Operators { Operators(store.pool) }

    /// What the server's secret derives `sealingKey` for (`CardFingerprinter.derivedKey(for:)`).
    public static let sealingKeyPurpose = "webhook-secrets"

    /// The `types` entry that matches every event.
    public static let everyType = "*"
    /// What `types` may name: the server's event types, and `*`.
    public static let knownTypes: Set<String> = lenderEventTypes.union([Webhooks.everyType])
    public static let maxTypes = 100
    public static let maxURLLength = 2_000

    public static let notFound = DomainError(.notFound, "webhook_not_found", "No such webhook.")
    static func beyondHead(_ head: Int64) -> DomainError {
        DomainError.invalid([FieldError(field: "position", code: "beyond_head", message: "the log ends at \(head)")])
    }

    /// A claim holds an endpoint this long: longer than a post can take, renewed before each.
    var claimSeconds: Int { max(60, 3 * settings.timeoutSeconds) }

    // MARK: The operators' side

    /// What is wrong with a registration's fields, before any host is looked up.
    public static func problems(url: String?, types: [String]?, position: Int64?) -> [FieldError] {
        var problems: [FieldError] = []
        if let url {
            if url.count > maxURLLength {
                problems.append(FieldError(field: "url", code: "too_long", message: "at most \(maxURLLength) characters"))
            } else if WebhookHosts.host(of: url) == nil {
                problems += WebhookHosts.invalidURL.fields
            }
        }
        if let types {
            if types.isEmpty || types.count > maxTypes {
                problems.append(FieldError(field: "types", code: "invalid_types", message: "1 to \(maxTypes) event types, or *"))
            }
            for (index, type) in types.enumerated().prefix(maxTypes) where !knownTypes.contains(type) {
                problems.append(FieldError(field: "types[\(index)]", code: "unknown_type", message: "not an event type of the log"))
            }
        }
        problems += positionProblems(position)
        return problems
    }

    public static func positionProblems(_ position: Int64?) -> [FieldError] {
        guard let position, position < 0 else { return [] }
        return [FieldError(field: "position", code: "invalid_position", message: "a log position, 0 or more")]
    }

    /// Registers an endpoint from `position` (the log's head by default: events from now on);
    /// its secret is in this answer only. 422 `host_not_allowed` for a host the list does not
    /// allow, or that resolves where it may not go; nothing is written then.
    public func register(url: String, types: [String], from position: Int64?, by actor: UserID) async throws -> CreatedWebhook {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        _ = try await settings.allowedHosts.check(url)
        let id = UUID()
        let secret = Self.newSecret()
        var unique: [String] = []
        for type in types where !unique.contains(type) { unique.append(type) }
        let sealed = try seal(secret, for: id)
        let rows = try await pool.query(
            """
            INSERT INTO webhooks (id, url, types, secret_sealed, created_by, position)
            SELECT \(id), \(url), \(unique), \(sealed), \(actor.rawValue), coalesce(\(position)::bigint, h.position)
            FROM log_head h
            WHERE \(position)::bigint IS NULL OR \(position)::bigint <= h.position
            RETURNING created_at, position
            """)
        guard let row = rows.first else {
            let head = try await store.headPosition()
            throw Self.beyondHead(head)
        }
        return CreatedWebhook(
            id: id, url: url, types: unique, secret: secret, createdAt: try row.decode("created_at"), position: try row.decode("position"))
    }

    /// Every endpoint not deleted, oldest first.
    public func list(by actor: UserID) async throws -> [WebhookResource] {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        return try await pool.query(
            """
            SELECT \(unsafeRaw: Self.columns) FROM webhooks w WHERE w.deleted_at IS NULL ORDER BY w.created_at, w.id
            """
        ).map(Self.resource)
    }

    /// One endpoint not deleted; 404 `webhook_not_found` otherwise.
    public func endpoint(_ id: UUID) async throws -> WebhookResource {
        guard let row = try await pool.query("SELECT \(unsafeRaw: Self.columns) FROM webhooks w WHERE w.id = \(id) AND w.deleted_at IS NULL").first
        else { throw Self.notFound }
        return try Self.resource(row)
    }

    /// No more deliveries to it, from this moment: a round at it stops before its next post.
    public func delete(_ id: UUID, by actor: UserID) async throws {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        let rows = try await pool.query(
            """
            UPDATE webhooks SET deleted_at = now(), claimed_until = NULL, claimed_by = NULL
            WHERE id = \(id) AND deleted_at IS NULL RETURNING id
            """)
        guard !rows.isEmpty else { throw Self.notFound }
    }

    /// Moves the endpoint to `position` (back, to replay what a receiver lost or what was
    /// dead-lettered; or on), its failures forgotten; a round at it stops before its next post.
    /// 422 `beyond_head` past the log's end.
    public func rewind(_ id: UUID, to position: Int64, by actor: UserID) async throws -> WebhookResource {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        _ = try await endpoint(id)
        let moved = try await pool.query(
            """
            UPDATE webhooks w SET position = \(position), attempts = 0, last_error = NULL, next_attempt_at = now(),
                claimed_until = NULL, claimed_by = NULL
            FROM log_head h
            WHERE w.id = \(id) AND w.deleted_at IS NULL AND \(position) <= h.position
            RETURNING w.id
            """)
        guard !moved.isEmpty else {
            let head = try await store.headPosition()
            throw Self.beyondHead(head)
        }
        return try await endpoint(id)
    }

    private static let columns = """
        w.id, w.url, w.types, w.created_at, w.position, w.delivered, w.delivered_at, w.attempts, w.next_attempt_at, w.last_error,
        (SELECT count(*) FROM webhook_dead_letters d WHERE d.webhook_id = w.id)::int8 AS dead_letters
        """

    private static func resource(_ row: PostgresRow) throws -> WebhookResource {
        let attempts = try row.decode("attempts", as: Int.self)
        let next = try row.decode("next_attempt_at", as: Date.self)
        return WebhookResource(
            id: try row.decode("id"), url: try row.decode("url"), types: try row.decode("types"), createdAt: try row.decode("created_at"),
            position: try row.decode("position"), delivered: try row.decode("delivered"),
            deliveredAt: try row.decode("delivered_at", as: Date?.self), attempts: attempts,
            nextAttemptAt: attempts > 0 ? next : nil,
            lastError: try row.decode("last_error", as: String?.self), deadLetters: try row.decode("dead_letters"))
    }

    /// 32 random bytes, in hexadecimal (the system's generator is a cryptographic one).
    static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }).hexString
    }

    func seal(_ secret: String, for id: UUID) throws -> Data {
        try AES.GCM.seal(Data(secret.utf8), using: sealingKey, authenticating: Data("webhook:\(id.uuidString)".utf8)).combined!
    }

    func open(_ sealed: Data, for id: UUID) throws -> String {
        let box = try AES.GCM.SealedBox(combined: sealed)
        return String(decoding: try AES.GCM.open(box, using: sealingKey, authenticating: Data("webhook:\(id.uuidString)".utf8)), as: UTF8.self)
    }

    // MARK: Sending

    /// What one round did.
    public struct Round: Sendable, Hashable {
        public var delivered = 0
        public var failed = 0
        public var deadLettered = 0
        /// Endpoints moved past events not of their types.
        public var passed = 0

        public init() {}

        public var didWork: Bool { delivered + failed + deadLettered + passed > 0 }

        mutating func add(_ other: Round) {
            delivered += other.delivered
            failed += other.failed
            deadLettered += other.deadLettered
            passed += other.passed
        }
    }

    /// An endpoint this round holds.
    struct Claimed: Sendable {
        var id: UUID
        var url: String
        var types: [String]
        var sealedSecret: Data
        var position: Int64
        var attempts: Int
    }

    /// Claims the due endpoints that have events to read, and sends each its next events,
    /// `concurrency` endpoints at a time.
    public func sendDue(poster: any WebhookPoster) async throws -> Round {
        let claim = UUID()
        let claimed = try await pool.query(
            """
            WITH due AS (
                SELECT id FROM webhooks
                WHERE deleted_at IS NULL AND next_attempt_at <= now()
                  AND (claimed_until IS NULL OR claimed_until < now())
                  AND position < (SELECT position FROM log_head)
                ORDER BY next_attempt_at, id
                LIMIT \(max(1, settings.concurrency))
                FOR UPDATE SKIP LOCKED
            )
            UPDATE webhooks w SET claimed_until = now() + make_interval(secs => \(claimSeconds)), claimed_by = \(claim)
            FROM due WHERE w.id = due.id
            RETURNING w.id, w.url, w.types, w.secret_sealed, w.position, w.attempts
            """
        ).map { row in
            Claimed(
                id: try row.decode("id"), url: try row.decode("url"), types: try row.decode("types"),
                sealedSecret: try row.decode("secret_sealed"), position: try row.decode("position"), attempts: try row.decode("attempts"))
        }
        var round = Round()
        guard !claimed.isEmpty else { return round }
        // Only as many as are sent to at once: a claim never waits behind a slow receiver.
        await withTaskGroup(of: Round.self) { group in
            for endpoint in claimed {
                group.addTask { await self.deliverLogging(endpoint, claim: claim, poster: poster) }
            }
            while let done = await group.next() { round.add(done) }
        }
        return round
    }

    private func deliverLogging(_ endpoint: Claimed, claim: UUID, poster: any WebhookPoster) async -> Round {
        do {
            return try await deliver(endpoint, claim: claim, poster: poster)
        } catch {
            // Its claim lapses, and a later round takes it again.
            logger.error("a webhook's round failed", metadata: ["webhook": "\(endpoint.id)", "error": "\(error)"])
            return Round()
        }
    }

    /// One endpoint's round: its next events of its types, in order, until one fails.
    func deliver(_ endpoint: Claimed, claim: UUID, poster: any WebhookPoster) async throws -> Round {
        var round = Round()
        let head = try await store.headPosition()
        let until = min(head, endpoint.position + scanWindow)
        var events: [RecordedEvent] = []
        if until > endpoint.position { events = try await nextEvents(for: endpoint, through: until) }
        // Where the endpoint stands once these are delivered: at the last when the batch is
        // full (more of its types may follow before `until`), else at `until`.
        let through = events.count == batch ? events[events.count - 1].position : until
        guard let first = events.first else {
            if try await finish(endpoint, claim: claim, through: through), through > endpoint.position { round.passed += 1 }
            return round
        }
        let target: WebhookTarget
        do {
            // The host checked again, resolved once for the round: what it connects to is what was checked.
            let destination = try await settings.allowedHosts.check(endpoint.url)
            target = WebhookTarget(url: endpoint.url, secret: try open(endpoint.sealedSecret, for: endpoint.id), destination: destination)
        } catch {
            if try await failed(endpoint, claim: claim, event: first, passed: endpoint.position, error: error) {
                round.deadLettered += 1
            } else {
                round.failed += 1
            }
            return round
        }
        var passed = endpoint.position
        var stopped = false
        // A round gives way after half a claim: a slow receiver with a backlog lets the others
        // take their turn (`finish` puts it at the back of the queue).
        let deadline = ContinuousClock.now + .seconds(claimSeconds / 2)
        try await poster.withConnection(to: target) { connection in
            for event in events {
                guard ContinuousClock.now < deadline, !Task.isCancelled else { break }
                // Still this round's (not deleted, rewound or lapsed), for another claim's length.
                guard try await renew(endpoint.id, claim: claim) else {
                    stopped = true
                    return
                }
                do {
                    try await connection.post(event)
                } catch {
                    if try await failed(endpoint, claim: claim, event: event, passed: passed, error: error) {
                        round.deadLettered += 1
                    } else {
                        round.failed += 1
                    }
                    stopped = true
                    return
                }
                passed = event.position
                try await delivered(endpoint.id, claim: claim, at: passed)
                round.delivered += 1
            }
        }
        if !stopped { _ = try await finish(endpoint, claim: claim, through: passed == events.last?.position ? through : passed) }
        return round
    }

    /// The endpoint's next events of its types up to `until`, in order, as stored: personal
    /// fields sealed, exactly as auditors read the log (`EventStore.read`).
    private func nextEvents(for endpoint: Claimed, through until: Int64) async throws -> [RecordedEvent] {
        let everything = endpoint.types.contains(Self.everyType)
        return try await pool.query(
            """
            SELECT \(unsafeRaw: EventStore.columns) FROM events
            WHERE position > \(endpoint.position) AND position <= \(until) AND (\(everything) OR type = ANY (\(endpoint.types)))
            ORDER BY position
            LIMIT \(batch)
            """
        ).map(EventStore.recordedEvent)
    }

    private func renew(_ id: UUID, claim: UUID) async throws -> Bool {
        try await pool.query(
            """
            UPDATE webhooks SET claimed_until = now() + make_interval(secs => \(claimSeconds))
            WHERE id = \(id) AND claimed_by = \(claim) AND claimed_until > now() AND deleted_at IS NULL
            """
        ).affectedRows == 1
    }

    /// A 2xx: the endpoint's position moves to the event, committed before the next is posted.
    private func delivered(_ id: UUID, claim: UUID, at position: Int64) async throws {
        try await pool.query(
            """
            UPDATE webhooks SET position = \(position), attempts = 0, last_error = NULL, delivered = delivered + 1,
                delivered_at = now()
            WHERE id = \(id) AND claimed_by = \(claim)
            """)
        WebhookMetrics.deliveries(.delivered).increment()
    }

    /// The round's end: the endpoint at `through`, let go. False when it was not this round's.
    private func finish(_ endpoint: Claimed, claim: UUID, through: Int64) async throws -> Bool {
        try await pool.query(
            """
            UPDATE webhooks SET position = greatest(position, \(through)), claimed_until = NULL, claimed_by = NULL,
                next_attempt_at = greatest(next_attempt_at, now())
            WHERE id = \(endpoint.id) AND claimed_by = \(claim)
            """
        ).affectedRows == 1
    }

    /// A failed try of `event`, the first after `passed`: a wait, doubled at each try; after the
    /// last, a dead letter and the endpoint past it. True when it was given up.
    private func failed(_ endpoint: Claimed, claim: UUID, event: RecordedEvent, passed: Int64, error: any Error) async throws -> Bool {
        // The tries counted are the event's: one that follows a delivery this round starts at 1.
        let attempts = (passed == endpoint.position ? endpoint.attempts : 0) + 1
        let message = String("\(error)".prefix(500))
        logger.warning(
            "a webhook was not delivered",
            metadata: ["webhook": "\(endpoint.id)", "position": "\(event.position)", "attempt": "\(attempts)", "error": "\(message)"])
        guard attempts >= settings.maxAttempts else {
            let wait = min(settings.retryMaxSeconds, settings.retrySeconds << min(attempts - 1, 20))
            try await pool.query(
                """
                UPDATE webhooks SET position = \(passed), attempts = \(attempts), last_error = \(message),
                    next_attempt_at = now() + make_interval(secs => \(wait)), claimed_until = NULL, claimed_by = NULL
                WHERE id = \(endpoint.id) AND claimed_by = \(claim)
                """)
            WebhookMetrics.deliveries(.failed).increment()
            return false
        }
        try await pool.withTransaction { connection in
            let moved = try await connection.query(
                """
                UPDATE webhooks SET position = \(event.position), attempts = 0, last_error = \(message), next_attempt_at = now(),
                    claimed_until = NULL, claimed_by = NULL
                WHERE id = \(endpoint.id) AND claimed_by = \(claim)
                """)
            guard moved.affectedRows == 1 else { return }
            try await connection.query(
                """
                INSERT INTO webhook_dead_letters (webhook_id, position, event_type, attempts, last_error)
                VALUES (\(endpoint.id), \(event.position), \(event.type), \(attempts), \(message))
                """)
        }
        WebhookMetrics.deliveries(.deadLettered).increment()
        return true
    }
}

enum WebhookMetrics {
    enum Outcome: String { case delivered, failed, deadLettered = "dead_lettered" }

    static func deliveries(_ outcome: Outcome) -> Counter {
        Counter(label: "lender_webhook_deliveries_total", dimensions: [("outcome", outcome.rawValue)])
    }
}
