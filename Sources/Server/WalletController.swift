import EventStore
import Foundation
import Hummingbird
import Marketplace
import Payments
import Postgres

/// What the money routes need: the processor charges go to, and the card fingerprint key.
public struct PaymentsSetup: Sendable {
    public var processor: any PaymentProcessor
    public var fingerprinter: CardFingerprinter

    public init(processor: any PaymentProcessor, fingerprinter: CardFingerprinter) {
        self.processor = processor
        self.fingerprinter = fingerprinter
    }

    /// The sandbox processor, with fingerprints keyed by `secret`.
    public static func sandbox(secret: Data) throws -> PaymentsSetup {
        PaymentsSetup(processor: SandboxPaymentProcessor(), fingerprinter: try CardFingerprinter(secret: secret))
    }
}

/// The signed-in user's cards and deposits: `POST /v1/me/cards`, `DELETE /v1/me/cards/{cardId}`,
/// `POST /v1/me/deposits`. A card's number reaches the processor and the fingerprint, and no
/// event, table or log line.
struct WalletController<Context: AuthenticatedRequestContext>: Sendable {
    let gateway: CommandGateway
    let payments: PaymentsSetup

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
        let fingerprint = payments.fingerprinter.fingerprint(card)
        let (state, _) = try await gateway.load(StreamID("user", me), .user)
        // A card already on file is not registered with the processor again.
        let token =
            if let known = state.cards.first(where: { $0.fingerprint == fingerprint }) { known.processorToken } else {
                try await payments.processor.register(card)
            }
        let onFile = CardOnFile(
            cardID: CardID(), network: card.network, last4: card.last4, expMonth: card.expMonth, expYear: card.expYear,
            fingerprint: fingerprint, processorToken: token)
        let handled = try await gateway.handle(.addCard(onFile), on: .user, id: me, actor: me)
        guard let kept = handled.state.cards.first(where: { $0.fingerprint == fingerprint }) else {
            throw Problem(.internalServerError, code: "card_not_kept", detail: "The card was not kept.")
        }
        return EditedResponse(
            status: kept.cardID == onFile.cardID ? .created : .ok,
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
        // The rules first, so that nothing is charged for a deposit that would be refused.
        let (state, _) = try await gateway.load(StreamID("user", me), .user)
        let card = try UserDecider.checkDeposit(amountCents: amount, cardID: cardID!, state, today: today)
        let chargeID = try await payments.processor.charge(
            token: card.processorToken, amountCents: amount,
            idempotencyKey: chargeKey(request, me, purpose: "deposit"))
        do {
            let handled = try await gateway.handle(
                .deposit(amountCents: amount, cardID: cardID!, chargeID: chargeID, today: today), on: .user, id: me, actor: me)
            return EditedResponse(
                status: .created,
                response: Deposit(
                    amountCents: amount, cardId: cardID!, chargeId: chargeID, balanceCents: handled.state.balanceCents,
                    position: handled.append?.lastPosition))
        } catch {
            // Charged, not recorded (the card was removed meanwhile): give the money back.
            try? await payments.processor.refund(chargeID: chargeID)
            throw error
        }
    }
}

/// The idempotency key of a charge: the request's own `Idempotency-Key` when it has one, so a
/// retried request charges once; else fresh.
func chargeKey(_ request: Request, _ user: UserID, purpose: String) -> String {
    if let key = request.headers[.idempotencyKey] { return "\(user):\(purpose):\(key)" }
    return "\(user):\(purpose):\(UUID().uuidString.lowercased())"
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
