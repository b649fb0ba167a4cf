import Civil

// Rentals booked by date (SPEC §12.1): an approved bid on a rental confirms a booking for its
// days, and the rental stays available for every other day. Bookings, blackouts and the
// rental's window live on the item's stream, so that one expected version decides them all:
// two approvals racing for overlapping days cannot both append.

// MARK: Days and periods

extension Day {
    /// Days since 1970-01-01.
    public var ordinal: Int { Civil.days(year: year, month: month, day: day) }

    /// The day `ordinal` days after 1970-01-01, held to the days a `Day` can be (0001-01-01 to
    /// 9999-12-31): arithmetic near either end stops there rather than failing.
    public init(ordinal: Int) {
        let (year, month, day) = Civil.date(fromDays: min(max(ordinal, Self.first.ordinal), Self.last.ordinal))
        self = Day(year: year, month: month, day: day) ?? Self.last
    }

    static let first = Day(year: 1, month: 1, day: 1)!
    static let last = Day(year: 9999, month: 12, day: 31)!

    public func adding(days: Int) -> Day { Day(ordinal: ordinal + days) }
}

/// Days from `from` to `until`, both included.
public struct Period: Hashable, Sendable, Codable, CustomStringConvertible {
    public var from: Day
    public var until: Day

    public init(from: Day, until: Day) {
        self.from = from
        self.until = until
    }

    public var days: Int { until.ordinal - from.ordinal + 1 }

    public func overlaps(_ other: Period) -> Bool { from <= other.until && other.from <= until }

    public func contains(_ day: Day) -> Bool { from <= day && day <= until }

    public var description: String { "\(from) to \(until)" }
}

public enum BlackoutTag {}
/// A span of days an owner has closed on their rental.
public typealias BlackoutID = Identifier<BlackoutTag>
/// A booking is named by the bid it was approved from.
public typealias BookingID = BidID

// MARK: Events

/// The approved bid's days are the renter's: no other booking or bid may take them.
public struct BookingConfirmed: EventBody, Hashable {
    public static let eventType = "BookingConfirmed"
    public var bookingID: BookingID
    public var ownerID: UserID
    public var renterID: UserID
    public var from: Day
    public var until: Day
    public var dailyPriceCents: Int
    /// The processor's capture of the bid's card authorisation, when it was held on a card.
    public var chargeID: String?
    /// The security deposit captured with the charge (SPEC §12.5); absent: none.
    public var depositCents: Int?

    public init(
        bookingID: BookingID, ownerID: UserID, renterID: UserID, from: Day, until: Day, dailyPriceCents: Int,
        chargeID: String? = nil, depositCents: Int? = nil
    ) {
        self.depositCents = depositCents
        self.bookingID = bookingID
        self.ownerID = ownerID
        self.renterID = renterID
        self.from = from
        self.until = until
        self.dailyPriceCents = dailyPriceCents
        self.chargeID = chargeID
    }
}

public struct BookingCompleted: EventBody, Hashable {
    public static let eventType = "BookingCompleted"
    public var bookingID: BookingID
    /// Its two parties, whose completed deals it counts.
    public var ownerID: UserID
    public var renterID: UserID
    /// The day it was completed on: its review window runs 14 days from it (nil for a second
    /// release's closing, whose deal is reviewed the old way).
    public var completedOn: Day?
    /// A paid booking's settlement: the owner's payout and the fees earned (absent when unpaid).
    public var payoutCents: Int?
    public var feesCents: Int?

    public init(
        bookingID: BookingID, ownerID: UserID, renterID: UserID, completedOn: Day? = nil, payoutCents: Int? = nil,
        feesCents: Int? = nil
    ) {
        self.bookingID = bookingID
        self.ownerID = ownerID
        self.renterID = renterID
        self.completedOn = completedOn
        self.payoutCents = payoutCents
        self.feesCents = feesCents
    }
}

/// The day before a booking starts, its two parties are reminded, once (the jobs' work).
public struct BookingReminded: EventBody, Hashable {
    public static let eventType = "BookingReminded"
    public var bookingID: BookingID
    public var ownerID: UserID
    public var renterID: UserID

