// Security deposits, claims and disputes (SPEC §12.5). A rental's deposit is held with each
// bid's charge and captured into the booking's escrow at approval; completion pays the owner
// and leaves the deposit there. The jobs give it back 72 hours after the booking's last day,
// unless the owner claimed part of it or either party opened a dispute: then the escrow is
// frozen, and only an operator's resolution, which divides exactly what is held, releases it.
// Every move is an item event whose money `RentalMoney` puts on the users' streams in the
// same append.

/// The days after a booking's last day in which its owner may claim and either party may
/// dispute (72 hours, counted in whole days); the deposit goes back after them.
public let claimWindowDays = 3

/// The most a rental may ask as a deposit.
public let depositRange = 0...100_000

public enum DisputeReason: String, Hashable, Sendable, Codable, CaseIterable {
    case notReturned = "not_returned"
    case damaged
    case notAsDescribed = "not_as_described"
    case noShow = "no_show"
    case other
}

/// The deposit went back to the renter: the claim window closed with no claim or dispute.
public struct DepositReleased: EventBody, Hashable {
    public static let eventType = "DepositReleased"
    public var bookingID: BookingID
    public var renterID: UserID
    public var amountCents: Int

    public init(bookingID: BookingID, renterID: UserID, amountCents: Int) {
        self.bookingID = bookingID
        self.renterID = renterID
        self.amountCents = amountCents
    }
}

/// The owner claimed part of the deposit (the renter's money waits for an operator).
public struct DepositClaimed: EventBody, Hashable {
    public static let eventType = "DepositClaimed"
    public var bookingID: BookingID
    public var ownerID: UserID
    public var renterID: UserID
    public var amountCents: Int
    /// The owner's words (personal: sealed with their key).
    public var text: String?

    public init(bookingID: BookingID, ownerID: UserID, renterID: UserID, amountCents: Int, text: String?) {
        self.bookingID = bookingID
        self.ownerID = ownerID
        self.renterID = renterID
        self.amountCents = amountCents
        self.text = text
    }
}

/// A party disputed the booking: its escrow and deposit frozen until an operator resolves it.
public struct DisputeOpened: EventBody, Hashable {
    public static let eventType = "DisputeOpened"
    public var bookingID: BookingID
    public var ownerID: UserID
    public var renterID: UserID
    public var openedBy: UserID
    public var reason: DisputeReason
    /// The party's words (personal: sealed with their key).
    public var text: String?

    public init(
        bookingID: BookingID, ownerID: UserID, renterID: UserID, openedBy: UserID, reason: DisputeReason, text: String?
    ) {
        self.bookingID = bookingID
        self.ownerID = ownerID
        self.renterID = renterID
        self.openedBy = openedBy
        self.reason = reason
        self.text = text
    }
}

/// An operator divided what the booking held: `renterCents` back to the renter, `ownerCents`
/// to the owner; they add up to it exactly. A booking still under way is completed with it.
public struct DisputeResolved: EventBody, Hashable {
    public static let eventType = "DisputeResolved"
    public var bookingID: BookingID
    public var ownerID: UserID
    public var renterID: UserID
    public var operatorID: UserID
    public var renterCents: Int
    public var ownerCents: Int
    public var reason: String

    public init(
        bookingID: BookingID, ownerID: UserID, renterID: UserID, operatorID: UserID, renterCents: Int, ownerCents: Int,
        reason: String
    ) {
        self.bookingID = bookingID
        self.ownerID = ownerID
        self.renterID = renterID
        self.operatorID = operatorID
        self.renterCents = renterCents
        self.ownerCents = ownerCents
        self.reason = reason
    }
}

/// A booking's dispute as its item holds it.
public struct BookingDispute: Hashable, Sendable {
    public var openedBy: UserID
    public var resolved = false
}

extension Booking {
    /// What the booking's escrow holds now: all it was paid while under way (charge and
    /// deposit), the deposit after completion until it is released or resolved.
    func heldCents(in item: PostedItem) -> Int {
        switch status {
        case .confirmed: item.bid(id)?.hold?.amountCents ?? 0
        case .completed: depositSettled ? 0 : depositCents
        case .cancelled: 0
        }
    }

