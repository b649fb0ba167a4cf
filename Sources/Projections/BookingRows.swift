import Foundation
import Marketplace
import Postgres

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