    public init(bookingID: BookingID, ownerID: UserID, renterID: UserID) {
        self.bookingID = bookingID
        self.ownerID = ownerID
        self.renterID = renterID
    }
}

/// A booking called off before its first day, by one of its two parties: its days are free
/// again, and its charge divided by the rental's policy (all of it back when the owner cancels).
public struct BookingCancelled: EventBody, Hashable {
    public static let eventType = "BookingCancelled"
    public var bookingID: BookingID
    public var ownerID: UserID
    public var renterID: UserID
    public var cancelledBy: UserID
    public var reason: String?
    public var cancelledOn: Day
    public var refundCents: Int
    public var payoutCents: Int
    public var feesCents: Int

    public init(
        bookingID: BookingID, ownerID: UserID, renterID: UserID, cancelledBy: UserID, reason: String?, cancelledOn: Day,
        settlement: Settlement
    ) {
        self.bookingID = bookingID
        self.ownerID = ownerID
        self.renterID = renterID
        self.cancelledBy = cancelledBy
        self.reason = reason
        self.cancelledOn = cancelledOn
        self.refundCents = settlement.refundCents
        self.payoutCents = settlement.payoutCents
        self.feesCents = settlement.feesCents
    }

    public var byOwner: Bool { cancelledBy == ownerID }
}

public struct BlackoutAdded: EventBody, Hashable {
    public static let eventType = "BlackoutAdded"
    public var blackoutID: BlackoutID
    public var from: Day
    public var until: Day

    public init(blackoutID: BlackoutID, from: Day, until: Day) {
        self.blackoutID = blackoutID
        self.from = from
        self.until = until
    }
}

public struct BlackoutRemoved: EventBody, Hashable {
    public static let eventType = "BlackoutRemoved"
    public var blackoutID: BlackoutID

    public init(blackoutID: BlackoutID) {
        self.blackoutID = blackoutID
    }
}

/// A rental's new window, whole: nil ends are open.
public struct ItemWindowRevised: EventBody, Hashable {
    public static let eventType = "ItemWindowRevised"
    public var availableFrom: Day?
    public var availableUntil: Day?

    public init(availableFrom: Day?, availableUntil: Day?) {
        self.availableFrom = availableFrom
        self.availableUntil = availableUntil
    }
}

/// Its window is over: out of the market, its pending bids rejected `expired`.
public struct ItemExpired: EventBody, Hashable {
    public static let eventType = "ItemExpired"

    public init() {}
}

// MARK: State

public enum BookingStatus: String, Hashable, Sendable, Codable {
    case confirmed, completed, cancelled
}

public struct Booking: Hashable, Sendable {
    public var id: BookingID
    public var renterID: UserID
    public var period: Period
    public var dailyPriceCents: Int
    public var status: BookingStatus
    public var completedOn: Day?
    public var reviewWindowClosed = false
    public var reviewsPublished = false
    /// The capture of a card-held charge, which a refund names.
    public var chargeID: String? = nil
    public var cancelledBy: UserID? = nil
    /// Its parties were told, the day before, that it starts tomorrow.
    public var reminded = false
    /// Its security deposit (SPEC §12.5), whether it left escrow (released, or divided by an
    /// operator), the owner's claim on it, and a dispute.
    public var depositCents = 0
    public var depositSettled = false
    public var claimCents: Int? = nil
    public var dispute: BookingDispute? = nil

    /// Whether its days are taken: a cancelled booking frees them.
    public var holdsDays: Bool { status != .cancelled }
}

public struct Blackout: Hashable, Sendable {
    public var id: BlackoutID
    public var period: Period
}

/// A change of one end of a rental's window: nil leaves it, `.some(nil)` opens it.
public typealias WindowEnd = Day??

// MARK: Rules

extension ItemDecider {
    /// How far ahead of the clock's day a day may be booked, needed or closed.
    public static let bookableDaysAhead = 730