    /// Waiting for an operator: a dispute not yet resolved, or a claim on a deposit not yet settled.
    public var awaitsOperator: Bool {
        (dispute.map { !$0.resolved } ?? false) || (claimCents != nil && !depositSettled)
    }

    /// The last day a claim or a dispute is taken.
    var claimUntil: Day { period.until.adding(days: claimWindowDays) }
}

extension ItemDecider {
    static func party(_ id: BookingID, _ state: ItemState, actor: UserID) throws -> (PostedItem, Booking) {
        let item = try requireItem(state)
        guard let booking = item.booking(id), actor == item.ownerID || actor == booking.renterID else {
            throw DomainError.bookingNotFound
        }
        return (item, booking)
    }

    /// The owner claims up to the deposit after the booking's last day, within the window.
    static func claimDeposit(_ id: BookingID, amountCents: Int, text: String?, _ state: ItemState, actor: UserID, today: Day)
        throws -> [ItemEvent]
    {
        let (item, booking) = try party(id, state, actor: actor)
        guard actor == item.ownerID else { throw DomainError(.forbidden, "not_owner", "Only the owner claims a deposit.") }
        var validation = Validation()
        validation.check(
            (1...max(1, booking.depositCents)).contains(amountCents), "amountCents", "invalid_amount",
            "1 to the deposit, \(booking.depositCents) cents")
        if let text, !text.isWithin(0...maxClaimText) {
            validation.check(false, "text", "too_long", "at most 2000 characters")
        } else {
            validation.check(!(text ?? "").trimmingWhiteSpace().isEmpty, "text", "required", "what happened, in 1 to 2000 characters")
        }
        try validation.throwIfInvalid()
        guard booking.status != .cancelled else { throw DomainError(.conflict, "booking_cancelled", "The booking was cancelled.") }
        guard booking.depositCents > 0 else { throw DomainError(.conflict, "no_deposit", "This booking holds no deposit.") }
        guard booking.period.until < today else {
            throw DomainError(.conflict, "booking_not_ended", "The booking runs until \(booking.period.until); claim after it.")
        }
        // A claim is on the deposit alone: what completion leaves in escrow. Complete it first
        // (the jobs do the day after its last), so a claim never freezes the renter's charge.
        guard booking.status == .completed else {
            throw DomainError(.conflict, "booking_not_completed", "Complete the booking first; then claim on its deposit.")
        }
        guard booking.claimCents == nil else { throw DomainError(.conflict, "claim_exists", "This deposit is claimed already.") }
        guard today <= booking.claimUntil, !booking.depositSettled else {
            throw DomainError(
                .conflict, "claim_window_closed", "Claims closed 72 hours after the booking's last day, on \(booking.claimUntil).")
        }
        return [
            .depositClaimed(
                DepositClaimed(bookingID: id, ownerID: item.ownerID, renterID: booking.renterID, amountCents: amountCents, text: text))
        ]
    }

    /// Either party disputes a booking from its first day to 72 hours after its last.
    static func openDispute(_ id: BookingID, reason: DisputeReason, text: String?, _ state: ItemState, actor: UserID, today: Day)
        throws -> [ItemEvent]
    {
        let (item, booking) = try party(id, state, actor: actor)
        if let text, !text.isWithin(0...maxClaimText) {
            throw DomainError.invalid([FieldError(field: "text", code: "too_long", message: "at most 2000 characters")])
        }
        guard booking.status != .cancelled else { throw DomainError(.conflict, "booking_cancelled", "The booking was cancelled.") }
        guard booking.dispute == nil else { throw DomainError(.conflict, "dispute_exists", "This booking is disputed already.") }
        guard booking.period.from <= today, today <= booking.claimUntil, !booking.depositSettled else {
            throw DomainError(
                .conflict, "dispute_window_closed",
                "A booking is disputed from its first day, \(booking.period.from), to 72 hours after its last, \(booking.claimUntil).")
        }
        return [
            .disputeOpened(
                DisputeOpened(
                    bookingID: id, ownerID: item.ownerID, renterID: booking.renterID, openedBy: actor, reason: reason, text: text))
        ]
    }

