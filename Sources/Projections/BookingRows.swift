import Foundation
import Marketplace
import Postgres

/// A row of `bookings_view`: a rental's booking, what it settled once it ended, its deposit,
/// the owner's claim on it and a dispute. `table` is its one declaration.
struct BookingRow: Sendable, Equatable {
    var id = BookingID.none
    var item = ItemID.none
    var owner = UserID.none
    var renter = UserID.none
    var from = Day(year: 2000, month: 1, day: 1)!
    var until = Day(year: 2000, month: 1, day: 1)!
    var dailyPriceCents = 0
    var status = BookingStatus.confirmed
    var createdAt = Date(timeIntervalSince1970: 0)
    var completedAt: Date?
    var cancelledAt: Date?
    var cancelledBy: UserID?
    var completedOn: Day?
    var reviewsClosed = false
    /// Its last event's: what an answer after a command waits for.
    var position: Int64 = 0
    var refundCents: Int?
    var settledPayoutCents: Int?
    var settledFeesCents: Int?
    var reminded = false
    var depositCents: Int?
    /// `held`, `released`, or `divided` by an operator.
    var depositStatus: String?
    var claimCents: Int?
    var claimText: String?
    var disputeReason: String?
    var disputeText: String?
    var disputeOpenedBy: UserID?
    /// `open`, or `resolved` by an operator.
    var disputeStatus: String?
    var resolutionRenterCents: Int?
    var resolutionOwnerCents: Int?
    var resolvedBy: UserID?
    var resolution: String?

    static let table = ViewTable<BookingRow>(
        "bookings_view", blank: BookingRow(),
        [
            ViewColumn("booking_id", "uuid", \.id),
            ViewColumn("item_id", "uuid", \.item),
            ViewColumn("owner_id", "uuid", \.owner),
            ViewColumn("renter_id", "uuid", \.renter),
            ViewColumn("from_day", day: \.from),
            ViewColumn("until_day", day: \.until),
            ViewColumn("daily_price_cents", "integer", \.dailyPriceCents),
            ViewColumn("status", \.status),
            ViewColumn("created_at", "timestamp with time zone", \.createdAt),
            ViewColumn("completed_at", "timestamp with time zone", \.completedAt),
            ViewColumn("cancelled_at", "timestamp with time zone", \.cancelledAt),
            ViewColumn("cancelled_by", "uuid", \.cancelledBy),
            ViewColumn("completed_on", day: \.completedOn),
            ViewColumn("reviews_closed", "boolean", \.reviewsClosed),
            ViewColumn("position", "bigint", \.position),
            ViewColumn("refund_cents", "bigint", \.refundCents),
            ViewColumn("settled_payout_cents", "bigint", \.settledPayoutCents),
            ViewColumn("settled_fees_cents", "bigint", \.settledFeesCents),
            ViewColumn("reminded", "boolean", \.reminded),
            ViewColumn("deposit_cents", "integer", \.depositCents),
            ViewColumn("deposit_status", "text", \.depositStatus),
            ViewColumn("claim_cents", "integer", \.claimCents),
            ViewColumn("claim_text", "text", \.claimText),
            ViewColumn("dispute_reason", "text", \.disputeReason),
            ViewColumn("dispute_text", "text", \.disputeText),
            ViewColumn("dispute_opened_by", "uuid", \.disputeOpenedBy),
            ViewColumn("dispute_status", "text", \.disputeStatus),
            ViewColumn("resolution_renter_cents", "integer", \.resolutionRenterCents),
            ViewColumn("resolution_owner_cents", "integer", \.resolutionOwnerCents),
            ViewColumn("resolved_by", "uuid", \.resolvedBy),
            ViewColumn("resolution", "text", \.resolution),
        ])

    /// A booking the fold made (its insert keeps one written already: the first of an id stays).
    static let insert = table.insert("insert bookings") { "\($0)\nON CONFLICT (booking_id) DO NOTHING" }
}

/// A row of `blackouts_view`: days an owner closed on a rental. `table` is its one declaration.
struct BlackoutRow: Sendable {
    var id = BlackoutID.none
    var item = ItemID.none
    var from = Day(year: 2000, month: 1, day: 1)!
    var until = Day(year: 2000, month: 1, day: 1)!
    var createdAt = Date(timeIntervalSince1970: 0)

    static let table = ViewTable<BlackoutRow>(
        "blackouts_view", blank: BlackoutRow(),
        [
            ViewColumn("blackout_id", "uuid", \.id),
            ViewColumn("item_id", "uuid", \.item),
            ViewColumn("from_day", day: \.from),
            ViewColumn("until_day", day: \.until),
            ViewColumn("created_at", "timestamp with time zone", \.createdAt),
        ])

    static let insert = table.insert("insert blackouts") { "\($0)\nON CONFLICT (blackout_id) DO NOTHING" }
}

/// A row of `rental_prices_view`: what a rental's bid costs and pays, fixed when it was
/// placed (its booking shows it). `table` is its one declaration.
struct RentalPriceRow: Sendable {
    var bid = BidID.none
    var days = 0
    var totalCents = 0
    var renterFeeCents = 0
    var ownerFeeCents = 0
    var chargeCents = 0
    var payoutCents = 0
    var cancellationPolicy = CancellationPolicy.flexible
    var payWith = RentalPayMethod.card
    var depositCents: Int?

    static let table = ViewTable<RentalPriceRow>(
        "rental_prices_view", blank: RentalPriceRow(),
        [
            ViewColumn("bid_id", "uuid", \.bid),
            ViewColumn("days", "integer", \.days),
            ViewColumn("total_cents", "bigint", \.totalCents),
            ViewColumn("renter_fee_cents", "bigint", \.renterFeeCents),
            ViewColumn("owner_fee_cents", "bigint", \.ownerFeeCents),
            ViewColumn("charge_cents", "bigint", \.chargeCents),
            ViewColumn("payout_cents", "bigint", \.payoutCents),
            ViewColumn("cancellation_policy", \.cancellationPolicy),
            ViewColumn("pay_with", \.payWith),
            ViewColumn("deposit_cents", "integer", \.depositCents),
        ])

    static let insert = table.insert("insert rental prices") { "\($0)\nON CONFLICT (bid_id) DO NOTHING" }

    init(bid: BidID, _ price: RentalPrice, payWith: RentalPayMethod) {
        self.bid = bid
        (days, totalCents, renterFeeCents, ownerFeeCents) = (price.days, price.totalCents, price.renterFeeCents, price.ownerFeeCents)
        (chargeCents, payoutCents, cancellationPolicy, depositCents) =
            (price.chargeCents, price.payoutCents, price.cancellationPolicy, price.depositCents)
        self.payWith = payWith
    }

    init() {}
}
