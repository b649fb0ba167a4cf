import Aggregates
import EventStore
import Foundation
import Marketplace

/// A lender's cart and its checkout (SPEC §6): lines are decided on the loan as it stands;
/// checkout appends across the cart, every loan in it and the lender's own stream at once.
public struct Carts: Sendable {
    let gateway: CommandGateway
    let payments: CardPayments

    public init(gateway: CommandGateway, payments: CardPayments) {
        self.gateway = gateway
        self.payments = payments
    }

    /// Adds a loan to the cart: the amount given, or the lender's default share.
    public func add(_ loanID: LoanID, amountCents: Int?, for me: UserID) async throws -> AppendResult? {
        // The loan as it stands now, and the lender's default share: the cart's rules need both.
        let (loan, _) = try await gateway.load(.loan(loanID), .loan)
        let (user, _) = try await gateway.load(.user(me), .user)
        return try await handle(.add(loanID: loanID, amountCents: amountCents, loan: loan, defaultShare: user.defaultShareCents), for: me)
    }

    public func change(_ loanID: LoanID, amountCents: Int, for me: UserID) async throws -> AppendResult? {
        let (loan, _) = try await gateway.load(.loan(loanID), .loan)
        return try await handle(.change(loanID: loanID, amountCents: amountCents, loan: loan), for: me)
    }

    /// A command on the user's own cart.
    public func handle(_ command: CartCommand, for me: UserID) async throws -> AppendResult? {
        try await gateway.handle(command, on: .cart, id: me, actor: me).append
    }

    /// Pays for the cart, from the balance (`cardID` nil) or by card. A card is charged only
    /// after the rules pass, and refunded if the append cannot happen. Two checkouts can never
    /// fund a loan beyond its amount: the append expects the version of every stream read.
    public func checkout(_ me: UserID, paying cardID: CardID?, today: Day) async throws -> PaidCart {
        if let (result, append) = try gateway.replayedOutcome(PaidCart.self) { return result.at(append) }
        guard let cardID else { return try await checkout(me, paying: .balance, today) }
        // Decided once with no charge yet: nothing is charged for a checkout that would fail.
        var reads = StreamReads(gateway: gateway)
        let (decision, user) = try await decide(&reads, me, .card(cardID, chargeID: ""), today)
        let card = try UserDecider.chargeableCard(cardID, in: user, today: today)
        return try await payments.pay(decision.totalCents, with: card, for: me, purpose: "checkout") { charge in
            try await checkout(me, paying: .card(cardID, chargeID: charge.id), charged: charge.amountCents, today)
        }
    }

    /// The checkout's one append across the cart, its loans and the user.
    func checkout(_ me: UserID, paying payment: Payment, charged: Int? = nil, _ today: Day) async throws -> PaidCart {
        let (result, append) = try await gateway.handleAcross("checkout", actor: me) { reads in
            let (decision, user) = try await decide(&reads, me, payment, today)
            if let charged, charged != decision.totalCents {
                throw DomainError(.conflict, "cart_changed", "The cart changed while it was being paid; nothing was bought.")
            }
            let writes =
                try [StreamWrite(decision.cart, to: .cart, id: me)]
                + decision.loans.map { try StreamWrite($0.events, to: .loan, id: $0.id) }
                + [StreamWrite(decision.user, to: .user, id: me)]
            let after = decision.user.reduce(user, UserDecider.evolve)
            let result = PaidCart(
                purchases: decision.purchases.map { PaidCart.Purchase(loanId: $0.loanID, amountCents: $0.amountCents) },
                totalCents: decision.totalCents, paidWith: PaidWith(payment.paidWith), balanceCents: after.balanceCents,
                availableCents: after.availableCents)
            return (writes, result)
        }
        return result.at(append)
    }

    /// Reads the cart, each of its loans and the user, and decides the checkout on them.
    func decide(_ reads: inout StreamReads, _ me: UserID, _ payment: Payment, _ today: Day) async throws
        -> (CheckoutDecision, UserState)
    {
        let cart = try await reads.load(.cart, id: me)
        var loans = [LoanID: LoanState]()
        for line in cart.lines { loans[line.loanID] = try await reads.load(.loan, id: line.loanID) }
        let user = try await reads.load(.user, id: me)
        let decision = try CheckoutDecider.decide(
            cart: cart, loans: loans, user: user, payment: payment, actor: me, today: today)
        return (decision, user)
    }
}

/// What a checkout bought and how it was paid; recorded with its events for a repeat to answer.
public struct PaidCart: Codable, Sendable {
    public struct Purchase: Codable, Sendable {
        public var loanId: LoanID
        public var amountCents: Int
    }

    public var purchases: [Purchase]
    public var totalCents: Int
    public var paidWith: PaidWith
    public var balanceCents: Int
    /// Absent in answers recorded before rentals were paid.
    public var availableCents: Int?
    public var position: Int64?

    func at(_ append: AppendResult?) -> PaidCart {
        var answer = self
        answer.position = append?.lastPosition
        return answer
    }
}
