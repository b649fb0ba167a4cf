import Foundation

public enum LoanTag {}
public typealias LoanID = Identifier<LoanTag>

public enum LoanStatus: String, Hashable, Sendable, Codable {
    case fundraising, funded, repaying, repaid, expired
    /// By an operator while fundraising (SPEC §12.5): out of every list, its lenders refunded.
    case takenDown = "taken_down"
    /// Its borrower suspended by an operator while it raised money: out of every list until
    /// they are reinstated; it still expires at its deadline, refunding its lenders.
    case suspended
}

// MARK: Events (stream `loan-{loanID}`)

public struct LoanPosted: EventBody, Hashable {
    public static let eventType = "LoanPosted"
    public var loanID: LoanID
    public var borrowerID: UserID
    public var title: String
    public var description: String
    public var sector: String
    public var activity: String
    public var countryCode: String
    public var location: Location
    public var amountCents: Int
    public var deadline: Day

    public init(
        loanID: LoanID, borrowerID: UserID, title: String, description: String, sector: String, activity: String,
        countryCode: String, location: Location, amountCents: Int, deadline: Day
    ) {
        self.loanID = loanID
        self.borrowerID = borrowerID
        self.title = title
        self.description = description
        self.sector = sector
        self.activity = activity
        self.countryCode = countryCode
        self.location = location
        self.amountCents = amountCents
        self.deadline = deadline
    }
}

public struct LoanSharePurchased: EventBody, Hashable {
    public static let eventType = "LoanSharePurchased"
    public var lenderID: UserID
    public var amountCents: Int

    public init(lenderID: UserID, amountCents: Int) {
        self.lenderID = lenderID
        self.amountCents = amountCents
    }
}

public struct LoanFunded: EventBody, Hashable {
    public static let eventType = "LoanFunded"

    public init() {}
}

/// A repayment and how it was split: each lender's credit, adding up to the amount exactly.
public struct LoanRepaymentRecorded: EventBody, Hashable {
    public static let eventType = "LoanRepaymentRecorded"
    public var amountCents: Int
    public var credits: [LenderAmount]

    public init(amountCents: Int, credits: [LenderAmount]) {
        self.amountCents = amountCents
        self.credits = credits
    }
}

public struct LoanRepaid: EventBody, Hashable {
    public static let eventType = "LoanRepaid"

    public init() {}
}

public struct LoanExpired: EventBody, Hashable {
    public static let eventType = "LoanExpired"
    public var refunds: [LenderAmount]

    public init(refunds: [LenderAmount]) {
        self.refunds = refunds
    }
}

public struct LenderAmount: Codable, Hashable, Sendable {
    public var lenderID: UserID
    public var amountCents: Int

    public init(lenderID: UserID, amountCents: Int) {
        self.lenderID = lenderID
        self.amountCents = amountCents
    }
}

public enum LoanEvent: Hashable, Sendable {
    case posted(LoanPosted)
    case sharePurchased(LoanSharePurchased)
    case funded(LoanFunded)
    case repaymentRecorded(LoanRepaymentRecorded)
    case repaid(LoanRepaid)
    case expired(LoanExpired)
    case photoAdded(LoanPhotoAdded)
    case photoRemoved(LoanPhotoRemoved)
    case takenDown(LoanTakenDown)
    case suspended(LoanSuspended)
    case reinstated(LoanReinstated)
}

public enum LoanCommand: Hashable, Sendable {
    case post(LoanPosted, today: Day)
    /// Only checkout buys shares (SPEC §3.4): this is its part on the loan's stream.
    case purchaseShare(lender: UserID, amountCents: Int)
    case recordRepayment(amountCents: Int)
    case expire(today: Day)
    /// The borrower's pictures of the business (Lendivine shows one on every loan).
    case addPhoto(digest: String)
    case removePhoto(digest: String)
    /// An operator's act (the operator's role is the use case's to check).
    case takeDown(reason: String)
    /// Its borrower's suspension (SPEC §12.5) and its end.
    case suspendBorrower
    case reinstateBorrower
}

// MARK: Decider

public struct LoanState: Hashable, Sendable {
    public var loanID: LoanID?
    public var borrowerID: UserID?
    public var title = ""
    public var amountCents = 0
    public var deadline: Day?
    public var status: LoanStatus = .fundraising
    /// Each lender's shares, in the order they first bought.
    public var shares: [LenderAmount] = []
    public var repaidCents = 0
    /// What the repayments credited each lender so far.
    public var repaidTo: [UserID: Int] = [:]
    /// Digests of its photos, in the order added.
    public var photos: [String] = []

