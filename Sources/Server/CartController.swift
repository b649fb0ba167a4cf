import EventStore
import Foundation
import Hummingbird
import Marketplace
import Payments
import Postgres

/// The signed-in user's cart and its checkout: `GET/DELETE /v1/cart`, `POST /v1/cart/items`,
/// `PATCH/DELETE /v1/cart/items/{loanId}`, `POST /v1/cart/checkout`.
struct CartController<Context: AuthenticatedRequestContext>: Sendable {
    let gateway: CommandGateway
    let cardPayments: CardPayments
    var pool: PostgresPool { gateway.store.pool }

    struct LineBody: Decodable {
        var loanId: String?
        var amountCents: Int?
    }

    struct CheckoutBody: Decodable {
        var payWith: String?
        var cardId: String?
    }

    struct CheckoutResult: ResponseEncodable, Decodable {
        var purchases: [Purchase]
        var totalCents: Int
        var paidWith: PaidWith
        var balanceCents: Int
        var position: Int64?
    }

    struct Purchase: Codable {
        var loanId: LoanID
        var amountCents: Int
    }

    func addRoutes(
        to router: Router<Context>, authentication: AuthenticationMiddleware<Context>, idempotency: IdempotencyMiddleware<Context>,
        limiter: WriteLimiter
    ) {
        let cart = router.group("/v1/cart").add(middleware: authentication).add(middleware: idempotency)
            .add(middleware: WriteLimitMiddleware(limiter: limiter, kind: .changes))
        cart.get(use: show)
        cart.delete { _, context in try await command(.clear, context) }
        cart.post("items", use: add)
        cart.patch("items/:loanID", use: change)
        cart.delete("items/:loanID") { _, context in
            try await command(.remove(LoanID(try context.parameters.requireUUID("loanID"))), context)
        }
        cart.post("checkout", use: checkout)
    }

    @Sendable func show(_ request: Request, context: Context) async throws -> CartResource {
        try await cart(of: try context.requireIdentity(), position: nil)
    }

    @Sendable func add(_ request: Request, context: Context) async throws -> EditedResponse<CartResource> {
        let me = try context.requireIdentity()
        let body = try await request.decodeBody(LineBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("loanId", body.loanId))
        let loanID = fields.id(body.loanId, "loanId", as: LoanID.self)
        try fields.throwIfAny()
        // The loan as it stands now, and the lender's default share: the cart's rules need both.
        let (loan, _) = try await gateway.load(StreamID("loan", loanID!), .loan)
        let (user, _) = try await gateway.load(StreamID("user", me), .user)
        let command = CartCommand.add(
            loanID: loanID!, amountCents: body.amountCents, loan: loan, defaultShare: user.defaultShareCents)
        return EditedResponse(status: .created, response: try await self.command(command, context))
    }

    @Sendable func change(_ request: Request, context: Context) async throws -> CartResource {
        let loanID = LoanID(try context.parameters.requireUUID("loanID"))
        let body = try await request.decodeBody(LineBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("amountCents", body.amountCents))
        try fields.throwIfAny()
        let (loan, _) = try await gateway.load(StreamID("loan", loanID), .loan)
        return try await command(.change(loanID: loanID, amountCents: body.amountCents!, loan: loan), context)
    }

    /// A command on the signed-in user's cart; answers the cart as it now stands.
    func command(_ command: CartCommand, _ context: Context) async throws -> CartResource {
        let me = try context.requireIdentity()
        let handled = try await gateway.handle(command, on: .cart, id: me, actor: me)
        return try await cart(of: me, position: handled.append?.lastPosition)
    }

