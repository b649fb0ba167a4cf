import EventStore
import Foundation
import Hummingbird
import Marketplace
import Payments
import Postgres

/// What the money routes need: the processor charges go to (made on the server's pool, where
/// the sandbox keeps its books), and the card fingerprint key.
public struct PaymentsSetup: Sendable {
    public var makeProcessor: @Sendable (PostgresPool) -> any PaymentProcessor
    public var fingerprinter: CardFingerprinter
    /// Card adds, and card charges, per user and hour.
    public var attemptsPerHour = 10

    public init(makeProcessor: @escaping @Sendable (PostgresPool) -> any PaymentProcessor, fingerprinter: CardFingerprinter) {
        self.makeProcessor = makeProcessor
        self.fingerprinter = fingerprinter
    }

    /// The sandbox processor, with fingerprints keyed by `secret`.
    public static func sandbox(secret: Data) throws -> PaymentsSetup {
        PaymentsSetup(makeProcessor: { SandboxPaymentProcessor(pool: $0) }, fingerprinter: try CardFingerprinter(secret: secret))
    }
}

/// The signed-in user's cards and deposits: `POST /v1/me/cards`, `DELETE /v1/me/cards/{cardId}`,
/// `POST /v1/me/deposits`. A card's number reaches the processor and the fingerprint, and no
/// event, table or log line.
struct WalletController<Context: AuthenticatedRequestContext>: Sendable {
    let gateway: CommandGateway
    let processor: any PaymentProcessor
    let fingerprinter: CardFingerprinter
    let cardPayments: CardPayments

    struct CardBody: Decodable {
        var number: String?
        var expMonth: Int?
        var expYear: Int?
        var cvv: String?
        var holderName: String?
    }

    struct DepositBody: Decodable {
        var amountCents: Int?
        var cardId: String?
    }

    struct Deposit: ResponseEncodable {
        var amountCents: Int
        var cardId: CardID
        var chargeId: String
        var balanceCents: Int
        var position: Int64?
    }

    func addRoutes(to router: Router<Context>, authentication: AuthenticationMiddleware<Context>, idempotency: IdempotencyMiddleware<Context>) {
        let me = router.group("/v1/me").add(middleware: authentication).add(middleware: idempotency)
        me.post("cards", use: addCard)
        me.delete("cards/:cardID", use: removeCard)
        me.post("deposits", use: deposit)
    }

    @Sendable func addCard(_ request: Request, context: Context) async throws -> EditedResponse<CardResource> {
        let me = try context.requireIdentity()
        let body = try await request.decodeBody(CardBody.self, context: context)
        var fields = FieldCheck()
        fields.require(
            ("number", body.number), ("expMonth", body.expMonth), ("expYear", body.expYear), ("cvv", body.cvv),
            ("holderName", body.holderName))
        try fields.throwIfAny()
        let card = try CardRules.validate(
            number: body.number!, expMonth: body.expMonth!, expYear: body.expYear!, cvv: body.cvv!,
            holderName: body.holderName!, today: Day(Date()))
        let fingerprint = fingerprinter.fingerprint(card)
        // A repeat answers the first request's card, and registers nothing, counts nothing.
        if let handled = try await gateway.replayed(on: .user, id: me) { return try answer(handled, fingerprint) }
        let (state, _) = try await gateway.load(StreamID("user", me), .user)
        // A card already on file is not registered with the processor again.
        let token: String
        if let known = state.cards.first(where: { $0.fingerprint == fingerprint }) {
            token = known.processorToken
        } else {
            try await cardPayments.limits.reserve(.cardAdd, for: me)
            token = try await processor.register(card)
        }
        let onFile = CardOnFile(
            cardID: CardID(), network: card.network, last4: card.last4, expMonth: card.expMonth, expYear: card.expYear,
            fingerprint: fingerprint, processorToken: token)
        return try answer(try await gateway.handle(.addCard(onFile), on: .user, id: me, actor: me), fingerprint)
    }

    /// The card as the command left it: 201 when it was added, 200 when it was on file.
    func answer(_ handled: Handled<UserState, UserEvent>, _ fingerprint: String) throws -> EditedResponse<CardResource> {
        // Only a repeat of a request that found the card on file, after it was removed since.
        guard let kept = handled.state.cards.first(where: { $0.fingerprint == fingerprint }) else {
            throw DomainError(.notFound, "card_not_found", "The card is no longer on file.")
        }
        let added = handled.events.contains { if case .cardAdded = $0 { true } else { false } }
        return EditedResponse(
            status: added ? .created : .ok,
            response: CardResource(kept, position: handled.append?.lastPosition))
    }

    @Sendable func removeCard(_ request: Request, context: Context) async throws -> Removed {
        let me = try context.requireIdentity()
        let cardID = CardID(try context.parameters.requireUUID("cardID"))
        let handled = try await gateway.handle(.removeCard(cardID), on: .user, id: me, actor: me)
        return Removed(position: handled.append?.lastPosition)
    }

    @Sendable func deposit(_ request: Request, context: Context) async throws -> EditedResponse<Deposit> {
        let me = try context.requireIdentity()
        let body = try await request.decodeBody(DepositBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("amountCents", body.amountCents), ("cardId", body.cardId))
        let cardID = fields.id(body.cardId, "cardId", as: CardID.self)
        try fields.throwIfAny()
        let amount = body.amountCents!
        let today = Day(Date())
        let handled: Handled<UserState, UserEvent>
        if let replayed = try await gateway.replayed(on: .user, id: me) {
            handled = replayed
        } else {
            // The rules first, so that nothing is charged for a deposit that would be refused.
            let (state, _) = try await gateway.load(StreamID("user", me), .user)
            let card = try UserDecider.checkDeposit(amountCents: amount, cardID: cardID!, state, today: today)
            handled = try await cardPayments.pay(amount, with: card, for: me, purpose: "deposit") { charge in
                try await gateway.handle(
                    .deposit(amountCents: amount, cardID: cardID!, chargeID: charge.id, today: today), on: .user, id: me,
                    actor: me)
            }
        }
        guard case .fundsDeposited(let deposited)? = handled.events.first else {
            throw Problem(.internalServerError, code: "deposit_not_recorded", detail: "The deposit was not recorded.")
        }
        return EditedResponse(
            status: .created,
            response: Deposit(
                amountCents: deposited.amountCents, cardId: deposited.cardID, chargeId: deposited.chargeID,
                balanceCents: handled.state.balanceCents, position: handled.append?.lastPosition))
    }
}

/// A card as clients see it: never more than the last four digits.
struct CardResource: ResponseEncodable {
    var id: CardID
    var network: String
    var last4: String
    var expMonth: Int
    var expYear: Int
    var redacted: String
    var position: Int64?

    init(_ card: CardOnFile, position: Int64?) {
        self.id = card.cardID
        self.network = card.network.rawValue
        self.last4 = card.last4
        self.expMonth = card.expMonth
        self.expYear = card.expYear
        self.redacted = card.redacted
        self.position = position
    }

    init(row: PostgresRow) throws {
        id = CardID(try row.decode("card_id", as: UUID.self))
        network = try row.decode("network")
        last4 = try row.decode("last4")
        expMonth = try row.decode("exp_month")
        expYear = try row.decode("exp_year")
        redacted = CardRules.redacted(last4: last4)
    }
}

/// What a DELETE of a line or a card answers: where the log stands after it.
struct Removed: ResponseEncodable {
    var position: Int64?
}
