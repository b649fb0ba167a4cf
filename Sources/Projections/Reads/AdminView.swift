import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// A user as an operator finds them (SPEC §12.6): who they are, their money and standing.
/// A forgotten user's personal fields are nil: removed, not hidden.
public struct AdminUserSummary: Codable, Sendable {
    public var id: UserID
    public var handle: String
    public var displayName: String?
    public var email: String?
    public var country: String?
    public var memberSince: Date
    public var forgotten: Bool
    public var emailVerified: Bool
    public var identityVerified: Bool
    public var isOperator: Bool
    public var balanceCents: Int
    public var heldCents: Int
    /// While a suspension holds: why, since when, until when (nil: until reinstated).
    public var suspension: AdminSuspension?
}

public struct AdminSuspension: Codable, Sendable {
    public var operatorId: UserID
    public var reason: String
    public var since: Date
    public var until: Date?
}

/// One user, whole, for the desk and `GET /v1/admin/users/{id}`: their postings, bookings,
/// money history, reports by and about them, and the operators' acts on them.
public struct AdminUser: Codable, Sendable {
    public var user: AdminUserSummary
    public var postings: [ItemResource]
    public var bookings: [BookingResource]
    public var balanceHistory: [BalanceEntry]
    public var reportsFiled: [ReportResource]
    public var reportsAbout: [ReportResource]
    public var sanctions: [AdminSanction]

    public init(
        user: AdminUserSummary, postings: [ItemResource], bookings: [BookingResource], balanceHistory: [BalanceEntry],
        reportsFiled: [ReportResource], reportsAbout: [ReportResource], sanctions: [AdminSanction]
    ) {
        self.user = user
        self.postings = postings
        self.bookings = bookings
        self.balanceHistory = balanceHistory
        self.reportsFiled = reportsFiled
        self.reportsAbout = reportsAbout
        self.sanctions = sanctions
    }
}

/// An operator's act on a user, from their stream: suspended, reinstated, identity checked.
public struct AdminSanction: Codable, Sendable {
    public var type: String
    public var at: Date
    public var operatorId: String?
    public var reason: String?
    public var position: Int64
}