    /// A day's problems as one a rental could be on (a posting's window, a request's days, a
    /// bid's, a blackout's), as of `today`, the clock's day (UTC): from yesterday, so that a
    /// client behind UTC still has its today, to `bookableDaysAhead` days after today. None
    /// when the day is not given.
    public static func bookableProblems(_ day: Day?, field: String, today: Day) -> [FieldError] {
        guard let day else { return [] }
        let earliest = today.adding(days: -1)
        let latest = today.adding(days: bookableDaysAhead)
        if day < earliest { return [FieldError(field: field, code: "in_the_past", message: "\(earliest) or later")] }
        if latest < day { return [FieldError(field: field, code: "too_far_ahead", message: "\(latest) or earlier")] }
        return []
    }

    /// A command whose days are not all bookable is refused before any other rule (whoever
    /// gives it, wherever its item stands): 422 naming each such day, then `others`, the
    /// problems of the other fields it gave, so that every bad field is named at once.
    static func requireBookable(_ problems: [FieldError], with others: @autoclosure () -> [FieldError] = []) throws {
        guard problems.isEmpty else { throw DomainError.invalid(problems + others()) }
    }

    /// The confirmed bookings' and blackouts' periods that overlap `period`, earliest first.
    static func conflicts(_ item: PostedItem, with period: Period) -> [Period] {
        let taken = item.bookings.filter { $0.holdsDays }.map(\.period) + item.blackouts.map(\.period)
        return taken.filter { $0.overlaps(period) }.sorted { $0.from < $1.from }
    }

    static func datesUnavailable(_ conflicts: [Period]) -> DomainError {
        var error = DomainError(
            .conflict, "dates_unavailable",
            "Some of these days are booked or blocked: \(conflicts.map(\.description).joined(separator: ", ")).")
        error.conflicts = conflicts
        return error
    }

    static func requireRental(_ item: PostedItem) throws {
        guard item.kind == .rental else {
            throw DomainError(.conflict, "not_a_rental", "Only a rental is booked by date.")
        }
    }

    static func requireRequest(_ item: PostedItem) throws {
        guard item.kind == .request else {
            throw DomainError(
                .conflict, "not_a_request",
                "A rental is booked by date and stays available: complete its bookings, not the item.")
        }
    }

    /// The rental's bid approved: its days booked, and only the pending bids that overlap them
    /// rejected. A bid whose first day has begun is too late to approve.
    static func approveRental(_ bid: Bid, _ item: PostedItem, today: Day, chargeID: String?) throws -> [ItemEvent] {
        let period = Period(from: bid.from, until: bid.until)
        guard today <= bid.from else {
            throw DomainError(.conflict, "dates_passed", "The bid's first day, \(bid.from), has passed.")
        }
        // A window narrowed since the bid was placed rejected it then; this holds it anyway.
        guard item.windowFrom.map({ $0 <= bid.from }) ?? true, item.windowUntil.map({ bid.until <= $0 }) ?? true else {
            throw DomainError(.conflict, "dates_unavailable", "The bid's days are outside the rental's window.")
        }
        let conflicts = conflicts(item, with: period)
        guard conflicts.isEmpty else { throw datesUnavailable(conflicts) }
        // A card's hold is money only once captured: no booking holds an uncaptured one.
        guard bid.hold?.method != .card || chargeID != nil else {
            throw DomainError(.conflict, "payment_failed", "The card's payment was not captured.")
        }
        return [
            .bidApproved(BidApproved(bidID: bid.id)),
            .bookingConfirmed(
                BookingConfirmed(
                    bookingID: bid.id, ownerID: item.ownerID, renterID: bid.bidderID, from: bid.from, until: bid.until,
                    dailyPriceCents: bid.dailyPriceCents, chargeID: bid.hold?.method == .card ? chargeID : nil,
                    depositCents: bid.hold == nil ? nil : bid.price?.depositCents)),
        ]
            + item.pendingBids.filter { $0.id != bid.id && Period(from: $0.from, until: $0.until).overlaps(period) }
            .map { .bidRejected(BidRejected(bidID: $0.id, reason: "dates_taken")) }
    }

