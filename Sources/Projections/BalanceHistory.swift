import Aggregates
import EventStore
import Foundation
import Marketplace

/// One move of a user's money, as a statement shows it: straight from their stream, with the
/// balance and what was available after it.
public struct BalanceEntry: Codable, Sendable, Equatable {
    public var position: Int64
    public var at: Date
    /// `deposit`, `debit`, `credit`, `card_charge`, `hold`, `release`, `rental_payment`,
    /// `rental_refund`, `rental_earnings`, `payout`, `payout_returned` (a failed payout's amount, back), `settlement` (an operator's, outside Lender).
    public var kind: String
    /// Why: `checkout`, `repayment`, `refund`, or how a rental was paid (`balance`, `card`).
    public var reason: String?
    public var amountCents: Int
    /// What it did to the balance and to what is held of it (a card's moves: 0).
    public var balanceChangeCents: Int
    public var heldChangeCents: Int
    public var balanceCents: Int
    public var availableCents: Int
    public var loanId: LoanID?
    /// The card a deposit or a card payment was charged to.
    public var cardId: CardID?
    public var itemId: ItemID?
    public var bidId: BidID?
    public var bookingId: BookingID?
}

/// `GET /v1/me/balance-history`: every credit, debit, hold and release of a user's money,
/// newest first, paged by position. The balance after each is folded from the stream's start
/// by the same statement of each event's effect as the stream's own fold (`balanceChange`).
public enum BalanceHistory {
    public static func entries(of user: UserID, in store: EventStore, before: Int64?, limit: Int) async throws
        -> (entries: [BalanceEntry], more: Bool)
    {
        var balance = 0
        var held = 0
        var entries = [BalanceEntry]()
        for recorded in try await store.readStream(.user(user)) {
            let event = try Aggregate.user.codec.decode(recorded)
            guard let move = move(of: event) else { continue }
            let change = UserDecider.balanceChange(of: event)
            balance += change.balanceCents
            held += change.heldCents
            guard before.map({ recorded.position < $0 }) ?? true else { continue }
            entries.append(
                BalanceEntry(
                    position: recorded.position, at: recorded.recordedAt, kind: move.kind, reason: move.reason,
                    amountCents: move.amount, balanceChangeCents: change.balanceCents, heldChangeCents: change.heldCents,
                    balanceCents: balance, availableCents: balance - held, loanId: move.loan, cardId: move.card, itemId: move.item,
                    bidId: move.bid,
                    bookingId: move.booking))
        }
        let newest = entries.reversed()
        return (Array(newest.prefix(limit)), newest.count > limit)
    }

    typealias Move = (
        kind: String, reason: String?, amount: Int, loan: LoanID?, card: CardID?, item: ItemID?, bid: BidID?, booking: BookingID?
    )

    static func move(of event: UserEvent) -> Move? {
        switch event {
        case .fundsDeposited(let deposit): ("deposit", nil, deposit.amountCents, nil, deposit.cardID, nil, nil, nil)
        case .balanceDebited(let debit): ("debit", debit.reason.rawValue, debit.amountCents, debit.loanID, nil, nil, nil, nil)
        case .cardCharged(let charged):
            ("card_charge", (charged.purpose ?? .checkout).rawValue, charged.amountCents, charged.loanID, charged.cardID, nil, nil, nil)
        case .balanceCredited(let credit):
            ("credit", credit.reason.rawValue, credit.amountCents, credit.loanID, nil, nil, nil, nil)
        case .rentalHoldPlaced(let placed):
            ("hold", placed.hold.method.rawValue, placed.hold.amountCents, nil, placed.hold.cardID, placed.itemID, placed.bidID, nil)
        case .rentalHoldReleased(let released):
            (
                "release", released.hold.method.rawValue, released.hold.amountCents, nil, released.hold.cardID, released.itemID,
                released.bidID, nil
            )
        case .rentalPaid(let paid):
            ("rental_payment", paid.method.rawValue, paid.amountCents, nil, nil, paid.itemID, paid.bookingID, paid.bookingID)
        case .rentalRefunded(let refund):
            ("rental_refund", refund.method.rawValue, refund.amountCents, nil, nil, refund.itemID, refund.bookingID, refund.bookingID)
        case .rentalEarned(let earned):
            ("rental_earnings", nil, earned.payoutCents, nil, nil, earned.itemID, earned.bookingID, earned.bookingID)
        case .payoutRequested(let requested): ("payout", nil, requested.amountCents, nil, nil, nil, nil, nil)
        case .payoutFailed(let failed): ("payout_returned", failed.reason, failed.amountCents, nil, nil, nil, nil, nil)
        case .balanceSettled(let settled): ("settlement", settled.reason, settled.amountCents, nil, nil, nil, nil, nil)
        default: nil
        }
    }
}
