// A rental paid on the platform (SPEC §12.2). The bid fixes the prices and puts the charge on
// hold, on the renter's balance or as a card authorisation; the approval captures it into
// escrow for the booking; completion or cancellation settles it: the owner's payout, the
// fees earned, the renter's refund. Every move of money is an event on the stream of the user
// whose money it is, appended with the item's event that causes it: the item's stream decides
// (once, with its version), the users' streams keep the ledger.

// MARK: Prices

/// The marketplace's fees, in basis points of a booking's total (`RENTER_FEE_BPS`,
/// `OWNER_FEE_BPS`); passed into each bid and fixed in its event.
public struct RentalFees: Hashable, Sendable, Codable {
    public var renterBps: Int
    public var ownerBps: Int

    public init(renterBps: Int = 500, ownerBps: Int = 1000) {
        self.renterBps = renterBps
        self.ownerBps = ownerBps
    }

    public static let standard = RentalFees()
    /// Up to the whole total.
    public static let bpsRange = 0...10_000
}

/// How much of a booking's money the renter gets back when they cancel (SPEC §12.2's table).
public enum CancellationPolicy: String, Hashable, Sendable, Codable, CaseIterable {
    case flexible, moderate, strict

    /// The percentage refunded when cancelled `daysBefore` whole days before the first day.
    public func refundPercent(daysBefore: Int) -> Int {
        switch self {
        case .flexible: 100
        case .moderate: daysBefore >= 7 ? 100 : 50
        case .strict: daysBefore >= 7 ? 50 : 0
        }
    }
}

/// `amount × bps / 10000`, rounded half up to the cent (amounts are never negative).
public func basisPoints(_ amount: Int, _ bps: Int) -> Int {
    (amount * bps + 5_000) / 10_000
}

/// What a bid on a rental costs, fixed in its event.
public struct RentalPrice: Hashable, Sendable, Codable {
    public var days: Int
    public var totalCents: Int
    public var renterFeeCents: Int
    public var ownerFeeCents: Int
    /// Total plus the renter's fee: what is held, and captured at approval.
    public var chargeCents: Int
    /// Total less the owner's fee: what the owner is paid at completion.
    public var payoutCents: Int
    /// The owner's fee rate, for the fee on the part a cancellation keeps.
    public var ownerFeeBps: Int
    public var cancellationPolicy: CancellationPolicy
    /// The rental's security deposit (SPEC §12.5), held and captured with the charge, and
    /// released to the renter after the booking unless claimed; absent: none.
    public var depositCents: Int?

    /// What is held for the bid and captured into escrow at approval: the charge and the deposit.
    public var heldCents: Int { chargeCents + (depositCents ?? 0) }

    /// The most one charge may be: a processor's limit (Stripe's is 999,999.99).
    public static let maxChargeCents = 99_999_999

    /// Nil when what is held would pass `maxChargeCents` (or 64 bits on the way there).
    public init?(dailyPriceCents: Int, period: Period, fees: RentalFees, policy: CancellationPolicy, depositCents: Int = 0) {
        let days = period.days
        let (total, overflow) = dailyPriceCents.multipliedReportingOverflow(by: days)
        // Checked before the fees' arithmetic, which stays far inside 64 bits under it.
        guard !overflow, days > 0, total <= Self.maxChargeCents else { return nil }
        let renterFee = basisPoints(total, fees.renterBps)
        let ownerFee = basisPoints(total, fees.ownerBps)
        guard total + renterFee + depositCents <= Self.maxChargeCents else { return nil }
        self.depositCents = depositCents > 0 ? depositCents : nil
        self.days = days
        self.totalCents = total
        self.renterFeeCents = renterFee
        self.ownerFeeCents = ownerFee
        self.chargeCents = total + renterFee
        self.payoutCents = total - ownerFee
        self.ownerFeeBps = fees.ownerBps
        self.cancellationPolicy = policy
    }

    /// Where a booking's charge goes at its end. Completion: the owner's payout and both fees.
    /// A cancellation by the renter `daysBefore` its first day: the policy's percentage of the
    /// total and of the renter's fee back (each rounded half up), the rest settled as at
    /// completion on what is kept; by the owner: everything back.
    public func settlement(cancelledByOwner: Bool? = nil, daysBefore: Int = 0) -> Settlement {
        guard let byOwner = cancelledByOwner else {
            return Settlement(refundCents: 0, payoutCents: payoutCents, feesCents: renterFeeCents + ownerFeeCents)
        }
        let percent = byOwner ? 100 : cancellationPolicy.refundPercent(daysBefore: daysBefore)
        let totalBack = (totalCents * percent + 50) / 100
        let feeBack = (renterFeeCents * percent + 50) / 100
        let kept = totalCents - totalBack
        let ownerFee = basisPoints(kept, ownerFeeBps)
        return Settlement(
            refundCents: totalBack + feeBack, payoutCents: kept - ownerFee, feesCents: renterFeeCents - feeBack + ownerFee)
    }
}

