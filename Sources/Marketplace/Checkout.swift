// Commands that span streams: checkout (the cart, every loan in it, the lender), and a
// loan's repayments and expiry (the loan, and every lender credited). Each is decided here
// on all the states it touches, and appended in one atomic append with their versions.

/// How a checkout is paid.
public enum Payment: Hashable, Sendable {
    case balance
    /// A card on file, and the id of the processor's approved charge for the total.
    case card(CardID, chargeID: String)

    /// As `CartCheckedOut.paidWith` keeps it: `balance` or the card's id.
    public var paidWith: String {
        switch self {
        case .balance: "balance"
        case .card(let cardID, _): cardID.description
        }
    }
}

/// The events of one checkout, stream by stream.
public struct CheckoutDecision: Sendable {
    public var cart: [CartEvent]
    /// In the cart's order.
    public var loans: [(id: LoanID, events: [LoanEvent])]
    public var user: [UserEvent]
    public var purchases: [LoanAmount]
    public var totalCents: Int
}

public enum CheckoutDecider {
    /// Every line must still fit its loan (each problem named, line by line), then the payment
    /// must cover the total: the balance, or a chargeable card.
    public static func decide(
        cart: CartState, loans: [LoanID: LoanState], user: UserState, payment: Payment, actor: UserID, today: Day
    ) throws -> CheckoutDecision {
        let cartEvents = try CartDecider.decide(.checkout(loans: loans, paidWith: payment.paidWith), cart, actor: actor)
        var loanEvents = [(id: LoanID, events: [LoanEvent])]()
        for line in cart.lines {
            let events = try LoanDecider.decide(
                .purchaseShare(lender: actor, amountCents: line.amountCents), loans[line.loanID] ?? LoanDecider.initial,
                actor: actor)
            loanEvents.append((line.loanID, events))
        }
        let total = cart.totalCents
        let userEvent: UserEvent
        switch payment {
        case .balance:
            guard user.availableCents >= total else {
                throw DomainError(
                    .conflict, "insufficient_funds",
                    "The available balance is \(user.availableCents) cents; the cart totals \(total) cents.")
            }
            userEvent = .balanceDebited(BalanceDebited(amountCents: total))
        case .card(let cardID, let chargeID):
            _ = try UserDecider.chargeableCard(cardID, in: user, today: today)
            try UserDecider.checkNewCharge(chargeID, in: user)
            userEvent = .cardCharged(CardCharged(cardID: cardID, amountCents: total, chargeID: chargeID))
        }
        return CheckoutDecision(
            cart: cartEvents, loans: loanEvents, user: [userEvent], purchases: cart.lines, totalCents: total)
    }
}

/// The events of one repayment: the loan's, the borrower's payment, each lender's credit.
public struct RepaymentDecision: Sendable {
    public var loan: [LoanEvent]
    public var borrower: [UserEvent]
    public var credits: [(lender: UserID, credit: BalanceCredited)]
}

public enum RepaymentDecider {
    /// The borrower pays what the lenders are credited (SPEC §11.1): from the balance, which
    /// must cover it, or by a charged card. No repayment creates money.
    public static func decide(
        amountCents: Int, loanID: LoanID, loan: LoanState, borrower: UserState, payment: Payment, actor: UserID, today: Day
    ) throws -> RepaymentDecision {
        let loanEvents = try LoanDecider.decide(.recordRepayment(amountCents: amountCents), loan, actor: actor)
        let paid: UserEvent
        switch payment {
        case .balance:
            guard borrower.availableCents >= amountCents else {
                throw DomainError(
                    .conflict, "insufficient_funds",
                    "The available balance is \(borrower.availableCents) cents; the repayment is \(amountCents) cents.")
            }
            paid = .balanceDebited(BalanceDebited(amountCents: amountCents, reason: .repayment, loanID: loanID))
        case .card(let cardID, let chargeID):
            _ = try UserDecider.chargeableCard(cardID, in: borrower, today: today)
            try UserDecider.checkNewCharge(chargeID, in: borrower)
            paid = .cardCharged(
                CardCharged(cardID: cardID, amountCents: amountCents, chargeID: chargeID, purpose: .repayment, loanID: loanID))
        }
        return RepaymentDecision(
            loan: loanEvents, borrower: [paid], credits: LoanDecider.credits(for: loanEvents, loanID: loanID))
    }
}

extension LoanDecider {
    /// What each lender's stream receives for a loan's events: their credit of a repayment,
    /// their refund of an expiry. Zero amounts are left out.
    public static func credits(for events: [LoanEvent], loanID: LoanID) -> [(lender: UserID, credit: BalanceCredited)] {
        func refunded(_ refunds: [LenderAmount]) -> [(lender: UserID, credit: BalanceCredited)] {
            refunds.filter { $0.amountCents > 0 }.map {
                ($0.lenderID, BalanceCredited(amountCents: $0.amountCents, loanID: loanID, reason: .refund))
            }
        }
        return events.flatMap { event -> [(lender: UserID, credit: BalanceCredited)] in
            switch event {
            case .repaymentRecorded(let recorded):
                recorded.credits.filter { $0.amountCents > 0 }.map {
                    ($0.lenderID, BalanceCredited(amountCents: $0.amountCents, loanID: loanID, reason: .repayment))
                }
            case .expired(let expired):
                refunded(expired.refunds)
            case .takenDown(let takenDown):
                refunded(takenDown.refunds)
            default: []
            }
        }
    }
}
