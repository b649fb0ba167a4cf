import Foundation
import Mail
import Marketplace
import Postgres
import Projections

/// One push, as the outbox hands it to a push service.
public struct PushMessage: Sendable, Hashable {
    /// The outbox row: a repeat after a crash carries the same one.
    public var id: Int64
    public var platform: Device.Platform
    public var token: String
    /// JSON: a title and ids (`PushPayload`), never personal data.
    public var payload: String
}

/// What a push says: a title of its kind's, and the ids an app opens the right screen with.
/// No names, no amounts, no text anyone wrote: a lock screen is seen by anyone near it.
public struct PushPayload: Codable, Sendable, Hashable {
    public var title: String
    public var kind: String
    public var position: Int64
    /// Ids as the API writes them (lower case).
    public var itemId: String?
    public var bidId: String?
    public var loanId: String?
}

/// The port to APNs and FCM (SPEC §12.4). A failure is retried by the outbox.
public protocol PushSender: Sendable {
    func send(_ push: PushMessage) async throws
}

/// A push service that keeps what it would send in `push_sandbox`: what the tests and a
/// development server read. A real one (APNs, FCM) takes its place behind `PushSender`.
public struct SandboxPush: PushSender {
    let pool: PostgresPool

    public init(pool: PostgresPool) { self.pool = pool }

    public func send(_ push: PushMessage) async throws {
        try await pool.query(
            """
            INSERT INTO push_sandbox (outbox_id, platform, token, payload)
            VALUES (\(push.id), \(push.platform.rawValue), \(push.token), \(push.payload)::jsonb)
            """)
    }
}

/// Fans the feed (§11.4) out to mail and push by each recipient's settings: it follows
/// `feed_view` by position from `notifier_position` and, in one transaction, writes the
/// outbox rows of a batch of notices and moves the position past them. So each notice is
/// fanned out once, whatever crashes (the rows and the position commit together), and a
/// notice the projection wrote is never missed: feed rows commit with their events, whose
/// positions become visible in order. Several servers take turns (the position's row lock).
///
/// Mail goes only to a verified address: an unverified one may be a stranger's, typed by
/// mistake or on purpose.
public struct Notifier: Sendable {
    let pool: PostgresPool
    let mail: MailSettings
    /// Notices read at most per round (all of a position's, whatever the number).
    public var batch = 500

    public init(pool: PostgresPool, mail: MailSettings) {
        self.pool = pool
        self.mail = mail
    }

    /// One batch; how many notices it fanned out, at least 1 when it read any (0: none
    /// waiting, or another server at it).
    public func fanOut() async throws -> Int {
        try await pool.withTransaction { connection in
            guard
                let after = try await connection.query("SELECT position FROM notifier_position FOR UPDATE SKIP LOCKED")
                    .first.map({ try $0.decode("position", as: Int64.self) })
            else { return 0 }
            // The batch ends at a whole position: a loan's news is one notice per lender.
            guard
                let last = try await connection.query(
                    """
                    SELECT max(position) AS last
                    FROM (SELECT position FROM feed_view WHERE position > \(after) ORDER BY position LIMIT \(batch)) p
                    """
                ).single().decode("last", as: Int64?.self)
            else { return 0 }
            let notices = try await connection.query(
                """
                SELECT f.user_id, f.position, f.kind, f.item_id, f.bid_id, f.loan_id, u.handle, u.email, u.email_verified,
                       i.title
                FROM feed_view f
                JOIN users_view u ON u.user_id = f.user_id AND u.forgotten_at IS NULL
                LEFT JOIN items_view i ON i.item_id = f.item_id
                WHERE f.position > \(after) AND f.position <= \(last)
                ORDER BY f.position, f.user_id
                """)
            let users = Array(Set(try notices.map { try $0.decode("user_id", as: UUID.self) }))
            let settings = try await NotificationSettings.read(users, on: connection)
            var devices = [UUID: [(token: String, platform: Device.Platform)]]()
            for row in try await connection.query(
                "SELECT user_id, token, platform FROM devices WHERE user_id = ANY (\(users.map(\.lowercaseText))::uuid[]) ORDER BY created_at")
            {
                guard let platform = Device.Platform(rawValue: try row.decode("platform")) else { continue }
                devices[try row.decode("user_id", as: UUID.self), default: []].append((try row.decode("token"), platform))
            }
            var rows = [Outbox.Row]()
            for notice in notices {
                guard let kind = NoticeKind(rawValue: try notice.decode("kind")) else { continue }
                let user = try notice.decode("user_id", as: UUID.self)
                let channels = settings[user]?[kind] ?? NotificationSettings.defaults[kind]!
                let item = try notice.decode("item_id", as: UUID?.self)
                let loan = try notice.decode("loan_id", as: UUID?.self)
                if channels.email, try notice.decode("email_verified", as: Bool.self) {
                    rows.append(
                        mailRow(
                            kind, to: user, address: try notice.decode("email"), handle: try notice.decode("handle"),
                            itemTitle: try notice.decode("title", as: String?.self), item: item, loan: loan))
                }
                if channels.push, let theirs = devices[user] {
                    let payload = PushPayload(
                        title: MailTemplates.bundled.line("push_title", [kind.rawValue: "yes"]), kind: kind.rawValue,
                        position: try notice.decode("position"), itemId: item?.lowercaseText,
                        bidId: try notice.decode("bid_id", as: UUID?.self)?.lowercaseText, loanId: loan?.lowercaseText)
                    let json = String(decoding: try Self.encoder.encode(payload), as: UTF8.self)
                    for device in theirs {
                        rows.append(
                            Outbox.Row(
                                user: user, recipient: device.token, kind: kind.rawValue, subject: payload.title, text: json,
                                channel: .push, platform: device.platform.rawValue))
                    }
                }
            }
            try await Outbox.enqueue(rows, on: connection)
            try await connection.query("UPDATE notifier_position SET position = \(last)")
            // At least one: the position moved, even past a batch of forgotten users' rows.
            return max(notices.count, 1)
        }
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// A notice's mail, in the templates' words, with a link to what it is about and a link
    /// that stops mail of its kind.
    private func mailRow(
        _ kind: NoticeKind, to user: UUID, address: String, handle: String, itemTitle: String?, item: UUID?, loan: UUID?
    ) -> Outbox.Row {
        let link =
            item.map { "\(mail.publicURL)/items/\($0.lowercaseText)" } ?? loan.map { "\(mail.publicURL)/loans/\($0.lowercaseText)" }
            ?? "\(mail.publicURL)/me/feed"
        let unsubscribe = mail.unsubscribeURL(for: UserID(user), kind: kind)
        var values = [kind.rawValue: "yes", "handle": handle, "item": itemTitle ?? "", "link": link, "unsubscribe": unsubscribe ?? ""]
        values["headline"] = MailTemplates.bundled.line("notice_subject", values)
        let words = MailTemplates.bundled.render("notice", values)
        return Outbox.Row(
            user: user, recipient: address, kind: kind.rawValue, subject: words.subject, text: words.text, html: words.html,
            unsubscribe: unsubscribe)
    }
}
