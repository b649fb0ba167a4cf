import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// The operators' exports (SPEC §12.6): every movement of money in the log, every user, every
/// booking, handed over in batches read by keyset on a unique key, so that an export of a
/// million rows holds one batch at a time. Each batch is a statement of its own: a slow
/// download keeps no connection and no snapshot between them. The ledger is the log up to its
/// head when the export began; the views' rows are as each batch finds them.
///
/// Forgotten users' personal fields come out as `Redacted.text`: their ids and money stay.
public struct Exports: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    /// Rows a statement reads: a few hundred kilobytes of a batch in memory.
    public static let batchSize = 2000

    // MARK: Ledger

    /// Every money event on users' streams recorded from `from` (included) to `until`
    /// (excluded), in log order.
    public func ledger(
        from: Date?, until: Date?, batchSize: Int = Exports.batchSize, isolation: isolated (any Actor)? = #isolation,
        _ body: ([LedgerEntry]) async throws -> Void
    ) async throws {
        let head = try await pool.query("SELECT position FROM log_head").single().decode("position", as: Int64.self)
        var after: Int64 = 0
        while after < head {
            // No index on the time: the scan follows the position's, the times are filtered on the way.
            var statement: PostgresQuery = """
                SELECT \(unsafeRaw: EventStore.projectedColumns) FROM events
                WHERE position > \(after) AND position <= \(head)
                  AND stream_id LIKE \(Aggregate.user.category + "-%") AND type = ANY (\(LedgerEntry.types))
                """
            if let from { statement.append(" AND recorded_at >= \(from)") }
            if let until { statement.append(" AND recorded_at < \(until)") }
            statement.append(" ORDER BY position LIMIT \(literal: batchSize)")
            let rows = try await pool.query(statement)
            guard let last = rows.last else { return }
            after = try last.decode("position", as: Int64.self)
            let entries = try rows.compactMap { try LedgerEntry(EventStore.projectedEvent($0)) }
            if !entries.isEmpty { try await body(entries) }
            if rows.count < batchSize { return }
        }
    }

    // MARK: Users

    /// Every user, by id.
    public func users(
        batchSize: Int = Exports.batchSize, isolation: isolated (any Actor)? = #isolation,
        _ body: ([UserExportRow]) async throws -> Void
    ) async throws {
        var after: UUID?
        while true {
            var statement: PostgresQuery = """
                SELECT u.user_id,
                       CASE WHEN u.forgotten_at IS NULL THEN u.handle ELSE \(Redacted.text) END AS handle,
                       CASE WHEN u.forgotten_at IS NULL THEN u.display_name ELSE \(Redacted.text) END AS display_name,
                       CASE WHEN u.forgotten_at IS NULL THEN u.email ELSE \(Redacted.text) END AS email,
                       u.email_verified, u.country, u.member_since, u.balance_cents, u.held_cents,
                       s.user_id IS NOT NULL AND (s.until IS NULL OR s.until > now()) AS suspended, s.until AS suspended_until,
                       u.forgotten_at
                FROM users_view u LEFT JOIN suspensions_view s ON s.user_id = u.user_id
                """
            if let after { statement.append(" WHERE u.user_id > \(after)") }
            statement.append(" ORDER BY u.user_id LIMIT \(literal: batchSize)")
            let users = try await pool.query(statement).map { try UserExportRow($0) }
            guard let last = users.last else { return }
            after = last.id.rawValue
            try await body(users)
            if users.count < batchSize { return }
        }
    }

    // MARK: Bookings

    /// Every booking, by id, with its prices, deposit and dispute. No party's words (a claim's
    /// or a dispute's text, an operator's reason): only amounts, states and codes.
    public func bookings(
        batchSize: Int = Exports.batchSize, isolation: isolated (any Actor)? = #isolation,
        _ body: ([BookingExportRow]) async throws -> Void
    ) async throws {
        var after: UUID?
        while true {
            var statement: PostgresQuery = """
                SELECT b.booking_id, b.item_id, coalesce(i.title, '') AS item_title, b.owner_id,
                       CASE WHEN o.forgotten_at IS NULL THEN coalesce(o.handle, '') ELSE \(Redacted.text) END AS owner_handle,
                       b.renter_id,
                       CASE WHEN r.forgotten_at IS NULL THEN coalesce(r.handle, '') ELSE \(Redacted.text) END AS renter_handle,
                       b.from_day::text AS from_day, b.until_day::text AS until_day, b.until_day - b.from_day + 1 AS days,
                       b.status, b.daily_price_cents, p.charge_cents, p.renter_fee_cents, p.owner_fee_cents, p.payout_cents,
                       p.pay_with, b.deposit_cents, b.deposit_status, b.refund_cents, b.settled_payout_cents,
                       b.settled_fees_cents, b.claim_cents, b.dispute_status, b.dispute_reason, b.resolution_renter_cents,
                       b.resolution_owner_cents, b.created_at, b.completed_at, b.cancelled_at
                FROM bookings_view b
                LEFT JOIN items_view i ON i.item_id = b.item_id
                LEFT JOIN users_view o ON o.user_id = b.owner_id
                LEFT JOIN users_view r ON r.user_id = b.renter_id
                LEFT JOIN rental_prices_view p ON p.bid_id = b.booking_id
                """
            if let after { statement.append(" WHERE b.booking_id > \(after)") }
            statement.append(" ORDER BY b.booking_id LIMIT \(literal: batchSize)")
            let bookings = try await pool.query(statement).map { try BookingExportRow($0) }
            guard let last = bookings.last else { return }
            after = last.id.rawValue
            try await body(bookings)
            if bookings.count < batchSize { return }
        }
    }
}

