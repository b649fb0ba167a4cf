import ArgumentParser
import Crypto
import EventStore
import Foundation
import Media
import Hummingbird
import Logging
import Mail
import Marketplace
import Payments
import Postgres
import Server
import UseCases

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the HTTP API (HOST, PORT, DATABASE_URL, SERVER_DATABASE_URL, READ_DATABASE_URL, DATA_KEY_FILE, LOG_LEVEL from the environment).")

    @OptionGroup var database: DatabaseOptions

    @Flag(help: "Apply pending migrations before serving, instead of refusing to start.")
    var migrate = false

    @Option(help: "Connections in the database pool (default: $DATABASE_POOL_SIZE, else 8).")
    var poolSize: Int?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let logger = Logs.bootstrap()
        let host = environment["HOST"] ?? "127.0.0.1"
        guard let port = Int(environment["PORT"] ?? "8080"), (0...65535).contains(port) else {
            throw ValidationError("PORT must be a number from 0 to 65535.")
        }
        let size = poolSize ?? environment["DATABASE_POOL_SIZE"].flatMap(Int.init) ?? 8
        guard let bcryptCost = UInt8(environment["BCRYPT_COST"] ?? "12"), (4...31).contains(bcryptCost) else {
            throw ValidationError("BCRYPT_COST must be a number from 4 to 31.")
        }
        let payments = try Self.paymentsSetup(environment)
        guard Failpoints.unknown.isEmpty else {
            throw ValidationError(
                "LENDER_FAILPOINTS names unknown points: \(Failpoints.unknown.joined(separator: ", ")) (known: "
                    + Failpoints.Point.allCases.map(\.rawValue).joined(separator: ", ") + ").")
        }
        let auditCheckpoints = try auditCheckpointSchedule(environment)
        guard !MailTemplates.bundled.names.isEmpty else {
            throw CommandFailure(
                "The mail templates are missing: deploy lender_Mail.resources beside the lender executable, as the release has it.")
        }
        let keyFile = try DataKeyOptions.file(environment)
        let masterKeys = try MasterKeys(file: keyFile)
        let migrator = try database.migrator(logger: logger)
        let owner = try database.configuration()
        try await checkSchema(owner, migrator: migrator, logger: logger)

        // The server runs as a role that may read and append to the log, never rewrite it: on
        // the owner's connections with SET ROLE, or, with SERVER_DATABASE_URL, logged in as a
        // role that is not the owner at all, so that no RESET ROLE can give the owner back.
        var configuration = owner
        if let url = environment["SERVER_DATABASE_URL"], !url.isEmpty {
            configuration = try PostgresConfiguration(url)
        }
        let role = environment["DATABASE_ROLE"] ?? "lender_app"
        configuration.role = role.isEmpty ? nil : role
        let pool = PostgresPool(configuration: configuration, options: .init(size: size), logger: logger)
        // Lists and profiles from a replica, when there is one (see docs/SCALING.md).
        var readPool: PostgresPool?
        if let url = environment["READ_DATABASE_URL"], !url.isEmpty {
            var replica = try PostgresConfiguration(url)
            replica.role = configuration.role
            // Several hosts here are replicas to share the reads, standbys all.
            replica.targetSessionAttributes = nil
            readPool = PostgresPool(configuration: replica, options: .init(size: size), logger: logger)
        }
        // Addresses the first release kept in clear become digests before anyone registers.
        let keys = DataKeys(pool: pool, masters: masterKeys, file: keyFile)
        let moved = try await EmailIndex(keys: keys).moveClaims(pool)
        if moved > 0 { logger.info("moved e-mail claims into the blind index", metadata: ["count": "\(moved)"]) }
        // Keys a server made under the old master key while a rotation went on.
        let rewrapped = try await keys.rewrapAll(onlyStale: true)
        if rewrapped > 0 { logger.info("rewrapped data keys under the current master key", metadata: ["count": "\(rewrapped)"]) }
        let application = buildApplication(
            configuration: ServerConfiguration(host: host, port: port), pool: pool, migrator: migrator, logger: logger,
            payments: payments, bcryptCost: bcryptCost, readPool: readPool, auditCheckpoints: auditCheckpoints,
            connections: try connectionLimits(environment), writeLimits: try writeLimits(environment),
            allowedOrigins: Set(
                (environment["ALLOWED_ORIGINS"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                    .filter { !$0.isEmpty }),
            sessionCache: .seconds(try number(environment, "SESSION_CACHE_SECONDS", 10, 0...300)), masterKeys: masterKeys,
            masterKeyFile: keyFile, jobsEvery: try jobsEvery(environment), searchAlertsEvery: try searchAlertsEvery(environment), mail: Self.mailSettings(environment, port: port),
            delivery: try Self.delivery(environment), requireVerifiedEmail: try Self.flag(environment, "REQUIRE_VERIFIED_EMAIL"),
            media: try mediaSettings(environment), checkpointKey: try checkpointKey(environment),
            webhooks: try webhookSettings(environment))
        try await application.runService()
    }

    /// `WRITE_LIMIT_POSTINGS_PER_HOUR` (120), `WRITE_LIMIT_BIDS_PER_HOUR` (600) and
    /// `WRITE_LIMIT_CHANGES_PER_HOUR` (1200), `WRITE_LIMIT_PHOTOS_PER_HOUR` (120) per user and
    /// `WRITE_LIMIT_REGISTRATIONS_PER_HOUR` (60) per client address; 0: none.
    private func writeLimits(_ environment: [String: String]) throws -> WriteLimits {
        let perHour = 0...1_000_000
        return WriteLimits(
            postingsPerHour: try number(environment, "WRITE_LIMIT_POSTINGS_PER_HOUR", 120, perHour),
            bidsPerHour: try number(environment, "WRITE_LIMIT_BIDS_PER_HOUR", 600, perHour),
            changesPerHour: try number(environment, "WRITE_LIMIT_CHANGES_PER_HOUR", 1200, perHour),
            photosPerHour: try number(environment, "WRITE_LIMIT_PHOTOS_PER_HOUR", 120, perHour),
            registrationsPerHour: try number(environment, "WRITE_LIMIT_REGISTRATIONS_PER_HOUR", 60, perHour))
    }

    /// Uploads decoded by this executable's `media decode` under `IMAGE_DECODE_CPU_SECONDS` (5)
    /// and `IMAGE_DECODE_TIMEOUT_SECONDS` (10); `MEDIA_QUOTA_MIB` (1024) per user;
    /// `MEDIA_POOL_SIZE` (2) connections for reading images; `MEDIA_STREAMS_PER_ADDRESS` (8).
    private func mediaSettings(_ environment: [String: String]) throws -> MediaSettings {
        guard let executable = ImageWorker.ownExecutable else {
            throw CommandFailure("Cannot find this executable (/proc/self/exe) to decode photos in a child process.")
        }
        return MediaSettings(
            worker: ImageWorker(
                executable: executable, cpuSeconds: try number(environment, "IMAGE_DECODE_CPU_SECONDS", 5, 1...600),
                timeoutMilliseconds: 1000 * (try number(environment, "IMAGE_DECODE_TIMEOUT_SECONDS", 10, 1...600))),
            quotaBytes: (try number(environment, "MEDIA_QUOTA_MIB", 1024, 1...10_000_000)) << 20,
            poolSize: try number(environment, "MEDIA_POOL_SIZE", 2, 1...64),
            streamsPerAddress: try number(environment, "MEDIA_STREAMS_PER_ADDRESS", 8, 1...10_000))
    }

    /// `WEBHOOK_ALLOWED_HOSTS` (hosts by name or address, `*.example.com`, or `*` for any
    /// public host; commas between; none: no webhooks), `WEBHOOK_TIMEOUT_SECONDS` (10, a
    /// post's whole time), `WEBHOOK_MAX_ATTEMPTS` (10 tries of an event before its dead letter),
    /// `WEBHOOK_RETRY_SECONDS` (5, the first retry's wait, doubled each try) up to
    /// `WEBHOOK_RETRY_MAX_SECONDS` (3600), `WEBHOOK_CONCURRENCY` (4 endpoints sent to at once).
    private func webhookSettings(_ environment: [String: String]) throws -> WebhookSettings {
        WebhookSettings(
            allowedHosts: WebhookHosts(list: environment["WEBHOOK_ALLOWED_HOSTS"] ?? ""),
            timeoutSeconds: try number(environment, "WEBHOOK_TIMEOUT_SECONDS", 10, 1...300),
            maxAttempts: try number(environment, "WEBHOOK_MAX_ATTEMPTS", 10, 1...100),
            retrySeconds: try number(environment, "WEBHOOK_RETRY_SECONDS", 5, 1...86_400),
            retryMaxSeconds: try number(environment, "WEBHOOK_RETRY_MAX_SECONDS", 3600, 1...604_800),
            concurrency: try number(environment, "WEBHOOK_CONCURRENCY", 4, 1...64))
    }

    /// The key the desk verifies checkpoints with: `AUDIT_PUBLIC_KEY_FILE` (base64), else the
    /// signing key's (`AUDIT_SIGNING_KEY_FILE` or `.local/audit-signing-key`), else none.
    private func checkpointKey(_ environment: [String: String]) throws -> Curve25519.Signing.PublicKey? {
        if let path = environment["AUDIT_PUBLIC_KEY_FILE"], !path.isEmpty {
            do {
                return try LogCheckpoint.publicKey(base64: try AuditKeys.read(path))
            } catch let error as CheckpointError {
                throw ValidationError("AUDIT_PUBLIC_KEY_FILE \(path): \(error)")
            }
        }
        return (try? AuditKeys.signingKey())?.publicKey
    }

    /// `HTTP_HEADER_TIMEOUT` (10 s), `HTTP_IDLE_TIMEOUT` (60 s), `HTTP_WRITE_TIMEOUT` (30 s) and
    /// `HTTP_MAX_CONNECTIONS_PER_ADDRESS` (128).
    private func connectionLimits(_ environment: [String: String]) throws -> ConnectionLimits {
        ConnectionLimits(
            headerTimeout: .seconds(try number(environment, "HTTP_HEADER_TIMEOUT", 10, 1...600)),
            idleTimeout: .seconds(try number(environment, "HTTP_IDLE_TIMEOUT", 60, 1...3600)),
            writeTimeout: .seconds(try number(environment, "HTTP_WRITE_TIMEOUT", 30, 1...3600)),
            maxPerAddress: try number(environment, "HTTP_MAX_CONNECTIONS_PER_ADDRESS", 128, 1...1_000_000))
    }

    /// A whole number from the environment, `fallback` when unset, refused outside `range`.
    private func number(_ environment: [String: String], _ name: String, _ fallback: Int, _ range: ClosedRange<Int>) throws -> Int {
        guard let text = environment[name], !text.isEmpty else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            throw ValidationError("\(name) must be a number from \(range.lowerBound) to \(range.upperBound).")
        }
        return value
    }

    /// `JOBS_EVERY` (`15m` by default): run the jobs that often; `off` leaves them to
    /// `lender jobs run` (from cron, say).
    private func jobsEvery(_ environment: [String: String]) throws -> Duration? {
        try Self.every("JOBS_EVERY", environment, default: "15m")
    }

    /// `SEARCH_ALERTS_EVERY` (`1s` by default): tell saved searches of new postings that
    /// often; `off` leaves it to `lender searches alert`.
    private func searchAlertsEvery(_ environment: [String: String]) throws -> Duration? {
        try Self.every("SEARCH_ALERTS_EVERY", environment, default: "1s")
    }

    /// A period from `name` (seconds, or a number with s, m or h), `fallback` when unset; nil for `off`.
    static func every(_ name: String, _ environment: [String: String], default fallback: String) throws -> Duration? {
        let text = environment[name].flatMap { $0.isEmpty ? nil : $0 } ?? fallback
        if text == "off" { return nil }
        guard let seconds = Self.seconds(text) else {
            throw ValidationError("\(name) takes seconds, or a number with s, m or h (like \(fallback)), or off.")
        }
        return .seconds(seconds)
    }

    /// Seconds from `90`, `90s`, `15m` or `1h`; nil for anything else.
    static func seconds(_ text: String) -> Int? {
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600]
        let unit = text.last.flatMap { units[$0] }
        guard let count = Int(unit == nil ? text : String(text.dropLast())), count > 0, count <= 86_400 * 366 else { return nil }
        return count * (unit ?? 1)
    }

    /// `AUDIT_CHECKPOINT_EVERY` (seconds, or a number with s, m or h): sign a checkpoint that
    /// often, with the key of `AUDIT_SIGNING_KEY_FILE`. Unset: only `lender audit checkpoint` signs.
    private func auditCheckpointSchedule(_ environment: [String: String]) throws -> AuditCheckpointSchedule? {
        guard let text = environment["AUDIT_CHECKPOINT_EVERY"], !text.isEmpty else { return nil }
        guard let seconds = Self.seconds(text) else {
            throw ValidationError("AUDIT_CHECKPOINT_EVERY takes seconds, or a number with s, m or h (like 1h).")
        }
        return AuditCheckpointSchedule(signingKey: try AuditKeys.signingKey(), interval: .seconds(seconds))
    }

    /// The processor (`PAYMENT_PROCESSOR`, `sandbox` by default) and the card fingerprint key:
    /// `CARD_FINGERPRINT_SECRET`, or the file `CARD_FINGERPRINT_SECRET_FILE` names (which
    /// `scripts/serve` generates). The key must stay the same for the life of the data, or
    /// cards added again are no longer recognised.
    static func paymentsSetup(_ environment: [String: String]) throws -> PaymentsSetup {
        var secret = environment["CARD_FINGERPRINT_SECRET"].map { Data($0.utf8) }
        if secret == nil, let path = environment["CARD_FINGERPRINT_SECRET_FILE"] {
            guard let contents = FileManager.default.contents(atPath: path) else {
                throw ValidationError("CARD_FINGERPRINT_SECRET_FILE: cannot read \(path).")
            }
            secret = Data(String(decoding: contents, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).utf8)
        }
        guard let secret, secret.count >= 16 else {
            throw ValidationError(
                "A card fingerprint secret of at least 16 bytes is required: set CARD_FINGERPRINT_SECRET or CARD_FINGERPRINT_SECRET_FILE.")
        }
        do {
            let name = environment["PAYMENT_PROCESSOR"] ?? "sandbox"
            try PaymentProcessors.validate(name)
            var setup = PaymentsSetup(
                makeProcessor: { pool in
                    // Validated above: `named` knows every name `validate` lets through.
                    (try? PaymentProcessors.named(name, pool: pool)) ?? SandboxPaymentProcessor(pool: pool)
                },
                fingerprinter: try CardFingerprinter(secret: secret))
            if let text = environment["PAYMENT_ATTEMPTS_PER_HOUR"] {
                guard let attempts = Int(text), attempts > 0 else {
                    throw ValidationError("PAYMENT_ATTEMPTS_PER_HOUR must be a whole number above 0 (default 10).")
                }
                setup.attemptsPerHour = attempts
            }
            if let text = environment["PAYOUT_VERIFY_ABOVE_CENTS"] {
                guard let cents = Int(text), cents >= 0 else {
                    throw ValidationError("PAYOUT_VERIFY_ABOVE_CENTS must be a whole number of cents, 0 or more (default 100000).")
                }
                setup.payoutVerifyAboveCents = cents
            }
            setup.rentalFees = RentalFees(
                renterBps: try basisPoints(environment, "RENTER_FEE_BPS", default: 500),
                ownerBps: try basisPoints(environment, "OWNER_FEE_BPS", default: 1000))
            return setup
        } catch {
            throw ValidationError("\(error)")
        }
    }

    /// `on` or `off` (the default).
    static func flag(_ environment: [String: String], _ name: String) throws -> Bool {
        switch environment[name] ?? "off" {
        case "on": true
        case "off", "": false
        default: throw ValidationError("\(name) is on or off.")
        }
    }

    /// `MAIL_FROM` and `PUBLIC_URL` (where mailed links lead).
    static func mailSettings(_ environment: [String: String], port: Int) -> MailSettings {
        MailSettings(
            from: environment["MAIL_FROM"] ?? "Lender <no-reply@lender.localhost>",
            publicURL: environment["PUBLIC_URL"] ?? "http://localhost:\(port)")
    }

    /// `SMTP_URL` (`smtp://` or `smtps://`, with user and password if needed): the outbox's
    /// mail is sent there; without it, mail waits in the outbox (pushes go all the same).
    /// `OUTBOX_KEEP`: seconds a sent row is kept (default 7 days).
    static func delivery(_ environment: [String: String]) throws -> MailDelivery {
        let url = environment["SMTP_URL"].flatMap { $0.isEmpty ? nil : $0 }
        if let url, !(url.hasPrefix("smtp://") || url.hasPrefix("smtps://")) {
            throw ValidationError("SMTP_URL must start with smtp:// or smtps://.")
        }
        var keep = 7 * 86_400
        if let text = environment["OUTBOX_KEEP"] {
            // The hourly mail limits count the rows kept.
            guard let seconds = Int(text), seconds >= 3600 else {
                throw ValidationError("OUTBOX_KEEP is a number of seconds, 3600 or more.")
            }
            keep = seconds
        }
        var retry = 5
        if let text = environment["OUTBOX_RETRY_SECONDS"] {
            guard let seconds = Int(text), seconds >= 1 else {
                throw ValidationError("OUTBOX_RETRY_SECONDS is a number of seconds, 1 or more.")
            }
            retry = seconds
        }
        return MailDelivery(mailer: url.map(SMTPMailer.init(url:)), keepSeconds: keep, retrySeconds: retry)
    }

    /// A fee in basis points of a booking's total, 0 to 10000.
    private static func basisPoints(_ environment: [String: String], _ name: String, default value: Int) throws -> Int {
        guard let text = environment[name] else { return value }
        guard let bps = Int(text), RentalFees.bpsRange.contains(bps) else {
            throw ValidationError("\(name) must be a whole number of basis points from 0 to 10000 (500 is 5 %).")
        }
        return bps
    }

    /// Refuses an out-of-date schema, or brings it up to date with `--migrate`, as the owner.
    private func checkSchema(_ owner: PostgresConfiguration, migrator: Migrator, logger: Logger) async throws {
        try await PostgresPool.with(configuration: owner, options: .init(size: 1), logger: logger) { pool in
            let status = try await pool.withConnection { try await migrator.status(on: $0) }
            if let changed = status.changed.first {
                throw MigrationError.changed(changed.name)
            }
            guard !status.pending.isEmpty else { return }
            guard migrate else {
                let names = status.pending.map(\.name).joined(separator: ", ")
                throw ValidationError(
                    "The schema is behind (\(names) pending). Run `lender migrate`, or `lender serve --migrate`.")
            }
            try await pool.withConnection { _ = try await migrator.migrate(on: $0) }
        }
    }
}
