import Foundation
import Marketplace
import Postgres

/// Reads of `bookings_view` and `blackouts_view`, which `BookingsProjection` writes: a
/// booking for its two parties, each party's lists, and a rental's calendar.
public struct BookingsView: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    /// The longest calendar one request may ask for.
    public static let maxCalendarDays = 366

    /// The booking, for one of its two parties; anyone else is told there is none. Each party
    /// sees the other's e-mail.
    public func booking(_ id: BookingID, for actor: UserID, position: Int64? = nil) async throws -> BookingResource {
        let rows = try await pool.query(
            """
            SELECT \(unsafeRaw: BookingResource.columns),
                   CASE WHEN b.owner_id = \(actor.rawValue) THEN renter.email ELSE owner.email END AS contact_email
            FROM bookings_view b
            \(unsafeRaw: BookingResource.joins)
            WHERE b.booking_id = \(id.rawValue) AND \(actor.rawValue) IN (b.owner_id, b.renter_id)
            """, prepared: true)
        guard let row = rows.first else { throw DomainError.bookingNotFound }
        return try BookingResource(row, position: position)
    }

    /// Any booking, as an operator reads it (the role is the caller's to check).
    public func booking(_ id: BookingID, position: Int64? = nil) async throws -> BookingResource {
        let rows = try await pool.query(
            """
            SELECT \(unsafeRaw: BookingResource.columns), NULL::text AS contact_email
            FROM bookings_view b
            \(unsafeRaw: BookingResource.joins)
            WHERE b.booking_id = \(id.rawValue)
            """)
        guard let row = rows.first else { throw DomainError.bookingNotFound }
        return try BookingResource(row, position: position)
    }

    /// Which side of a booking a list is of.
    public enum Role: String, Sendable, CaseIterable {
        case owner, renter
    }

    /// Upcoming bookings (not yet ended) by their first day; past ones (ended, or cancelled
    /// before they began... any not upcoming) by their last day, latest first.
    public enum When: String, Sendable, CaseIterable {
        case upcoming, past
    }

    /// One party's bookings, keyset paged on (day, id): `from` ascending for what is upcoming,
    /// `until` descending for what is past. `today` decides which is which.
    public func bookings(
        of user: UserID, role: Role, when: When, today: Day, limit: Int, after: Cursor?
    ) async throws -> Page<BookingResource> {
        let party = role == .owner ? "b.owner_id" : "b.renter_id"
        let day = today.sql
        var statement: PostgresQuery = """
            SELECT \(unsafeRaw: BookingResource.columns), NULL::text AS contact_email
            FROM bookings_view b
            \(unsafeRaw: BookingResource.joins)
            WHERE \(unsafeRaw: party) = \(user.rawValue)
            """
        let afterDay = after?.key.flatMap(Day.init)?.sql
        if after != nil && afterDay == nil {
            throw DomainError.invalid([FieldError(field: "cursor", code: "invalid_cursor", message: "not a cursor of this list")])
        }
        switch when {
        case .upcoming:
            statement.append(" AND b.status = 'confirmed' AND b.until_day >= \(day)::date")
            if let after, let afterDay {
                statement.append(" AND (b.from_day, b.booking_id) > (\(afterDay)::date, \(after.id))")
            }
            statement.append(" ORDER BY b.from_day, b.booking_id LIMIT \(literal: PageSize.rowsRead(limit))")
        case .past:
            statement.append(" AND (b.status <> 'confirmed' OR b.until_day < \(day)::date)")
            if let after, let afterDay {
                statement.append(" AND (b.until_day, b.booking_id) < (\(afterDay)::date, \(after.id))")
            }
            statement.append(" ORDER BY b.until_day DESC, b.booking_id DESC LIMIT \(literal: PageSize.rowsRead(limit))")
        }
        let rows = try await pool.query(statement, prepared: true)
        let bookings = try rows.map { try BookingResource($0, position: nil) }
        guard bookings.count > limit else { return Page(data: bookings, nextCursor: nil) }
        let last = bookings[limit - 1]
        let key = when == .upcoming ? last.from : last.until
        return Page(
            data: Array(bookings.prefix(limit)),
            nextCursor: Cursor(at: Date(timeIntervalSince1970: 0), id: last.id.rawValue, key: key).encoded)
    }

    /// Every day of `period` once, in runs of one state: `booked` by a booking that holds its
    /// days, `blocked` by the owner, `outside` the rental's window, else `free`. Names no renter.
    public func availability(of item: ItemID, over period: Period) async throws -> Availability {
        let rows = try await pool.query(
            """
            SELECT i.kind, i.window_from::text AS window_from, i.window_until::text AS window_until,
                   t.state, t.from_day::text AS from_day, t.until_day::text AS until_day
            FROM items_view i
            LEFT JOIN LATERAL (
                SELECT 'booked' AS state, from_day, until_day FROM bookings_view
                WHERE item_id = i.item_id AND status <> 'cancelled'
                  AND from_day <= \(period.until.sql)::date AND until_day >= \(period.from.sql)::date
                UNION ALL
                SELECT 'blocked', from_day, until_day FROM blackouts_view
                WHERE item_id = i.item_id
                  AND from_day <= \(period.until.sql)::date AND until_day >= \(period.from.sql)::date
            ) t ON true
            WHERE i.item_id = \(item.rawValue)
            """, prepared: true)
        guard let first = rows.first else { throw DomainError.itemNotFound }
        guard try first.decode("kind", as: String.self) == ItemKind.rental.rawValue else {
            throw DomainError(.conflict, "not_a_rental", "Only a rental has a calendar of bookings.")
        }
        let window = (
            from: try first.decode("window_from", as: String?.self).flatMap(Day.init),
            until: try first.decode("window_until", as: String?.self).flatMap(Day.init)
        )
        var taken: [(state: Availability.State, period: Period)] = []
        for row in rows {
            guard let state = try row.decode("state", as: String?.self).flatMap(Availability.State.init(rawValue:)),
                let from = try row.decode("from_day", as: String?.self).flatMap(Day.init),
                let until = try row.decode("until_day", as: String?.self).flatMap(Day.init)
            else { continue }
            taken.append((state, Period(from: from, until: until)))
        }
        return Availability(period: period, windowFrom: window.from, windowUntil: window.until, taken: taken)
    }
}

