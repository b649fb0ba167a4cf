import Foundation
import Logging
import Mail
import Marketplace
import Metrics
import Postgres
import Projections

/// What the outbox's mail says about itself: who sends it, and where links go.
public struct MailSettings: Sendable {
    /// `From:` (`MAIL_FROM`), e.g. `Lender <no-reply@lender.example>`.
    public var from: String
    /// Where the links in mail lead (`PUBLIC_URL`).
    public var publicURL: String
    /// What signs the unsubscribe links (set by the server, from its secret).
    public var unsubscribe: UnsubscribeTokens?

    public init(from: String = "Lender <no-reply@lender.localhost>", publicURL: String = "http://localhost:8080") {
        self.from = from
        self.publicURL = publicURL
    }

    /// The one-click link that stops mail of `kind` (of every notice when nil).
    public func unsubscribeURL(for user: UserID, kind: NoticeKind?) -> String? {
        unsubscribe.map { "\(publicURL)/v1/unsubscribe?token=\($0.token(for: user, kind: kind))" }
    }

    /// The domain of the `From:` address: Message-IDs are made in it.
    public var domain: String {
        let address = from.split(separator: "<").last.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "> ")) } ?? from
        return address.split(separator: "@").last.map(String.init) ?? "lender.localhost"
    }
}

/// Mail to send (SPEC §12.4), written in the transaction of what causes it and sent by a
/// sender that claims rows (`FOR UPDATE SKIP LOCKED`, then a lapse time), sends them over
/// SMTP and marks them: at least once, in order per recipient, each with a `Message-ID` of
/// its row, so that a repeat after a crash is recognisable. Several servers never send one
/// row at once: a claimed row is skipped until its claim lapses.
public struct Outbox: Sendable {
    /// How a row goes: a mail to an address, or a push to a device's token.
    public enum Channel: String, Sendable, Hashable { case email, push }

    public struct Row: Sendable, Hashable {
        public var user: UUID?
        /// An address, or a device's token.
        public var recipient: String
        public var kind: String
        /// A mail's subject; a push's title.
        public var subject: String
        /// A mail's plain text; a push's payload (JSON).
        public var text: String
        public var html: String?
        public var channel: Channel
        /// A push's: `ios` or `android`.
        public var platform: String?
        /// A mail's one-click unsubscribe link (`List-Unsubscribe`).
        public var unsubscribe: String?

        public init(
            user: UUID?, recipient: String, kind: String, subject: String, text: String, html: String? = nil,
            channel: Channel = .email, platform: String? = nil, unsubscribe: String? = nil
        ) {
            self.user = user
            self.recipient = recipient
            self.kind = kind
            self.subject = subject
            self.text = text
            self.html = html
            self.channel = channel
            self.platform = platform
            self.unsubscribe = unsubscribe
        }
    }

    let pool: PostgresPool
    let settings: MailSettings
    let logger: Logger
    /// Tries before a row is given up (`dead_at`), and the first retry's wait, doubled each time.
    public var maxAttempts = 10
    public var backoffSeconds = 5
    /// How long a claim holds a row: a sender that died mid-send lets it go after this.
    public var claimSeconds = 60

    public init(pool: PostgresPool, settings: MailSettings, logger: Logger) {
        self.pool = pool
        self.settings = settings
        self.logger = logger
    }

    /// The row, on a connection's open transaction: sent only if that commits.
    public static func enqueue(_ row: Row, on connection: PostgresConnection) async throws {
        try await enqueue([row], on: connection)
    }

