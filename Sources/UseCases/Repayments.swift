import Aggregates
import EventStore
import Marketplace

/// A repayment paid by the borrower, from the balance or by card, and each lender's credit on
/// their own stream, in one append (SPEC §11.1): it moves money, it never makes any.
public struct Repayments: Sendable {
    let gateway: CommandGateway
    let payments: CardPayments

    public init(gateway: CommandGateway, payments: CardPayments) {
        self.gateway = gateway
        self.payments = payments
    }

    /// What a repayment decided, recorded with its events for a repeat to answer again.
    public struct Outcome: Codable, Sendable {
        public var amountCents: Int
        public var paidWith: PaidWith
        public var credits: [Credit]
        /// The borrower's balance after the repayment, and what of it is not held (absent in
        /// answers recorded before rentals were paid).
        public var balanceCents: Int
        public var availableCents: Int?
    }

    public struct Credit: Codable, Sendable {
        public var lenderId: UserID
        public var amountCents: Int
    }

    public func repay(_ amount: Int, on loanID: LoanID, by me: UserID, paying cardID: CardID?, today: Day) async throws
        -> (outcome: Outcome, append: AppendResult?)
    {
        if let replayed = try gateway.replayedOutcome(Outcome.self) { return replayed }
        guard let cardID else { return try await repay(amount, loanID, me, .balance, today) }
        // Decided once with no charge yet: nothing is charged for a repayment that would fail.
        var reads = StreamReads(gateway: gateway)
        let borrower = try await reads.load(.user, id: me)
        _ = try RepaymentDecider.decide(
            amountCents: amount, loanID: loanID, loan: try await reads.load(.loan, id: loanID), borrower: borrower,
            payment: .card(cardID, chargeID: ""), actor: me, today: today)
        let card = try UserDecider.chargeableCard(cardID, in: borrower, today: today)
        return try await payments.pay(amount, with: card, for: me, purpose: "repayment") { charge in
            try await repay(amount, loanID, me, .card(cardID, chargeID: charge.id), today)
        }
    }

    /// The repayment's one append across the loan, the borrower and every lender credited.
    func repay(_ amount: Int, _ loanID: LoanID, _ me: UserID, _ payment: Payment, _ today: Day) async throws
        -> (outcome: Outcome, append: AppendResult?)
    {
        try await gateway.handleAcross("recordRepayment", actor: me) { reads in
            let loan = try await reads.load(.loan, id: loanID)
            let borrower = try await reads.load(.user, id: me)
            let decision = try RepaymentDecider.decide(
                amountCents: amount, loanID: loanID, loan: loan, borrower: borrower, payment: payment, actor: me, today: today)
            let writes =
                try [StreamWrite(decision.loan, to: .loan, id: loanID), StreamWrite(decision.borrower, to: .user, id: me)]
                + decision.credits.map { try StreamWrite([.balanceCredited($0.credit)], to: .user, id: $0.lender, checked: false) }
            let outcome = Outcome(
                amountCents: amount, paidWith: PaidWith(payment.paidWith),
                credits: decision.credits.map { Credit(lenderId: $0.lender, amountCents: $0.credit.amountCents) },
                balanceCents: decision.borrower.reduce(borrower, UserDecider.evolve).balanceCents,
                availableCents: decision.borrower.reduce(borrower, UserDecider.evolve).availableCents)
            return (writes, outcome)
        }
    }
}