    public var exists: Bool { loanID != nil }
    public var fundedCents: Int { shares.reduce(0) { $0 + $1.amountCents } }
    public var stillNeededCents: Int { max(0, amountCents - fundedCents) }
    public var outstandingCents: Int { fundedCents - repaidCents }
    public init() {}
}

public enum LoanDecider {
    /// A loan's own field rules, over the fields given: the decider's, and an edge's that
    /// refuses a request for a missing field and names every other bad one with it.
    public static func givenFieldProblems(title: String?, description: String?, country: String?, amountCents: Int?)
        -> [FieldError]
    {
        var validation = Validation()
        if let title { validation.check(title.trimmed.isWithin(1...120), "title", "invalid_title", "1 to 120 characters") }
        if let description {
            validation.check(description.isWithin(0...5000), "description", "too_long", "at most 5000 characters")
        }
        validation.add(UserDecider.countryProblems(country, field: "country"))
        if let amountCents {
            validation.check(
                (2500...1_000_000).contains(amountCents) && amountCents % share == 0, "amountCents", "invalid_amount",
                "2500 to 1000000 cents, in multiples of 2500")
        }
        return validation.problems
    }

    public static let initial = LoanState()
    public static let share = 2500

    public static func decide(_ command: LoanCommand, _ state: LoanState, actor: UserID) throws -> [LoanEvent] {
        switch command {
        case .post(var posted, let today):
            guard !state.exists else { throw DomainError(.conflict, "loan_exists", "This loan was already posted.") }
            var validation = Validation()
            validation.add(
                givenFieldProblems(
                    title: posted.title, description: posted.description, country: posted.countryCode, amountCents: posted.amountCents))
            validation.check(!posted.sector.trimmed.isEmpty, "sector", "required", "sector is required")
            validation.check(!posted.activity.trimmed.isEmpty, "activity", "required", "activity is required")
            validation.add(posted.location.problems())
            let days = today.days(until: posted.deadline)
            validation.check((1...90).contains(days), "deadline", "invalid_deadline", "1 to 90 days ahead")
            try validation.throwIfInvalid()
            posted.borrowerID = actor
            return [.posted(posted)]

        case .purchaseShare(let lender, let amount):
            guard state.exists else { throw DomainError.loanNotFound }
            guard lender != state.borrowerID else {
                throw DomainError(.forbidden, "own_loan", "You cannot lend to your own loan.")
            }
            guard state.status == .fundraising else {
                throw DomainError.loanNotFundraising(state.status)
            }
            guard amount >= share, amount % share == 0 else {
                throw DomainError.invalid([FieldError(field: "amountCents", code: "invalid_amount", message: "a multiple of 2500")])
            }
            guard amount <= state.stillNeededCents else {
                throw DomainError(.conflict, "exceeds_need", "The loan needs only \(state.stillNeededCents) cents more.")
            }
            let purchase = LoanEvent.sharePurchased(LoanSharePurchased(lenderID: lender, amountCents: amount))
            return amount == state.stillNeededCents ? [purchase, .funded(LoanFunded())] : [purchase]

        case .recordRepayment(let amount):
            guard state.exists else { throw DomainError.loanNotFound }
            guard actor == state.borrowerID else {
                throw DomainError(.forbidden, "not_borrower", "Only the borrower records repayments.")
            }
            guard state.status == .funded || state.status == .repaying else {
                throw DomainError(.conflict, "loan_not_repayable", "The loan is \(state.status.rawValue).")
            }
            guard amount >= 1 else {
                throw DomainError.invalid([FieldError(field: "amountCents", code: "invalid_amount", message: "at least 1 cent")])
            }
            guard amount <= state.outstandingCents else {
                throw DomainError(.conflict, "exceeds_outstanding", "Only \(state.outstandingCents) cents are outstanding.")
            }
            // Pro rata to what each lender is still owed: their shares at first, and at the last
            // repayment exactly what is left, so that every lender ends repaid to the cent.
            let owed = state.shares.map {
                LenderAmount(lenderID: $0.lenderID, amountCents: $0.amountCents - state.repaidTo[$0.lenderID, default: 0])
            }
            let recorded = LoanEvent.repaymentRecorded(
                LoanRepaymentRecorded(amountCents: amount, credits: split(amount, over: owed)))
            return amount == state.outstandingCents ? [recorded, .repaid(LoanRepaid())] : [recorded]

        case .expire(let today):
            guard state.exists, let deadline = state.deadline else { throw DomainError.loanNotFound }
            guard state.status == .fundraising || state.status == .suspended else {
                throw DomainError.loanNotFundraising(state.status)
            }
            guard today > deadline else {
                throw DomainError(.conflict, "deadline_not_passed", "The loan's deadline is \(deadline).")
            }
            return [.expired(LoanExpired(refunds: state.shares))]

        case .takeDown(let reason):
            return try takeDown(reason: reason, state, actor: actor)

        case .suspendBorrower:
            guard state.exists else { throw DomainError.loanNotFound }
            return state.status == .fundraising ? [.suspended(LoanSuspended(operatorID: actor))] : []

        case .reinstateBorrower:
            guard state.exists else { throw DomainError.loanNotFound }
            return state.status == .suspended ? [.reinstated(LoanReinstated())] : []

        case .addPhoto(let digest):
            try requireBorrower(state, actor)
            return try Photos.adding(digest, to: state.photos) ? [.photoAdded(LoanPhotoAdded(digest: digest))] : []

        case .removePhoto(let digest):
            try requireBorrower(state, actor)
            try Photos.removing(digest, from: state.photos)
            return [.photoRemoved(LoanPhotoRemoved(digest: digest))]
        }
    }