/// The operators' reads: users by handle or e-mail, one user whole, bookings by status and
/// party. Newest first; the lists an operator pages through are keyset paged by position.
public struct AdminView: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    /// How many postings, bookings, entries and reports one user's page shows.
    public static let sectionLength = 50

    static let userColumns = """
        u.user_id, u.handle, u.display_name, u.email, u.country, u.member_since, u.forgotten_at, u.email_verified,
        u.balance_cents, u.held_cents, s.operator_id AS suspended_by, s.reason AS suspension_reason,
        s.suspended_at, s.until AS suspended_until,
        EXISTS (SELECT 1 FROM operators o WHERE o.user_id = u.user_id) AS is_operator,
        EXISTS (SELECT 1 FROM events e WHERE e.stream_id = 'user-' || u.user_id::text AND e.type = 'IdentityVerified')
            AS identity_verified
        """

    static let userSource = "users_view u LEFT JOIN suspensions_view s ON s.user_id = u.user_id"

    /// Users whose handle is `text` (case aside) or starts with it, or whose e-mail's blind
    /// index is `emailDigest`: at most 50.
    public func users(matching text: String, emailDigest: Data?) async throws -> [AdminUserSummary] {
        let prefix = text.lowercased().replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_") + "%"
        let rows = try await pool.query(
            """
            SELECT \(unsafeRaw: Self.userColumns) FROM \(unsafeRaw: Self.userSource)
            WHERE lower(u.handle) LIKE \(prefix)
               OR u.user_id = (SELECT user_id FROM email_index WHERE digest = \(emailDigest ?? Data()))
            ORDER BY lower(u.handle) = \(text.lowercased()) DESC, u.handle LIMIT 50
            """)
        return try rows.map(Self.summary)
    }

    public func summary(_ id: UserID) async throws -> AdminUserSummary? {
        try await pool.query(
            "SELECT \(unsafeRaw: Self.userColumns) FROM \(unsafeRaw: Self.userSource) WHERE u.user_id = \(id.rawValue)"
        ).first.map(Self.summary)
    }

    /// Their newest postings, as the market shows them.
    public func postings(of user: UserID) async throws -> [ItemResource] {
        try await pool.query(
            """
            SELECT \(unsafeRaw: ItemResource.columns), NULL::float8 AS distance_km FROM items_view
            WHERE owner_id = \(user.rawValue) ORDER BY created_at DESC, item_id DESC LIMIT \(literal: Self.sectionLength)
            """
        ).map { try ItemResource($0, position: nil) }
    }

    /// Bookings, newest first: with `status` (`confirmed`, `completed`, `cancelled`, or
    /// `disputed` for an open dispute or claim) and `user` (as owner or renter) when given.
    /// Keyset paged on when each was made (a booking's position moves with each change: a
    /// list by it would skip one changed between two pages). `next`: the next page's cursor.
    public func bookings(status: String?, user: UserID?, after: Cursor?, limit: Int) async throws
        -> (rows: [BookingResource], next: String?)
    {
        var statement: PostgresQuery = """
            SELECT \(unsafeRaw: BookingResource.columns), NULL::text AS contact_email
            FROM bookings_view b
            \(unsafeRaw: BookingResource.joins)
            WHERE true
            """
        if let after { statement.append(" AND (b.created_at, b.booking_id) < (\(after.at), \(after.id))") }
        switch status {
        case nil: break
        case "disputed": statement.append(" AND (b.dispute_status = 'open' OR (b.claim_cents IS NOT NULL AND b.deposit_status = 'held'))")
        case let status?: statement.append(" AND b.status = \(status)")
        }
        if let user { statement.append(" AND (b.owner_id = \(user.rawValue) OR b.renter_id = \(user.rawValue))") }
        statement.append(" ORDER BY b.created_at DESC, b.booking_id DESC LIMIT \(literal: limit + 1)")
        let rows = try await pool.query(statement).map { try BookingResource($0, position: nil) }
        guard rows.count > limit else { return (rows, nil) }
        let last = rows[limit - 1]
        return (Array(rows.prefix(limit)), Cursor(at: last.createdAt, id: last.id.rawValue).encoded)
    }

    /// Reports about the user, or about what they posted or wrote.
    public func reports(about user: UserID) async throws -> [ReportResource] {
        var query = ReportsView.columns
        query.append(
            """
             WHERE (subject_type = 'user' AND subject_id = \(user.rawValue))
                OR (subject_type = 'item' AND subject_id IN (SELECT item_id FROM items_view WHERE owner_id = \(user.rawValue)))
                OR (subject_type = 'loan' AND subject_id IN (SELECT loan_id FROM loans_view WHERE borrower_id = \(user.rawValue)))
             ORDER BY filed_position DESC LIMIT \(literal: Self.sectionLength)
            """)
        return try await pool.query(query).map(ReportsView.resource)
    }

    /// The operators' acts in the user's stream, newest first: found by type, then read
    /// through the store, so that a reason sealed for the user is opened, or shows removed
    /// once they are forgotten.
    public static func sanctions(of user: UserID, in store: EventStore) async throws -> [AdminSanction] {
        let positions = try await store.pool.query(
            """
            SELECT position FROM events
            WHERE stream_id = \(StreamID.user(user).rawValue)
              AND type IN ('UserSuspended', 'UserReinstated', 'IdentityVerified')
            ORDER BY position DESC LIMIT \(literal: sectionLength)
            """
        ).map { try $0.decode("position", as: Int64.self) }
        return try await store.events(at: positions).sorted { $0.position > $1.position }.map { recorded in
            let data = try recorded.data.decode(JSONValue.self)
            func text(_ name: String) -> String? {
                switch data[name] {
                case .string(let value): value
                case .object: Redacted.text  // still sealed: its person is forgotten
                default: nil
                }
            }
            return AdminSanction(
                type: recorded.type, at: recorded.recordedAt,
                operatorId: text("operatorID") ?? (try? recorded.decodeMetadata().actorID) ?? text("verifiedBy"),
                reason: text("reason"), position: recorded.position)
        }
    }

    static func summary(_ row: PostgresRow) throws -> AdminUserSummary {
        let forgotten = try row.decode("forgotten_at", as: Date?.self) != nil
        let suspendedBy = try row.decode("suspended_by", as: UUID?.self)
        return AdminUserSummary(
            id: UserID(try row.decode("user_id", as: UUID.self)), handle: try row.decode("handle"),
            displayName: forgotten ? nil : try row.decode("display_name", as: String.self),
            email: forgotten ? nil : try row.decode("email", as: String.self),
            country: forgotten ? nil : try row.decode("country", as: String?.self),
            memberSince: try row.decode("member_since"), forgotten: forgotten, emailVerified: try row.decode("email_verified"),
            identityVerified: try row.decode("identity_verified"), isOperator: try row.decode("is_operator"),
            balanceCents: try row.decode("balance_cents"), heldCents: try row.decode("held_cents"),
            suspension: try suspendedBy.map {
                AdminSuspension(
                    operatorId: UserID($0), reason: try row.decode("suspension_reason"), since: try row.decode("suspended_at"),
                    until: try row.decode("suspended_until", as: Date?.self))
            })
    }
}