    /// Checkout: the cart, every loan in it and the lender's stream, in one append that expects
    /// the version of each, so that two checkouts can never fund a loan beyond its amount.
    /// A card is charged only after the rules pass, and refunded if the append cannot happen.
    @Sendable func checkout(_ request: Request, context: Context) async throws -> CheckoutResult {
        let me = try context.requireIdentity()
        let body = try await request.decodeBody(CheckoutBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("payWith", body.payWith))
        let cardID = fields.payingCard(body.payWith, body.cardId)
        try fields.throwIfAny()
        let today = Day(Date())
        if let (result, append) = try gateway.replayedOutcome(CheckoutResult.self) { return answer(result, append) }
        guard let cardID else { return try await checkout(me, paying: .balance, today) }
        // Decided once with no charge yet: nothing is charged for a checkout that would fail.
        var reads = StreamReads(gateway: gateway)
        let (decision, user) = try await decide(&reads, me, .card(cardID, chargeID: ""), today)
        let card = try UserDecider.chargeableCard(cardID, in: user, today: today)
        return try await cardPayments.pay(decision.totalCents, with: card, for: me, purpose: "checkout") { charge in
            try await checkout(me, paying: .card(cardID, chargeID: charge.id), charged: charge.amountCents, today)
        }
    }

    /// The checkout's one append across the cart, its loans and the user.
    func checkout(_ me: UserID, paying payment: Payment, charged: Int? = nil, _ today: Day) async throws -> CheckoutResult {
        let (result, append) = try await gateway.handleAcross("checkout", actor: me) { reads in
            let (decision, user) = try await decide(&reads, me, payment, today)
            if let charged, charged != decision.totalCents {
                throw DomainError(.conflict, "cart_changed", "The cart changed while it was being paid; nothing was bought.")
            }
            let writes =
                try [StreamWrite(decision.cart, to: .cart, id: me)]
                + decision.loans.map { try StreamWrite($0.events, to: .loan, id: $0.id) }
                + [StreamWrite(decision.user, to: .user, id: me)]
            let balance = decision.user.reduce(user, UserDecider.evolve).balanceCents
            let result = CheckoutResult(
                purchases: decision.purchases.map { Purchase(loanId: $0.loanID, amountCents: $0.amountCents) },
                totalCents: decision.totalCents, paidWith: PaidWith(payment.paidWith), balanceCents: balance)
            return (writes, result)
        }
        return answer(result, append)
    }

    func answer(_ result: CheckoutResult, _ append: AppendResult?) -> CheckoutResult {
        var answer = result
        answer.position = append?.lastPosition
        return answer
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

    /// The cart view: each line with what its loan still needs and, when the line no longer
    /// fits, why (the same rule checkout applies).
    func cart(of user: UserID, position: Int64?) async throws -> CartResource {
        let rows = try await pool.query(
            """
            SELECT c.loan_id, c.amount_cents, l.title, l.status, l.amount_cents - l.funded_cents AS still_needed
            FROM cart_lines_view c LEFT JOIN loans_view l USING (loan_id)
            WHERE c.user_id = \(user.rawValue)
            ORDER BY c.position, c.loan_id
            """)
        let lines = try rows.map { row in
            let amount: Int = try row.decode("amount_cents")
            let status = try row.decode("status", as: String?.self).flatMap(LoanStatus.init(rawValue:))
            let stillNeeded = try row.decode("still_needed", as: Int?.self) ?? 0
            return CartResource.Line(
                loanId: LoanID(try row.decode("loan_id", as: UUID.self)), title: try row.decode("title", as: String?.self) ?? "",
                amountCents: amount, stillNeededCents: max(0, stillNeeded),
                problem: status.map { CartDecider.problem(amountCents: amount, status: $0, stillNeededCents: stillNeeded) }
                    ?? "loan_not_found")
        }
        return CartResource(lines: lines, totalCents: lines.reduce(0) { $0 + $1.amountCents }, position: position)
    }
}

/// A cart as clients read it (SPEC §6).
struct CartResource: ResponseEncodable {
    struct Line: Codable {
        var loanId: LoanID
        var title: String
        var amountCents: Int
        var stillNeededCents: Int
        var problem: String?

        // `problem` is always present, null when the line fits.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(loanId, forKey: .loanId)
            try container.encode(title, forKey: .title)
            try container.encode(amountCents, forKey: .amountCents)
            try container.encode(stillNeededCents, forKey: .stillNeededCents)
            try container.encode(problem, forKey: .problem)
        }
    }

    var lines: [Line]
    var totalCents: Int
    var position: Int64?
}