    /// An operator divides what the booking holds (the role is the use case's to check): a
    /// dispute's or a claim's end. A booking still under way is completed with it, unpaid by
    /// the usual settlement: the resolution is its settlement.
    static func resolveDispute(
        _ id: BookingID, renterCents: Int, ownerCents: Int, reason: String, _ state: ItemState, actor: UserID, today: Day
    ) throws -> [ItemEvent] {
        let item = try requireItem(state)
        guard let booking = item.booking(id) else { throw DomainError.bookingNotFound }
        var problems = OperatorReason.problems(reason)
        let held = booking.heldCents(in: item)
        // Compared without adding: two huge amounts must not overflow.
        if !(0...held).contains(renterCents) || ownerCents != held - renterCents {
            problems.append(
                FieldError(
                    field: "renterCents", code: "amounts_do_not_add_up",
                    message: "renterCents and ownerCents, neither below 0, add up to what the booking holds: \(held) cents"))
        }
        guard booking.awaitsOperator else {
            throw DomainError(.conflict, "nothing_to_resolve", "This booking has no open dispute or claim.")
        }
        try DomainError.throwIfAny(problems)
        var events: [ItemEvent] = [
            .disputeResolved(
                DisputeResolved(
                    bookingID: id, ownerID: item.ownerID, renterID: booking.renterID, operatorID: actor, renterCents: renterCents,
                    ownerCents: ownerCents, reason: reason.trimmingWhiteSpace()))
        ]
        if booking.status == .confirmed {
            events.append(
                .bookingCompleted(
                    BookingCompleted(bookingID: id, ownerID: item.ownerID, renterID: booking.renterID, completedOn: today)))
        }
        return events
    }

    /// An operator cancels a booking still to come as its owner would (everything back to the
    /// renter), in the operator's name.
    static func cancelAsOperator(_ id: BookingID, reason: String, _ state: ItemState, actor: UserID, today: Day) throws
        -> [ItemEvent]
    {
        let item = try requireItem(state)
        guard item.booking(id) != nil else { throw DomainError.bookingNotFound }
        try DomainError.throwIfAny(OperatorReason.problems(reason))
        guard case .bookingCancelled(var cancelled)? = try cancelBooking(id, reason: nil, state, actor: item.ownerID, today: today).first
        else { return [] }
        cancelled.cancelledBy = actor
        cancelled.reason = reason.trimmingWhiteSpace()
        return [.bookingCancelled(cancelled)]
    }

    /// The deposits whose window closed with nothing claimed or disputed, back to their renters.
    static func releasedDeposits(_ item: PostedItem, today: Day) -> [ItemEvent] {
        item.bookings.filter {
            $0.status == .completed && $0.depositCents > 0 && !$0.depositSettled && $0.claimCents == nil && $0.dispute == nil
                && $0.claimUntil < today
        }.map { .depositReleased(DepositReleased(bookingID: $0.id, renterID: $0.renterID, amountCents: $0.depositCents)) }
    }

    static let maxClaimText = 2000

    static func evolveDisputes(_ item: inout PostedItem, _ event: ItemEvent) {
        func change(_ id: BookingID, _ body: (inout Booking) -> Void) {
            if let index = item.bookings.firstIndex(where: { $0.id == id }) { body(&item.bookings[index]) }
        }
        switch event {
        case .depositReleased(let released):
            change(released.bookingID) { $0.depositSettled = true }
        case .depositClaimed(let claimed):
            change(claimed.bookingID) { $0.claimCents = claimed.amountCents }
        case .disputeOpened(let opened):
            change(opened.bookingID) { $0.dispute = BookingDispute(openedBy: opened.openedBy) }
        case .disputeResolved(let resolved):
            change(resolved.bookingID) { booking in
                booking.depositSettled = true
                booking.dispute?.resolved = true
            }
        default:
            break
        }
    }
}