/// One movement of money on a user's stream, as an accountant reads it: what `BalanceHistory`
/// lists (a card's charges and holds among them), and a payout's transfer by the processor.
public struct LedgerEntry: Sendable, Hashable {
    /// What it did to the user's balance: a card's charge for a checkout, a hold, or a
    /// transfer already debited at its request did nothing to it (`none`).
    public enum Effect: String, Sendable {
        case credit, debit, none
    }

    public var position: Int64
    public var at: Date
    public var userID: UserID
    /// `BalanceEntry`'s kinds, and `payout_sent`.
    public var kind: String
    /// A code only (`checkout`, `repayment`, `refund`, `balance`, `card`): an operator's words
    /// for a settlement and a processor's for a failed payout stay in the log.
    public var reason: String?
    public var effect: Effect
    /// Never negative: `effect` says which way.
    public var amountCents: Int
    /// The processor's id: a charge (deposits, card payments, a rental's capture, the charge a
    /// refund went back to), a card hold's authorisation, a payout's transfer.
    public var processorID: String?
    public var payoutID: PayoutID?
    public var loanID: LoanID?
    public var itemID: ItemID?
    /// A hold's bid; a payment's booking (the approved bid's id).
    public var bidID: BidID?
    public var bookingID: BookingID?
    public var cardID: CardID?
    /// An owner's earnings: what the marketplace kept of the booking's escrow beside them, the
    /// platform's revenue (no balance of anyone's moves by it).
    public var feesCents: Int?

    /// The events it is made from, every one a user's.
    static let types = [
        FundsDeposited.eventType, BalanceDebited.eventType, CardCharged.eventType, BalanceCredited.eventType,
        RentalHoldPlaced.eventType, RentalHoldReleased.eventType, RentalPaid.eventType, RentalRefunded.eventType,
        RentalEarned.eventType, PayoutRequested.eventType, PayoutSent.eventType, PayoutFailed.eventType,
        BalanceSettled.eventType,
    ]

    /// Nil for an event that moves no money, or a stream that is not a user's.
    init?(_ recorded: ProjectedEvent) throws {
        guard let user = Aggregate.user.id(of: recorded.streamID) else { return nil }
        let event = try Aggregate.user.codec.decode(recorded)
        let change = UserDecider.balanceChange(of: event).balanceCents
        position = recorded.position
        at = recorded.recordedAt
        userID = user
        effect = change > 0 ? Effect.credit : change < 0 ? Effect.debit : Effect.none
        if let move = BalanceHistory.move(of: event) {
            kind = move.kind
            reason = move.reason
            amountCents = move.amount
            loanID = move.loan
            cardID = move.card
            itemID = move.item
            bookingID = move.booking
            bidID = move.booking == nil ? move.bid : nil
        } else if case .payoutSent(let sent) = event {
            kind = "payout_sent"
            amountCents = sent.amountCents
        } else {
            return nil
        }
        switch event {
        case .fundsDeposited(let deposit): processorID = deposit.chargeID
        case .cardCharged(let charged): processorID = charged.chargeID
        case .rentalHoldPlaced(let placed): processorID = placed.hold.authorizationID
        case .rentalHoldReleased(let released): processorID = released.hold.authorizationID
        case .rentalPaid(let paid): processorID = paid.chargeID
        case .rentalRefunded(let refund): processorID = refund.chargeID
        case .rentalEarned(let earned): feesCents = earned.feesCents
        case .payoutRequested(let requested): payoutID = requested.payoutID
        case .payoutSent(let sent):
            payoutID = sent.payoutID
            processorID = sent.transferID
        case .payoutFailed(let failed):
            payoutID = failed.payoutID
            reason = nil
        case .balanceSettled: reason = nil
        default: break
        }
    }
}

