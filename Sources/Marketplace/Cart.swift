// MARK: Events (stream `cart-{userID}`)

public struct CartItemAdded: EventBody, Hashable {
    public static let eventType = "CartItemAdded"
    public var loanID: LoanID
    public var amountCents: Int

    public init(loanID: LoanID, amountCents: Int) {
        self.loanID = loanID
        self.amountCents = amountCents
    }
}

public struct CartItemAmountChanged: EventBody, Hashable {
    public static let eventType = "CartItemAmountChanged"
    public var loanID: LoanID
    public var amountCents: Int

    public init(loanID: LoanID, amountCents: Int) {
        self.loanID = loanID
        self.amountCents = amountCents
    }
}

public struct CartItemRemoved: EventBody, Hashable {
    public static let eventType = "CartItemRemoved"
    public var loanID: LoanID

    public init(loanID: LoanID) {
        self.loanID = loanID
    }
}

public struct CartCleared: EventBody, Hashable {
    public static let eventType = "CartCleared"

    public init() {}
}

public struct CartCheckedOut: EventBody, Hashable {
    public static let eventType = "CartCheckedOut"
    public var purchases: [LoanAmount]
    public var totalCents: Int
    /// `balance`, or the id of the card charged.
    public var paidWith: String

    public init(purchases: [LoanAmount], totalCents: Int, paidWith: String) {
        self.purchases = purchases
        self.totalCents = totalCents
        self.paidWith = paidWith
    }
}

public struct LoanAmount: Codable, Hashable, Sendable {
    public var loanID: LoanID
    public var amountCents: Int

    public init(loanID: LoanID, amountCents: Int) {
        self.loanID = loanID
        self.amountCents = amountCents
    }
}

public enum CartEvent: Hashable, Sendable {
    case itemAdded(CartItemAdded)
    case amountChanged(CartItemAmountChanged)
    case itemRemoved(CartItemRemoved)
    case cleared(CartCleared)
    case checkedOut(CartCheckedOut)
}

public enum CartCommand: Hashable, Sendable {
    /// `loan` is the loan's state now; `defaultShare` the lender's profile default.
    case add(loanID: LoanID, amountCents: Int?, loan: LoanState, defaultShare: Int?)
    case change(loanID: LoanID, amountCents: Int, loan: LoanState)
    case remove(LoanID)
    case clear
    /// `loans` are the states of every loan in the cart at this moment.
    case checkout(loans: [LoanID: LoanState], paidWith: String)
}

public struct CartState: Hashable, Sendable {
    /// In the order added.
    public var lines: [LoanAmount] = []
    public var totalCents: Int { lines.reduce(0) { $0 + $1.amountCents } }
    public init() {}
}

public enum CartDecider {
    public static let initial = CartState()

    /// `actor` owns the cart.
    public static func decide(_ command: CartCommand, _ state: CartState, actor: UserID) throws -> [CartEvent] {
        switch command {
        case .add(let loanID, let amount, let loan, let defaultShare):
            guard !state.lines.contains(where: { $0.loanID == loanID }) else {
                throw DomainError(.conflict, "already_in_cart", "This loan is already in your cart; change its amount instead.")
            }
            let amount = amount ?? defaultShare ?? LoanDecider.share
            try checkLine(loan, amount: amount, lender: actor)
            return [.itemAdded(CartItemAdded(loanID: loanID, amountCents: amount))]

        case .change(let loanID, let amount, let loan):
            guard state.lines.contains(where: { $0.loanID == loanID }) else { throw notInCart }
            try checkLine(loan, amount: amount, lender: actor)
            return [.amountChanged(CartItemAmountChanged(loanID: loanID, amountCents: amount))]

        case .remove(let loanID):
            guard state.lines.contains(where: { $0.loanID == loanID }) else { throw notInCart }
            return [.itemRemoved(CartItemRemoved(loanID: loanID))]

        case .clear:
            return [.cleared(CartCleared())]

        case .checkout(let loans, let paidWith):
            guard !state.lines.isEmpty else { throw DomainError(.conflict, "cart_empty", "The cart is empty.") }
            // Every line checked against its loan at this moment; every problem named.
            let problems = state.lines.enumerated().compactMap { index, line -> FieldError? in
                guard let problem = problem(of: line, loans[line.loanID]) else { return nil }
                return FieldError(field: "lines[\(index)]", code: problem, message: "loan \(line.loanID): \(problem)")
            }
            guard problems.isEmpty else {
                throw DomainError(.conflict, "checkout_blocked", "Some lines no longer fit their loans.", fields: problems)
            }
            return [.checkedOut(CartCheckedOut(purchases: state.lines, totalCents: state.totalCents, paidWith: paidWith))]
        }
    }

    /// Why a line no longer fits its loan, or nil: the cart view's per-line `problem`.
    public static func problem(of line: LoanAmount, _ loan: LoanState?) -> String? {
        guard let loan, loan.exists else { return DomainError.loanNotFound.code }
        return problem(amountCents: line.amountCents, status: loan.status, stillNeededCents: loan.stillNeededCents)
    }

    /// The same rule, for a line read with its loan from the views.
    public static func problem(amountCents: Int, status: LoanStatus, stillNeededCents: Int) -> String? {
        guard status == .fundraising else { return "loan_not_fundraising" }
        guard amountCents <= stillNeededCents else { return "exceeds_need" }
        return nil
    }

    public static func evolve(_ state: CartState, _ event: CartEvent) -> CartState {
        var state = state
        switch event {
        case .itemAdded(let added):
            state.lines.append(LoanAmount(loanID: added.loanID, amountCents: added.amountCents))
        case .amountChanged(let changed):
            if let index = state.lines.firstIndex(where: { $0.loanID == changed.loanID }) {
                state.lines[index].amountCents = changed.amountCents
            }
        case .itemRemoved(let removed):
            state.lines.removeAll { $0.loanID == removed.loanID }
        case .cleared, .checkedOut:
            state.lines = []
        }
        return state
    }

    static func checkLine(_ loan: LoanState, amount: Int, lender: UserID) throws {
        guard loan.exists else { throw DomainError.loanNotFound }
        guard loan.borrowerID != lender else { throw DomainError(.forbidden, "own_loan", "You cannot lend to your own loan.") }
        guard amount >= LoanDecider.share, amount % LoanDecider.share == 0 else {
            throw DomainError.invalid([FieldError(field: "amountCents", code: "invalid_amount", message: "a multiple of 2500")])
        }
        guard loan.status == .fundraising else {
            throw DomainError.loanNotFundraising(loan.status)
        }
        guard amount <= loan.stillNeededCents else {
            throw DomainError(.conflict, "exceeds_need", "The loan needs only \(loan.stillNeededCents) cents more.")
        }
    }

    static let notInCart = DomainError(.notFound, "not_in_cart", "This loan is not in your cart.")
}