    /// The rows, in one statement, in their order (their ids are the order they are sent in).
    public static func enqueue(_ rows: [Row], on connection: PostgresConnection) async throws {
        guard !rows.isEmpty else { return }
        var columns = Array(repeating: PostgresBatchColumn(), count: 9)
        for row in rows {
            columns[0].append(row.user)
            columns[1].append(row.recipient)
            columns[2].append(row.kind)
            columns[3].append(row.subject)
            columns[4].append(row.text)
            columns[5].append(row.html)
            columns[6].append(row.channel.rawValue)
            columns[7].append(row.platform)
            columns[8].append(row.unsubscribe)
        }
        try await connection.query(
            """
            INSERT INTO outbox (user_id, recipient, kind, subject, text_body, html_body, channel, platform, unsubscribe_url)
            SELECT u, rc, k, s, t, h, c, p, l FROM unnest(\(columns[0])::uuid[], \(columns[1])::text[], \(columns[2])::text[], \(columns[3])::text[],
                                 \(columns[4])::text[], \(columns[5])::text[], \(columns[6])::text[], \(columns[7])::text[],
                                 \(columns[8])::text[]) WITH ORDINALITY AS r(u, rc, k, s, t, h, c, p, l, n)
            ORDER BY n
            """)
    }

    /// How many mails of `kind` the user was sent (or is to be) in the last hour, counted under
    /// a lock on the pair until `connection`'s transaction ends: a burst of requests counts as
    /// a sequence does. (Sent rows are kept `OUTBOX_KEEP`, at least an hour.)
    public static func mailedThisHour(_ kind: String, to user: UUID, on connection: PostgresConnection) async throws -> Int {
        try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\("outbox:\(kind):\(user)"), 0))")
        return try await connection.query(
            """
            SELECT count(*)::int8 AS n FROM outbox
            WHERE user_id = \(user) AND kind = \(kind) AND created_at > now() - interval '1 hour'
            """
        ).single().decode("n", as: Int.self)
    }

    /// What one round did.
    public struct Round: Sendable, Hashable {
        public var sent = 0
        public var failed = 0
        public var givenUp = 0

        public init() {}
    }

    /// Claims up to `batch` due rows, the oldest unsent of each recipient, and sends them: mail
    /// through `mailer` (none: mail waits), pushes through `pusher` (none: they wait).
    public func sendDue(mailer: (any Mailer)?, pusher: (any PushSender)?, batch: Int = 20) async throws -> Round {
        let channels = (mailer == nil ? [] : [Channel.email.rawValue]) + (pusher == nil ? [] : [Channel.push.rawValue])
        guard !channels.isEmpty else { return Round() }
        let claim = UUID()
        let claimed = try await pool.query(
            """
            WITH due AS (
                SELECT id FROM outbox o
                WHERE sent_at IS NULL AND dead_at IS NULL AND next_attempt_at <= now()
                  AND (claimed_until IS NULL OR claimed_until < now()) AND channel = ANY (\(channels))
                  AND NOT EXISTS (
                      SELECT 1 FROM outbox e
                      WHERE e.recipient = o.recipient AND e.id < o.id AND e.sent_at IS NULL AND e.dead_at IS NULL)
                ORDER BY id LIMIT \(batch)
                FOR UPDATE SKIP LOCKED
            )
            UPDATE outbox o SET claimed_until = now() + make_interval(secs => \(claimSeconds)), claimed_by = \(claim)
            FROM due WHERE o.id = due.id
            RETURNING o.id, o.recipient, o.subject, o.text_body, o.html_body, o.attempts, o.created_at, o.channel, o.platform,
                      o.unsubscribe_url
            """)
        var round = Round()
        // In the rows' order (`RETURNING` keeps none): one recipient's rows go in turn.
        for (id, row) in try claimed.map({ (try $0.decode("id", as: Int64.self), $0) }).sorted(by: { $0.0 < $1.0 }) {
            // Still ours, for another claim's length: the rows before it may have taken long.
            let renewed = try await pool.query(
                """
                UPDATE outbox SET claimed_until = now() + make_interval(secs => \(claimSeconds))
                WHERE id = \(id) AND claimed_by = \(claim) AND claimed_until > now() AND sent_at IS NULL
                """)
            guard renewed.affectedRows == 1 else { continue }
            do {
                if try row.decode("channel", as: String.self) == Channel.push.rawValue, let pusher {
                    try await pusher.send(
                        PushMessage(
                            id: id, platform: Device.Platform(rawValue: try row.decode("platform", as: String?.self) ?? "") ?? .ios,
                            token: try row.decode("recipient"), payload: try row.decode("text_body")))
                } else if let mailer {
                    try await mailer.send(
                        MailMessage(
                            from: settings.from, to: try row.decode("recipient"), subject: try row.decode("subject"),
                            text: try row.decode("text_body"), html: try row.decode("html_body", as: String?.self),
                            messageID: "<outbox-\(id)@\(settings.domain)>",
                            unsubscribe: try row.decode("unsubscribe_url", as: String?.self).flatMap(URL.init(string:)),
                            date: try row.decode("created_at")))
                }
                // Handed over, not yet marked: a crash here sends the row again once its claim
                // lapses, with the same Message-ID.
                Failpoints.hit(.outboxAfterSend)
                // What a reset link or a code unlocks is not kept once it is sent (SPEC §12.4:
                // tokens and codes are stored as digests): the row stays, for the hourly limits.
                try await pool.query(
                    """
                    UPDATE outbox SET sent_at = now(), claimed_until = NULL, attempts = attempts + 1,
                        text_body = CASE WHEN kind IN ('password_reset', 'email_verification') THEN '' ELSE text_body END,
                        html_body = CASE WHEN kind IN ('password_reset', 'email_verification') THEN NULL ELSE html_body END
                    WHERE id = \(id)
                    """)
                round.sent += 1
                OutboxMetrics.deliveries(.sent).increment()
            } catch {
                let attempts = try row.decode("attempts", as: Int.self) + 1
                let wait = backoffSeconds << min(attempts - 1, 12)
                let givenUp = attempts >= maxAttempts
                try await pool.query(
                    """
                    UPDATE outbox SET attempts = \(attempts), claimed_until = NULL, last_error = \("\(error)"),
                        next_attempt_at = now() + make_interval(secs => \(wait)),
                        dead_at = CASE WHEN \(givenUp) THEN now() END
                    WHERE id = \(id)
                    """)
                logger.warning(
                    "a message was not sent", metadata: ["outbox": "\(id)", "attempt": "\(attempts)", "error": "\(error)"])
                if givenUp { round.givenUp += 1 }
                round.failed += 1
                OutboxMetrics.deliveries(givenUp ? .givenUp : .failed).increment()
            }
        }
        return round
    }

    /// `lender_outbox_pending` and `lender_outbox_oldest_seconds`, from the table.
    public func measure() async throws {
        let row = try await pool.query(
            """
            SELECT count(*)::int8 AS pending,
                   coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS oldest
            FROM outbox WHERE sent_at IS NULL AND dead_at IS NULL
            """
        ).single()
        OutboxMetrics.pending.record(try row.decode("pending", as: Int.self))
        OutboxMetrics.oldest.record(try row.decode("oldest", as: Double.self))
    }

    /// The bodies of mail sent longer ago than `keep` are deleted (`OUTBOX_KEEP`).
    public func prune(keepingSeconds keep: Int) async throws {
        try await pool.query(
            "DELETE FROM outbox WHERE (sent_at < now() - make_interval(secs => \(keep))) OR (dead_at < now() - make_interval(secs => \(keep)))")
    }
}

enum OutboxMetrics {
    enum Outcome: String { case sent, failed, givenUp = "given_up" }

    static func deliveries(_ outcome: Outcome) -> Counter {
        Counter(label: "lender_outbox_deliveries_total", dimensions: [("outcome", outcome.rawValue)])
    }

    static var pending: Gauge { Gauge(label: "lender_outbox_pending") }
    static var oldest: Gauge { Gauge(label: "lender_outbox_oldest_seconds") }
}