/// A booking's charge, divided: refund + payout + fees is always the charge (a cancellation's
/// refund then adds the deposit, given back whole).
public struct Settlement: Hashable, Sendable, Codable {
    public var refundCents: Int
    public var payoutCents: Int
    public var feesCents: Int

    public init(refundCents: Int, payoutCents: Int, feesCents: Int) {
        (self.refundCents, self.payoutCents, self.feesCents) = (refundCents, payoutCents, feesCents)
    }
}

// MARK: Holds

/// How a rental's charge is paid.
public enum RentalPayMethod: String, Hashable, Sendable, Codable {
    case balance, card
}

/// What a bid asks to pay with: the balance, or a card on file.
public enum PayWith: Hashable, Sendable {
    case balance
    case card(CardID)

    public var method: RentalPayMethod { if case .card = self { .card } else { .balance } }
    public var cardID: CardID? { if case .card(let id) = self { id } else { nil } }
}

/// The charge put on hold for a bid: on the balance, or a card's authorisation.
public struct RentalHold: Hashable, Sendable, Codable {
    public var method: RentalPayMethod
    public var amountCents: Int
    public var cardID: CardID?
    /// The processor's authorisation (cards only).
    public var authorizationID: String?

    public init(method: RentalPayMethod, amountCents: Int, cardID: CardID? = nil, authorizationID: String? = nil) {
        self.method = method
        self.amountCents = amountCents
        self.cardID = cardID
        self.authorizationID = authorizationID
    }
}

// MARK: Events on a user's stream

/// A bid's charge put on hold: on the balance (it stays in the balance, no longer available),
/// or authorised on a card (no money moved yet).
public struct RentalHoldPlaced: EventBody, Hashable {
    public static let eventType = "RentalHoldPlaced"
    public var bidID: BidID
    public var itemID: ItemID
    public var hold: RentalHold

    public init(bidID: BidID, itemID: ItemID, hold: RentalHold) {
        self.bidID = bidID
        self.itemID = itemID
        self.hold = hold
    }
}

/// The bid ended without a booking: the hold is free again (a card's authorisation voided).
public struct RentalHoldReleased: EventBody, Hashable {
    public static let eventType = "RentalHoldReleased"
    public var bidID: BidID
    public var itemID: ItemID
    public var hold: RentalHold

    public init(bidID: BidID, itemID: ItemID, hold: RentalHold) {
        self.bidID = bidID
        self.itemID = itemID
        self.hold = hold
    }
}

/// The hold captured at approval: the charge leaves the balance, or the card is charged,
/// into the booking's escrow.
public struct RentalPaid: EventBody, Hashable {
    public static let eventType = "RentalPaid"
    public var bookingID: BookingID
    public var itemID: ItemID
    public var method: RentalPayMethod
    public var amountCents: Int
    /// The processor's charge made by capturing the authorisation (cards only).
    public var chargeID: String?

    public init(bookingID: BookingID, itemID: ItemID, method: RentalPayMethod, amountCents: Int, chargeID: String? = nil) {
        self.bookingID = bookingID
        self.itemID = itemID
        self.method = method
        self.amountCents = amountCents
        self.chargeID = chargeID
    }
}

/// A cancelled booking's refund, back where the money came from: to the balance, or to the
/// card by a processor refund keyed by the booking.
public struct RentalRefunded: EventBody, Hashable {
    public static let eventType = "RentalRefunded"
    public var bookingID: BookingID
    public var itemID: ItemID
    public var method: RentalPayMethod
    public var amountCents: Int
    public var chargeID: String?

    public init(bookingID: BookingID, itemID: ItemID, method: RentalPayMethod, amountCents: Int, chargeID: String? = nil) {
        self.bookingID = bookingID
        self.itemID = itemID
        self.method = method
        self.amountCents = amountCents
        self.chargeID = chargeID
    }
}

/// The owner's share of a settled booking, credited to their balance, and the fees the
/// marketplace earned on it, on the owner's stream.
public struct RentalEarned: EventBody, Hashable {
    public static let eventType = "RentalEarned"
    public var bookingID: BookingID
    public var itemID: ItemID
    public var payoutCents: Int
    public var feesCents: Int

    public init(bookingID: BookingID, itemID: ItemID, payoutCents: Int, feesCents: Int) {
        self.bookingID = bookingID
        self.itemID = itemID
        self.payoutCents = payoutCents
        self.feesCents = feesCents
    }
}

// MARK: Rules

extension UserDecider {
    /// The hold a bid's charge needs on the renter's money: the available balance must cover
    /// it, or the card must be theirs and chargeable (it is then authorised).
    public static func checkHold(_ amountCents: Int, paying payWith: PayWith, _ state: UserState, today: Day) throws {
        guard state.exists else { throw DomainError.userNotFound }
        switch payWith {
        case .balance:
            guard state.availableCents >= amountCents else {
                throw DomainError(
                    .conflict, "insufficient_funds",
                    "The available balance is \(state.availableCents) cents; the bid's charge is \(amountCents) cents.")
            }
        case .card(let cardID):
            _ = try chargeableCard(cardID, in: state, today: today)
        }
    }