/// A rental's calendar over a period: each day's state, runs of one state merged.
public struct Availability: Codable, Sendable {
    public enum State: String, Codable, Sendable {
        case free, booked, blocked, outside
    }

    public struct Range: Codable, Sendable, Equatable {
        public var from: String
        public var until: String
        public var state: State
    }

    public var from: String
    public var until: String
    public var ranges: [Range]

    /// A calendar is at most `maxCalendarDays` long. A booked day is booked even
    /// where the owner also blocked it; outside the window is outside whatever else.
    init(period: Period, windowFrom: Day?, windowUntil: Day?, taken: [(state: State, period: Period)]) {
        from = period.from.description
        until = period.until.description
        // Each day's state, marked range by range (blocked, then booked over it, then the
        // window over all): no day asks every range.
        let first = period.from.ordinal
        var states = [State](repeating: .free, count: period.until.ordinal - first + 1)
        func mark(_ range: Period, _ state: State) {
            let lower = max(range.from.ordinal - first, 0), upper = min(range.until.ordinal - first, states.count - 1)
            guard lower <= upper else { return }
            for index in lower...upper { states[index] = state }
        }
        for (state, range) in taken where state == .blocked { mark(range, .blocked) }
        for (state, range) in taken where state == .booked { mark(range, .booked) }
        if let windowFrom { mark(Period(from: period.from, until: windowFrom.adding(days: -1)), .outside) }
        if let windowUntil { mark(Period(from: windowUntil.adding(days: 1), until: period.until), .outside) }
        ranges = []
        var runStart = 0
        for index in states.indices where index + 1 == states.count || states[index + 1] != states[index] {
            ranges.append(
                Range(
                    from: Day(ordinal: first + runStart).description, until: Day(ordinal: first + index).description,
                    state: states[index]))
            runStart = index + 1
        }
    }
}

