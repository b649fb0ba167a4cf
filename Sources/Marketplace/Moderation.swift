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

/// An operator took a fundraising loan down (SPEC §12.5): out of every list, and what each
/// lender paid refunded to their balance in the same append, as an expiry does.
public struct LoanTakenDown: EventBody, Hashable {
    public static let eventType = "LoanTakenDown"
    public var operatorID: UserID
    public var reason: String
    public var refunds: [LenderAmount]

    public init(operatorID: UserID, reason: String, refunds: [LenderAmount]) {
        self.operatorID = operatorID
        self.reason = reason
        self.refunds = refunds
    }
}

/// An operator hid a message (SPEC §12.5): its conversation shows `hiddenText` in its place.
public struct MessageHidden: EventBody, Hashable {
    public static let eventType = "MessageHidden"
    public var messageID: MessageID
    public var operatorID: UserID
    public var reason: String

    public init(messageID: MessageID, operatorID: UserID, reason: String) {
        self.messageID = messageID
        self.operatorID = operatorID
        self.reason = reason
    }

    public static let hiddenText = "[hidden by an operator]"
}

/// An operator hid a review (SPEC §12.5): out of every list and rating. It names what the
/// views must take back: whom it rated, with how many stars, and whether it was counted yet
/// (a booking's review held unpublished is not, and is then never counted).
public struct ReviewHidden: EventBody, Hashable {
    public static let eventType = "ReviewHidden"
    public var bidID: BidID
    public var role: ReviewerRole
    public var subjectID: UserID
    public var stars: Int
    public var counted: Bool
    public var operatorID: UserID
    public var reason: String

    public init(
        bidID: BidID, role: ReviewerRole, subjectID: UserID, stars: Int, counted: Bool, operatorID: UserID, reason: String
    ) {
        self.bidID = bidID
        self.role = role
        self.subjectID = subjectID
        self.stars = stars
        self.counted = counted
        self.operatorID = operatorID
        self.reason = reason
    }
}

/// A review as an item's state holds it, for an operator to hide.
public struct WrittenReview: Hashable, Sendable {
    public var subjectID: UserID
    public var stars: Int
    public var published: Bool
    public var hidden = false
}

/// A review's name on its item: its deal and its side.
public struct ReviewKey: Hashable, Sendable {
    public var bidID: BidID
    public var role: ReviewerRole

    public init(_ bidID: BidID, _ role: ReviewerRole) {
        self.bidID = bidID
        self.role = role
    }
}

extension ItemDecider {
    static func hideReview(_ key: ReviewKey, reason: String, _ state: ItemState, actor: UserID) throws -> [ItemEvent] {
        let item = try requireItem(state)
        guard let review = item.reviews[key] else { throw DomainError.reviewNotFound }
        let problems = OperatorReason.problems(reason)
        if !problems.isEmpty { throw DomainError.invalid(problems) }
        guard !review.hidden else { throw DomainError(.conflict, "review_hidden", "This review is hidden already.") }
        return [
            .reviewHidden(
                ReviewHidden(
                    bidID: key.bidID, role: key.role, subjectID: review.subjectID, stars: review.stars, counted: review.published,
                    operatorID: actor, reason: reason.trimmingWhiteSpace()))
        ]
    }

    static func hideMessage(_ id: MessageID, reason: String, _ state: ItemState, actor: UserID) throws -> [ItemEvent] {
        let item = try requireItem(state)
        guard item.messages.contains(id) else { throw DomainError.messageNotFound }
        let problems = OperatorReason.problems(reason)
        if !problems.isEmpty { throw DomainError.invalid(problems) }
        guard !item.hiddenMessages.contains(id) else {
            throw DomainError(.conflict, "message_hidden", "This message is hidden already.")
        }
        return [.messageHidden(MessageHidden(messageID: id, operatorID: actor, reason: reason.trimmingWhiteSpace()))]
    }

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
            // By the owner's rule (a cancellation by the owner refunds the renter in full), in
            // the operator's name: it is no cancellation of the owner's to count against them.
            guard case .bookingCancelled(var cancelled) = try cancelBooking(booking.id, reason: nil, state, actor: item.ownerID, today: today).first
            else { continue }
            cancelled.cancelledBy = actor
            events.append(.bookingCancelled(cancelled))
        }
        events += item.pendingBids.map { .bidRejected(BidRejected(bidID: $0.id, reason: "item_taken_down")) }
        events.append(.takenDown(ItemTakenDown(operatorID: actor, reason: reason.trimmingWhiteSpace())))
        return events
    }
}

extension LoanDecider {
    /// Only while it raises money: a funded loan's money is the borrower's, and its lenders'
    /// repayments go on (409 `loan_not_fundraising`).
    static func takeDown(reason: String, _ state: LoanState, actor: UserID) throws -> [LoanEvent] {
        guard state.exists else { throw DomainError.loanNotFound }
        try DomainError.throwIfAny(OperatorReason.problems(reason))
        guard state.status == .fundraising || state.status == .suspended else {
            throw DomainError.loanNotFundraising(state.status)
        }
        return [.takenDown(LoanTakenDown(operatorID: actor, reason: reason.trimmingWhiteSpace(), refunds: state.shares))]
    }
}

extension ItemDecider {
    /// What its owner may no longer change once an operator took it down.
    static func requireNotTakenDown(_ item: PostedItem) throws {
        guard item.status != .takenDown else {
            throw DomainError(.conflict, "item_taken_down", "An operator took this item down; it can no longer be changed.")
        }
    }
}

extension DomainError {
    public static let messageNotFound = DomainError(.notFound, "message_not_found", "No such message.")
    public static let reviewNotFound = DomainError(.notFound, "review_not_found", "No such review.")
}
