import Foundation

/// An operator suspended a user (SPEC §12.5), until a time or (`until` nil) until reinstated:
/// their sessions revoked, every write of theirs 403 `account_suspended`, their postings out
/// of the market, their pending bids withdrawn. Suspending someone suspended already sets a
/// new `until`.
public struct UserSuspended: EventBody, Hashable {
    public static let eventType = "UserSuspended"
    public var operatorID: UserID
    public var reason: String
    public var until: Date?

    public init(operatorID: UserID, reason: String, until: Date?) {
        self.operatorID = operatorID
        self.reason = reason
        self.until = until
    }
}

/// The suspension ended: an operator reinstated the user, or (`operatorID` nil) its `until`
/// passed and the jobs ended it.
public struct UserReinstated: EventBody, Hashable {
    public static let eventType = "UserReinstated"
    public var operatorID: UserID?
    public var reason: String

    public init(operatorID: UserID?, reason: String) {
        self.operatorID = operatorID
        self.reason = reason
    }
}

/// An available item left the market because its owner was suspended (`ItemReinstated` puts
/// it back). Its pending bids are rejected `owner_suspended` beside it, their holds released.
public struct ItemSuspended: EventBody, Hashable {
    public static let eventType = "ItemSuspended"
    public var operatorID: UserID

    public init(operatorID: UserID) { self.operatorID = operatorID }
}

/// A suspended owner's item back in the market: the suspension ended.
public struct ItemReinstated: EventBody, Hashable {
    public static let eventType = "ItemReinstated"
    public init() {}
}

/// A fundraising loan out of every list because its borrower was suspended (`LoanReinstated`
/// puts it back). Its lenders' shares stay: it still expires, and refunds them, at its deadline.
public struct LoanSuspended: EventBody, Hashable {
    public static let eventType = "LoanSuspended"
    public var operatorID: UserID

    public init(operatorID: UserID) { self.operatorID = operatorID }
}

/// A suspended borrower's loan raising money again.
public struct LoanReinstated: EventBody, Hashable {
    public static let eventType = "LoanReinstated"
    public init() {}
}

/// A user's suspension as their stream holds it.
public struct Suspension: Hashable, Sendable {
    public var until: Date?

    public init(until: Date?) { self.until = until }

    /// Whether it still holds at `now`.
    public func holds(at now: Date) -> Bool { until.map { now < $0 } ?? true }
}

extension DomainError {
    public static func accountSuspended(until: Date?) -> DomainError {
        DomainError(
            .forbidden, "account_suspended",
            until.map { "An operator suspended this account until \(ISO8601DateFormatter().string(from: $0)); it can read but not write." }
                ?? "An operator suspended this account; it can read but not write.")
    }
}

extension UserDecider {
    /// `until`, when given, is after `now`; the reason is required, as for every operator act.
    static func suspend(by operatorID: UserID, reason: String, until: Date?, now: Date, _ state: UserState) throws
        -> [UserEvent]
    {
        guard state.exists else { throw DomainError.userNotFound }
        var problems = OperatorReason.problems(reason)
        if let until, until <= now {
            problems.append(FieldError(field: "until", code: "invalid_until", message: "a time in the future"))
        }
        try DomainError.throwIfAny(problems)
        return [.suspended(UserSuspended(operatorID: operatorID, reason: reason.trimmingWhiteSpace(), until: until))]
    }

    /// `operatorID` nil: the jobs end a suspension whose `until` passed (and only such a one).
    static func reinstate(by operatorID: UserID?, reason: String, now: Date, _ state: UserState) throws -> [UserEvent] {
        guard state.exists else { throw DomainError.userNotFound }
        try DomainError.throwIfAny(OperatorReason.problems(reason))
        guard let suspension = state.suspension, operatorID != nil || !suspension.holds(at: now) else {
            throw DomainError(.conflict, "not_suspended", "This user is not suspended.")
        }
        return [.reinstated(UserReinstated(operatorID: operatorID, reason: reason.trimmingWhiteSpace()))]
    }
}

extension ItemDecider {
    /// What `user`'s suspension does to this item: theirs and available, out of the market with
    /// its pending bids rejected; someone else's, their pending bid on it withdrawn.
    static func suspend(_ user: UserID, _ state: ItemState, actor: UserID) throws -> [ItemEvent] {
        let item = try requireItem(state)
        if item.ownerID == user {
            guard item.status == .available else { return [] }
            return item.pendingBids.map { .bidRejected(BidRejected(bidID: $0.id, reason: "owner_suspended")) }
                + [.suspended(ItemSuspended(operatorID: actor))]
        }
        return item.pendingBids.filter { $0.bidderID == user }.map { .bidWithdrawn(BidWithdrawn(bidID: $0.id)) }
    }

    /// A suspended owner's item back in the market once they are reinstated.
    static func reinstate(_ state: ItemState) throws -> [ItemEvent] {
        let item = try requireItem(state)
        return item.status == .suspended ? [.reinstated(ItemReinstated())] : []
    }
}