/// A user as the users' export lists them.
public struct UserExportRow: Sendable, Hashable {
    public var id: UserID
    /// `Redacted.text` for a forgotten user, as their display name and e-mail.
    public var handle: String
    public var displayName: String
    public var email: String
    public var emailVerified: Bool
    public var country: String?
    public var memberSince: Date
    public var balanceCents: Int
    public var heldCents: Int
    /// Suspended now (a suspension that ran out is not).
    public var suspended: Bool
    public var suspendedUntil: Date?
    public var forgottenAt: Date?

    init(_ row: PostgresRow) throws {
        id = UserID(try row.decode("user_id", as: UUID.self))
        handle = try row.decode("handle")
        displayName = try row.decode("display_name")
        email = try row.decode("email")
        emailVerified = try row.decode("email_verified")
        country = try row.decode("country", as: String?.self)
        memberSince = try row.decode("member_since")
        balanceCents = try row.decode("balance_cents")
        heldCents = try row.decode("held_cents")
        suspended = try row.decode("suspended")
        suspendedUntil = try row.decode("suspended_until", as: Date?.self)
        forgottenAt = try row.decode("forgotten_at", as: Date?.self)
    }
}

/// A booking as the bookings' export lists it. The prices are nil for a booking not paid on
/// the platform (the second release's).
public struct BookingExportRow: Sendable, Hashable {
    public var id: BookingID
    public var itemID: ItemID
    /// `Redacted.text` when its owner was forgotten.
    public var itemTitle: String
    public var ownerID: UserID
    public var ownerHandle: String
    public var renterID: UserID
    public var renterHandle: String
    /// `YYYY-MM-DD`, both included.
    public var from: String
    public var until: String
    public var days: Int
    public var status: String
    public var dailyPriceCents: Int
    public var totalCents: Int
    public var chargeCents: Int?
    public var renterFeeCents: Int?
    public var ownerFeeCents: Int?
    public var payoutCents: Int?
    public var payWith: String?
    public var depositCents: Int?
    public var depositStatus: String?
    public var refundCents: Int?
    public var settledPayoutCents: Int?
    public var settledFeesCents: Int?
    public var claimCents: Int?
    public var disputeStatus: String?
    public var disputeReason: String?
    public var resolutionRenterCents: Int?
    public var resolutionOwnerCents: Int?
    public var createdAt: Date
    public var completedAt: Date?
    public var cancelledAt: Date?

    init(_ row: PostgresRow) throws {
        id = BookingID(try row.decode("booking_id", as: UUID.self))
        itemID = ItemID(try row.decode("item_id", as: UUID.self))
        itemTitle = try row.decode("item_title")
        ownerID = UserID(try row.decode("owner_id", as: UUID.self))
        ownerHandle = try row.decode("owner_handle")
        renterID = UserID(try row.decode("renter_id", as: UUID.self))
        renterHandle = try row.decode("renter_handle")
        from = try row.decode("from_day")
        until = try row.decode("until_day")
        days = try row.decode("days")
        status = try row.decode("status")
        dailyPriceCents = try row.decode("daily_price_cents")
        totalCents = days * dailyPriceCents
        chargeCents = try row.decode("charge_cents", as: Int?.self)
        renterFeeCents = try row.decode("renter_fee_cents", as: Int?.self)
        ownerFeeCents = try row.decode("owner_fee_cents", as: Int?.self)
        payoutCents = try row.decode("payout_cents", as: Int?.self)
        payWith = try row.decode("pay_with", as: String?.self)
        depositCents = try row.decode("deposit_cents", as: Int?.self)
        depositStatus = try row.decode("deposit_status", as: String?.self)
        refundCents = try row.decode("refund_cents", as: Int?.self)
        settledPayoutCents = try row.decode("settled_payout_cents", as: Int?.self)
        settledFeesCents = try row.decode("settled_fees_cents", as: Int?.self)
        claimCents = try row.decode("claim_cents", as: Int?.self)
        disputeStatus = try row.decode("dispute_status", as: String?.self)
        disputeReason = try row.decode("dispute_reason", as: String?.self)
        resolutionRenterCents = try row.decode("resolution_renter_cents", as: Int?.self)
        resolutionOwnerCents = try row.decode("resolution_owner_cents", as: Int?.self)
        createdAt = try row.decode("created_at")
        completedAt = try row.decode("completed_at", as: Date?.self)
        cancelledAt = try row.decode("cancelled_at", as: Date?.self)
    }
}