    /// The owner completes a booking once its last day has passed.
    static func completeBooking(_ id: BookingID, _ state: ItemState, actor: UserID, today: Day) throws -> [ItemEvent] {
        let item = try requireItem(state)
        guard let booking = item.booking(id) else { throw DomainError.bookingNotFound }
        guard actor == item.ownerID else {
            // The renter may read it, not complete it; anyone else learns nothing of it.
            guard actor == booking.renterID else { throw DomainError.bookingNotFound }
            throw DomainError(.forbidden, "not_owner", "Only the owner completes a booking.")
        }
        guard booking.status == .confirmed else {
            throw DomainError(.conflict, "booking_not_confirmed", "The booking is \(booking.status.rawValue).")
        }
        guard !booking.awaitsOperator else {
            throw DomainError(.conflict, "booking_disputed", "The booking is disputed: an operator settles it.")
        }
        guard booking.period.until < today else {
            throw DomainError(
                .conflict, "booking_not_ended", "The booking runs until \(booking.period.until); complete it after that day.")
        }
        return [.bookingCompleted(completion(of: booking, item, today: today))]
    }

    /// A booking completed: a paid one's charge settled to the owner and the fees.
    static func completion(of booking: Booking, _ item: PostedItem, today: Day) -> BookingCompleted {
        let settled = item.bid(booking.id).flatMap { $0.hold == nil ? nil : $0.price?.settlement() }
        return BookingCompleted(
            bookingID: booking.id, ownerID: item.ownerID, renterID: booking.renterID, completedOn: today,
            payoutCents: settled?.payoutCents, feesCents: settled?.feesCents)
    }

    /// Either party calls a booking off before its first day begins; anyone else learns nothing
    /// of it. The owner's cancellation refunds everything, the renter's by the rental's policy.
    static func cancelBooking(_ id: BookingID, reason: String?, _ state: ItemState, actor: UserID, today: Day) throws
        -> [ItemEvent]
    {
        let item = try requireItem(state)
        guard let booking = item.booking(id), actor == item.ownerID || actor == booking.renterID else {
            throw DomainError.bookingNotFound
        }
        if let reason, !reason.isWithin(0...500) {
            throw DomainError.invalid([FieldError(field: "reason", code: "too_long", message: "at most 500 characters")])
        }
        guard booking.status != .cancelled else {
            throw DomainError(.conflict, "booking_cancelled", "The booking is already cancelled.")
        }
        guard today < booking.period.from, booking.status == .confirmed else {
            throw DomainError(.conflict, "booking_started", "The booking began on \(booking.period.from); it can no longer be cancelled.")
        }
        let byOwner = actor == item.ownerID
        let daysBefore = booking.period.from.ordinal - today.ordinal
        var settlement =
            item.bid(id).flatMap { $0.hold == nil ? nil : $0.price?.settlement(cancelledByOwner: byOwner, daysBefore: daysBefore) }
            ?? Settlement(refundCents: 0, payoutCents: 0, feesCents: 0)
        // The deposit goes back whole, whoever cancels.
        settlement.refundCents += booking.depositCents
        return [
            .bookingCancelled(
                BookingCancelled(
                    bookingID: id, ownerID: item.ownerID, renterID: booking.renterID, cancelledBy: actor, reason: reason,
                    cancelledOn: today, settlement: settlement))
        ]
    }

    /// A rental bid's prices and the hold they need: how it pays is the bid's to say.
    static func rentalCharge(_ bid: PlaceBid, _ item: PostedItem) throws -> (RentalPrice, RentalHold) {
        guard let payWith = bid.payWith else {
            throw DomainError.invalid([
                FieldError(field: "payWith", code: "payment_required", message: "balance or card: a rental's charge is held when bidding")
            ])
        }
        guard
            let price = RentalPrice(
                dailyPriceCents: bid.dailyPriceCents, period: Period(from: bid.from, until: bid.until), fees: bid.fees,
                policy: item.cancellationPolicy, depositCents: item.depositCents)
        else {
            throw DomainError(
                .invalid, "amount_too_large", "The bid's charge would pass \(RentalPrice.maxChargeCents) cents, the most one payment may be.",
                fields: [FieldError(field: "until", code: "amount_too_large", message: "fewer days or a lower price")])
        }
        let hold = RentalHold(
            method: payWith.method, amountCents: price.heldCents, cardID: payWith.cardID, authorizationID: bid.authorizationID)
        return (price, hold)
    }