    static func requireBorrower(_ state: LoanState, _ actor: UserID) throws {
        guard state.exists else { throw DomainError.loanNotFound }
        guard actor == state.borrowerID else {
            throw DomainError(.forbidden, "not_borrower", "Only the borrower can do this.")
        }
    }

    public static func evolve(_ state: LoanState, _ event: LoanEvent) -> LoanState {
        var state = state
        switch event {
        case .posted(let posted):
            state.loanID = posted.loanID
            state.borrowerID = posted.borrowerID
            state.title = posted.title
            state.amountCents = posted.amountCents
            state.deadline = posted.deadline
            state.status = .fundraising
        case .sharePurchased(let purchase):
            if let index = state.shares.firstIndex(where: { $0.lenderID == purchase.lenderID }) {
                state.shares[index].amountCents += purchase.amountCents
            } else {
                state.shares.append(LenderAmount(lenderID: purchase.lenderID, amountCents: purchase.amountCents))
            }
        case .funded:
            state.status = .funded
        case .repaymentRecorded(let recorded):
            state.repaidCents += recorded.amountCents
            for credit in recorded.credits { state.repaidTo[credit.lenderID, default: 0] += credit.amountCents }
            state.status = .repaying
        case .repaid:
            state.status = .repaid
        case .expired:
            state.status = .expired
        case .takenDown:
            state.status = .takenDown
        case .suspended:
            state.status = .suspended
        case .reinstated:
            state.status = .fundraising
        case .photoAdded(let added):
            if let digest = added.digest { state.photos.append(digest) }
        case .photoRemoved(let removed):
            state.photos.removeAll { $0 == removed.digest }
        }
        return state
    }

    /// Splits `amount` between the lenders pro rata to their shares, in whole cents: each gets
    /// the floor of their exact part, and the cents left over go one each to the largest
    /// fractional parts (ties to the earlier lender), so the credits add up exactly.
    public static func split(_ amount: Int, over shares: [LenderAmount]) -> [LenderAmount] {
        let total = shares.reduce(0) { $0 + $1.amountCents }
        guard total > 0 else { return [] }
        var credits = shares.map { LenderAmount(lenderID: $0.lenderID, amountCents: amount * $0.amountCents / total) }
        let remainders = shares.enumerated().map { (index: $0.offset, remainder: amount * $0.element.amountCents % total) }
        let left = amount - credits.reduce(0) { $0 + $1.amountCents }
        for entry in remainders.sorted(by: { ($0.remainder, -$0.index) > ($1.remainder, -$1.index) }).prefix(left) {
            credits[entry.index].amountCents += 1
        }
        return credits
    }

}

extension Day {
    /// Whole days from this day to `other` (negative when `other` is earlier).
    public func days(until other: Day) -> Int { other.ordinal - ordinal }
}
