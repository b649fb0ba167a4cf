import Foundation

/// An operator took an item out of the market (SPEC §12.5): its pending bids rejected
/// (`item_taken_down`, their holds released), its upcoming bookings cancelled as by its owner
/// (all of it back to the renters). The event's actor is the operator, and so is
/// `operatorID`, for the views and `audit bids`.
public struct ItemTakenDown: EventBody, Hashable {
    public static let eventType = "ItemTakenDown"
    public var operatorID: UserID
    /// The operator's words: why.
    public var reason: String

    public init(operatorID: UserID, reason: String) {
        self.operatorID = operatorID
        self.reason = reason
    }
}

extension ItemDecider {
    /// The operator's role is the use case's to check; the decider holds what a takedown does.
    static func takeDown(reason: String, _ state: ItemState, actor: UserID, today: Day) throws -> [ItemEvent] {
        let item = try requireItem(state)
        let problems = OperatorReason.problems(reason)
        if !problems.isEmpty { throw DomainError.invalid(problems) }
        guard item.status != .takenDown else {
            throw DomainError(.conflict, "item_taken_down", "This item is taken down already.")
        }
        var events: [ItemEvent] = []
        for booking in item.bookings where booking.status == .confirmed && today < booking.period.from {
            // By the owner's rule: a cancellation by the owner refunds the renter in full.
            events += try cancelBooking(booking.id, reason: nil, state, actor: item.ownerID, today: today)
        }
        events += item.pendingBids.map { .bidRejected(BidRejected(bidID: $0.id, reason: "item_taken_down")) }
        events.append(.takenDown(ItemTakenDown(operatorID: actor, reason: reason.trimmingWhiteSpace())))
        return events
    }
}