    /// Days the owner closes: never over a booking; the pending bids on them are rejected.
    static func addBlackout(_ id: BlackoutID, _ period: Period, _ state: ItemState, actor: UserID, today: Day) throws
        -> [ItemEvent]
    {
        try requireBookable(
            bookableProblems(period.from, field: "from", today: today) + bookableProblems(period.until, field: "until", today: today))
        let item = try requireOwner(state, actor)
        try requireRental(item)
        guard period.from <= period.until else {
            throw DomainError.invalid([FieldError(field: "until", code: "invalid_period", message: "until is before from")])
        }
        guard item.blackout(id) == nil else { return [] }
        try requireAvailable(item)
        guard item.blackouts.count < maxBlackouts else {
            throw DomainError(
                .conflict, "too_many_blackouts", "A rental has at most \(maxBlackouts) blackouts; remove one or join them.")
        }
        let booked = item.bookings.filter { $0.holdsDays && $0.period.overlaps(period) }.map(\.period)
        guard booked.isEmpty else {
            var error = DomainError(
                .conflict, "dates_booked",
                "These days are booked: \(booked.map(\.description).joined(separator: ", ")).")
            error.conflicts = booked
            throw error
        }
        return [.blackoutAdded(BlackoutAdded(blackoutID: id, from: period.from, until: period.until))]
            + item.pendingBids.filter { Period(from: $0.from, until: $0.until).overlaps(period) }
            .map { .bidRejected(BidRejected(bidID: $0.id, reason: "dates_blocked")) }
    }

    static func removeBlackout(_ id: BlackoutID, _ state: ItemState, actor: UserID) throws -> [ItemEvent] {
        let item = try requireOwner(state, actor)
        guard item.blackout(id) != nil else { throw DomainError.blackoutNotFound }
        return [.blackoutRemoved(BlackoutRemoved(blackoutID: id))]
    }

    /// A rental's window changed: it may not leave out a booking's day.
    static func reviseWindow(_ from: WindowEnd, _ until: WindowEnd, _ item: PostedItem) throws -> ItemEvent? {
        guard from != nil || until != nil else { return nil }
        guard item.kind == .rental else {
            let field = from != nil ? "availableFrom" : "availableUntil"
            throw DomainError.invalid([
                FieldError(field: field, code: "not_for_this_kind", message: "a request's days are neededFrom and neededUntil")
            ])
        }
        let newFrom = from ?? item.windowFrom
        let newUntil = until ?? item.windowUntil
        if let newFrom, let newUntil, newUntil < newFrom {
            throw DomainError.invalid([
                FieldError(field: "availableUntil", code: "invalid_period", message: "availableUntil is before availableFrom")
            ])
        }
        let outside = item.bookings.filter { booking in
            booking.status == .confirmed
                && ((newFrom.map { booking.period.from < $0 } ?? false) || (newUntil.map { booking.period.until > $0 } ?? false))
        }.map(\.period)
        guard outside.isEmpty else {
            var error = DomainError(
                .conflict, "dates_booked",
                "The window would leave out booked days: \(outside.map(\.description).joined(separator: ", ")).")
            error.conflicts = outside
            throw error
        }
        guard newFrom != item.windowFrom || newUntil != item.windowUntil else { return nil }
        return .windowRevised(ItemWindowRevised(availableFrom: newFrom, availableUntil: newUntil))
    }

    /// The pending bids a new window leaves out, rejected with it.
    static func leftOutside(by window: ItemWindowRevised, _ item: PostedItem) -> [ItemEvent] {
        item.pendingBids.filter { bid in
            (window.availableFrom.map { bid.from < $0 } ?? false) || (window.availableUntil.map { bid.until > $0 } ?? false)
        }.map { .bidRejected(BidRejected(bidID: $0.id, reason: "outside_window")) }
    }

    /// How many blackouts one rental may hold at once: each is folded with the item.
    public static let maxBlackouts = 100