/// A booking as its two parties read it.
public struct BookingResource: Codable, Sendable {
    public var id: BookingID
    public var itemId: ItemID
    public var itemTitle: String
    public var ownerId: UserID
    public var ownerHandle: String
    public var renterId: UserID
    public var renterHandle: String
    public var from: String
    public var until: String
    public var days: Int
    public var dailyPriceCents: Int
    public var totalCents: Int
    public var status: String
    public var createdAt: Date
    public var completedAt: Date?
    public var cancelledAt: Date?
    public var cancelledBy: UserID?
    /// A paid booking's prices and how it was paid (SPEC §12.2); null for one that was not.
    public var payment: RentalPayment?
    /// Once it ended: what the renter got back, the owner was paid, the marketplace earned.
    public var refundCents: Int?
    public var settledPayoutCents: Int?
    public var settledFeesCents: Int?
    /// Its security deposit (SPEC §12.5): how much, and `held`, `released` or `divided` by an
    /// operator; the owner's claim on it and a dispute, each with the operator's division once
    /// resolved.
    public var depositCents: Int?
    public var depositStatus: String?
    public var claim: BookingClaim?
    public var dispute: BookingDisputeResource?
    /// The other party's e-mail: only in the answer for one booking, read by one of its parties.
    public var contactEmail: String?
    public var position: Int64?

    /// What `init(_:position:)` reads: `bookings_view`'s row (`b`), what is joined, and the
    /// price (`RentalPayment`); a read adds `contact_email`.
    static let columns = """
        \(BookingRow.table.selectList("b")), coalesce(i.title, '') AS item_title, coalesce(owner.handle, '') AS owner_handle,
        coalesce(renter.handle, '') AS renter_handle, \(RentalPayment.columns)
        """

    static let joins = """
        LEFT JOIN items_view i ON i.item_id = b.item_id
        LEFT JOIN users_view owner ON owner.user_id = b.owner_id
        LEFT JOIN users_view renter ON renter.user_id = b.renter_id
        LEFT JOIN LATERAL (\(RentalPayment.lateral("b.booking_id"))) price ON true
        """

    init(_ row: PostgresRow, position: Int64?) throws {
        let booking = try BookingRow.table.decode(row)
        id = booking.id
        itemId = booking.item
        itemTitle = try row.decode("item_title")
        ownerId = booking.owner
        ownerHandle = try row.decode("owner_handle")
        renterId = booking.renter
        renterHandle = try row.decode("renter_handle")
        from = booking.from.description
        until = booking.until.description
        days = booking.from.days(until: booking.until) + 1
        dailyPriceCents = booking.dailyPriceCents
        totalCents = days * dailyPriceCents
        status = booking.status.rawValue
        createdAt = booking.createdAt
        completedAt = booking.completedAt
        cancelledAt = booking.cancelledAt
        cancelledBy = booking.cancelledBy
        payment = try RentalPayment(row)
        (refundCents, settledPayoutCents, settledFeesCents) =
            (booking.refundCents, booking.settledPayoutCents, booking.settledFeesCents)
        (depositCents, depositStatus) = (booking.depositCents, booking.depositStatus)
        let (renterCents, ownerCents) = (booking.resolutionRenterCents, booking.resolutionOwnerCents)
        claim = booking.claimCents.map {
            BookingClaim(
                amountCents: $0, text: booking.claimText, status: renterCents == nil ? "open" : "resolved", renterCents: renterCents,
                ownerCents: ownerCents)
        }
        dispute = booking.disputeStatus.map {
            BookingDisputeResource(
                reason: booking.disputeReason ?? "", text: booking.disputeText, openedBy: booking.disputeOpenedBy ?? .none,
                status: $0, renterCents: renterCents, ownerCents: ownerCents)
        }
        contactEmail = try row.decode("contact_email", as: String?.self)
        self.position = position
    }
}

/// The owner's claim on a booking's deposit; an operator's division once resolved.
public struct BookingClaim: Codable, Sendable, Hashable {
    public var amountCents: Int
    public var text: String?
    /// `open`, or `resolved` by an operator.
    public var status: String
    public var renterCents: Int?
    public var ownerCents: Int?
}

/// A booking's dispute (SPEC §12.5); an operator's division once resolved.
public struct BookingDisputeResource: Codable, Sendable, Hashable {
    public var reason: String
    public var text: String?
    public var openedBy: UserID
    /// `open`, or `resolved` by an operator.
    public var status: String
    public var renterCents: Int?
    public var ownerCents: Int?
}