    /// The balance's and the holds' changes of a money event: the one statement of what each
    /// does to a balance, for the stream's fold and for the views.
    public static func balanceChange(of event: UserEvent) -> (balanceCents: Int, heldCents: Int) {
        switch event {
        case .fundsDeposited(let deposit): (deposit.amountCents, 0)
        case .balanceDebited(let debit): (-debit.amountCents, 0)
        case .balanceCredited(let credit): (credit.amountCents, 0)
        case .rentalHoldPlaced(let placed) where placed.hold.method == .balance: (0, placed.hold.amountCents)
        case .rentalHoldReleased(let released) where released.hold.method == .balance: (0, -released.hold.amountCents)
        case .rentalPaid(let paid) where paid.method == .balance: (-paid.amountCents, -paid.amountCents)
        case .rentalRefunded(let refund) where refund.method == .balance: (refund.amountCents, 0)
        case .rentalEarned(let earned): (earned.payoutCents, 0)
        case .payoutRequested(let requested): (-requested.amountCents, 0)
        case .payoutFailed(let failed): (failed.amountCents, 0)
        case .balanceSettled(let settled): (-settled.amountCents, 0)
        default: (0, 0)
        }
    }
}

/// The users' side of an item's events: each move of money they cause, on the stream of the
/// user whose money it is, for the same append. Decided from the item as it stood before
/// the events (its bids' holds, its bookings' prices) and the events themselves.
public enum RentalMoney {
    public static func moves(of events: [ItemEvent], on state: ItemState) -> [(user: UserID, event: UserEvent)] {
        guard var item = state.item else { return [] }
        var moves = [(user: UserID, event: UserEvent)]()
        for event in events {
            switch event {
            case .bidWithdrawn(let withdrawn):
                moves += release(withdrawn.bidID, item)
            case .bidRejected(let rejected):
                moves += release(rejected.bidID, item)
            case .bookingConfirmed(let confirmed):
                if let hold = item.bid(confirmed.bookingID)?.hold {
                    moves.append(
                        (confirmed.renterID,
                         .rentalPaid(
                            RentalPaid(
                                bookingID: confirmed.bookingID, itemID: item.id, method: hold.method, amountCents: hold.amountCents,
                                chargeID: confirmed.chargeID))))
                }
            case .bookingCompleted(let completed):
                if let payout = completed.payoutCents, let fees = completed.feesCents, payout + fees > 0 {
                    moves.append(
                        (completed.ownerID,
                         .rentalEarned(RentalEarned(bookingID: completed.bookingID, itemID: item.id, payoutCents: payout, feesCents: fees))))
                }
            case .bookingCancelled(let cancelled):
                moves += escrowOut(
                    of: cancelled.bookingID, item, refund: cancelled.refundCents, payout: cancelled.payoutCents,
                    fees: cancelled.feesCents)
            case .depositReleased(let released):
                moves += escrowOut(of: released.bookingID, item, refund: released.amountCents)
            case .disputeResolved(let resolved):
                moves += escrowOut(of: resolved.bookingID, item, refund: resolved.renterCents, payout: resolved.ownerCents)
            default:
                break
            }
            ItemDecider.evolve(&item, event)
        }
        return moves
    }

    /// Money leaving a paid booking's escrow: `refund` back to the renter (to the balance, or
    /// to the card the booking's capture charged), `payout` and `fees` to the owner's stream.
    static func escrowOut(of id: BookingID, _ item: PostedItem, refund: Int, payout: Int = 0, fees: Int = 0)
        -> [(user: UserID, event: UserEvent)]
    {
        guard let booking = item.booking(id), let hold = item.bid(id)?.hold else { return [] }
        var moves = [(user: UserID, event: UserEvent)]()
        if refund > 0 {
            moves.append(
                (booking.renterID,
                 .rentalRefunded(
                    RentalRefunded(
                        bookingID: id, itemID: item.id, method: hold.method, amountCents: refund, chargeID: booking.chargeID))))
        }
        if payout + fees > 0 {
            moves.append(
                (item.ownerID, .rentalEarned(RentalEarned(bookingID: id, itemID: item.id, payoutCents: payout, feesCents: fees))))
        }
        return moves
    }

    /// A pending bid's hold freed, when it has one.
    static func release(_ bidID: BidID, _ item: PostedItem) -> [(user: UserID, event: UserEvent)] {
        guard let bid = item.bid(bidID), bid.status == .pending, let hold = bid.hold else { return [] }
        return [(bid.bidderID, .rentalHoldReleased(RentalHoldReleased(bidID: bidID, itemID: item.id, hold: hold)))]
    }
}