    /// A rental with a booking still to come or under way is not withdrawn from under its
    /// renter (cancelling one is §12.2's, with its refund).
    static func requireNoConfirmedBookings(_ item: PostedItem) throws {
        let confirmed = item.bookings.filter { $0.status == .confirmed }.map(\.period)
        guard confirmed.isEmpty else {
            var error = DomainError(
                .conflict, "dates_booked",
                "The rental has confirmed bookings: \(confirmed.map(\.description).joined(separator: ", ")).")
            error.conflicts = confirmed
            throw error
        }
    }

    /// How long a pending bid waits for its owner's answer.
    public static let bidLifetimeDays = 7

    /// What time does to an item by `today`: a posting past its window expires (its pending
    /// bids with it); a pending bid whose first day has begun, or that is `stale` (placed
    /// `bidLifetimeDays` ago), is rejected `expired`; a booking whose last day has passed is
    /// completed; the parties of a booking that starts tomorrow are reminded, once. Nothing
    /// when nothing is due, so a second run, or another server's, appends nothing.
    static func runJobs(_ state: ItemState, actor: UserID, today: Day, staleBids: Set<BidID>) throws -> [ItemEvent] {
        guard actor == .system else {
            throw DomainError(.forbidden, "not_allowed", "Only the server's jobs run this.")
        }
        guard let item = state.item else { return [] }
        var events = [ItemEvent]()
        let pastWindow = item.windowUntil.map { $0 < today } ?? false
        if item.status == .available && pastWindow {
            events.append(.expired(ItemExpired()))
            events += item.pendingBids.map { .bidRejected(BidRejected(bidID: $0.id, reason: "expired")) }
        } else {
            events += item.pendingBids.filter { $0.from <= today || staleBids.contains($0.id) }
                .map { .bidRejected(BidRejected(bidID: $0.id, reason: "expired")) }
        }
        // A disputed booking waits for an operator: neither completed nor its deposit released.
        events += item.bookings.filter { $0.status == .confirmed && $0.period.until < today && !$0.awaitsOperator }.map {
            .bookingCompleted(completion(of: $0, item, today: today))
        }
        events += releasedDeposits(item, today: today)
        events += item.bookings.filter { $0.status == .confirmed && !$0.reminded && $0.period.from == today.adding(days: 1) }.map {
            .bookingReminded(BookingReminded(bookingID: $0.id, ownerID: item.ownerID, renterID: $0.renterID))
        }
        for booking in item.bookings where !booking.reviewWindowClosed {
            guard let completedOn = booking.completedOn, completedOn.adding(days: reviewWindowDays) <= today else { continue }
            events.append(.reviewWindowClosed(ReviewWindowClosed(bookingID: booking.id)))
            let held = item.completedDeals.first { $0.bidID == booking.id }?.reviewedBy.isEmpty == false
            if held && !booking.reviewsPublished { events.append(.reviewsPublished(ReviewsPublished(bookingID: booking.id))) }
        }
        return events
    }

    /// How long after its completion a booking may be reviewed.
    public static let reviewWindowDays = 14

    /// Each party reviews a completed booking once, within its window; the review is held
    /// until the other party's comes (both are published with it) or the window closes.
    static func reviewBooking(_ id: BookingID, _ review: WriteReview, _ state: ItemState, actor: UserID, today: Day) throws
        -> [ItemEvent]
    {
        let item = try requireItem(state)
        guard let booking = item.booking(id), actor == item.ownerID || actor == booking.renterID else {
            throw DomainError.bookingNotFound
        }
        var validation = Validation()
        validation.check(starRange.contains(review.stars), "stars", "invalid_stars", "a whole number from 1 to 5")
        validation.check(review.text.isWithin(0...maxReviewLength), "text", "too_long", "at most \(maxReviewLength) characters")
        try validation.throwIfInvalid()
        guard booking.status == .completed, let deal = item.completedDeals.first(where: { $0.bidID == id }) else {
            throw DomainError(.conflict, "booking_not_completed", "A booking is reviewed once it is completed.")
        }
        // Closed on the 14th day after completion, whether or not the jobs have said so yet.
        guard let completedOn = booking.completedOn, !booking.reviewWindowClosed,
            today < completedOn.adding(days: reviewWindowDays)
        else {
            throw DomainError(.conflict, "review_window_closed", "Reviews of this booking closed 14 days after it ended.")
        }
        let role: ReviewerRole = actor == item.ownerID ? .owner : .bidder
        guard !deal.reviewedBy.contains(role) else {
            throw DomainError(.conflict, "already_reviewed", "You have already reviewed this booking.")
        }
        let written = ItemEvent.reviewWritten(
            ReviewWritten(
                bidID: id, authorID: actor, subjectID: role == .owner ? booking.renterID : item.ownerID, role: role,
                stars: review.stars, text: review.text, held: true))
        // The other party has reviewed already: both are published now.
        return deal.reviewedBy.isEmpty ? [written] : [written, .reviewsPublished(ReviewsPublished(bookingID: id))]
    }


    /// What the booking events change. A second release's `ItemReserved` on a rental reads as a
    /// booking over the approved bid's days and its `ItemClosed` as that booking's completion,
    /// so that an old log folds to the state a new one would have.
    static func evolveBookings(_ item: inout PostedItem, _ event: ItemEvent) {
        switch event {
        case .bookingConfirmed(let confirmed):
            item.bookings.append(
                Booking(
                    id: confirmed.bookingID, renterID: confirmed.renterID,
                    period: Period(from: confirmed.from, until: confirmed.until), dailyPriceCents: confirmed.dailyPriceCents,
                    status: .confirmed, chargeID: confirmed.chargeID, depositCents: confirmed.depositCents ?? 0))
        case .bookingCancelled(let cancelled):
            if let index = item.bookings.firstIndex(where: { $0.id == cancelled.bookingID }) {
                item.bookings[index].status = .cancelled
                item.bookings[index].cancelledBy = cancelled.cancelledBy
            }
        case .bookingCompleted(let completed):
            if let index = item.bookings.firstIndex(where: { $0.id == completed.bookingID }) {
                item.bookings[index].status = .completed
                item.bookings[index].completedOn = completed.completedOn
                // A second release's closing: its deal is reviewed the old way, not this one's.
                if completed.completedOn == nil { item.bookings[index].reviewWindowClosed = true }
                let booking = item.bookings[index]
                item.completedDeals.append(CompletedDeal(bidID: booking.id, bidderID: booking.renterID))
            }
        case .blackoutAdded(let added):
            item.blackouts.append(Blackout(id: added.blackoutID, period: Period(from: added.from, until: added.until)))
        case .blackoutRemoved(let removed):
            item.blackouts.removeAll { $0.id == removed.blackoutID }
        case .windowRevised(let revised):
            item.windowFrom = revised.availableFrom
            item.windowUntil = revised.availableUntil
        case .reviewsPublished(let published):
            if let index = item.bookings.firstIndex(where: { $0.id == published.bookingID }) {
                item.bookings[index].reviewsPublished = true
            }
            for role in [ReviewerRole.owner, .bidder] {
                item.reviews[ReviewKey(BidID(published.bookingID.rawValue), role)]?.published = true
            }
        case .reviewWindowClosed(let closed):
            if let index = item.bookings.firstIndex(where: { $0.id == closed.bookingID }) {
                item.bookings[index].reviewWindowClosed = true
            }
        case .bookingReminded(let reminded):
            if let index = item.bookings.firstIndex(where: { $0.id == reminded.bookingID }) {
                item.bookings[index].reminded = true
            }
        default:
            break
        }
    }
}

extension PostedItem {
    public func booking(_ id: BookingID) -> Booking? { bookings.first { $0.id == id } }
    public func blackout(_ id: BlackoutID) -> Blackout? { blackouts.first { $0.id == id } }
}

extension DomainError {
    public static let bookingNotFound = DomainError(.notFound, "booking_not_found", "No such booking.")
    public static let blackoutNotFound = DomainError(.notFound, "blackout_not_found", "No such blackout.")
}
