import Foundation
import Hummingbird
import Marketplace
import Projections
import UseCases

/// The signed-in user's cards and deposits: `POST /v1/me/cards`, `DELETE /v1/me/cards/{cardId}`,
/// `POST /v1/me/deposits`. A card's number reaches the processor and the fingerprint, and no
/// event, table or log line.
struct WalletController: Sendable {
    let wallet: Wallet
    /// The server's day, as every controller decides on it (`buildApplication`'s `today`).
    let today: @Sendable () -> Day

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

    /// Newest first; `cursor` is the last entry's position of the page before.
    @Sendable func balanceHistory(_ request: Request, context: UserContext) async throws -> Page<BalanceEntry> {
        let limit = try request.pageLimit()
        let before = try request.positionCursor()
        let (entries, more) = try await BalanceHistory.entries(
            of: context.user, in: wallet.gateway.store, before: before, limit: limit)
        return Page(data: entries, nextCursor: more ? entries.last.map { String($0.position) } : nil)
    }

    struct Deposit: ResponseEncodable {
        var amountCents: Int
        var cardId: CardID
        var chargeId: String
        var balanceCents: Int
        var availableCents: Int
        var position: Int64?
    }

    /// The card as the command left it: 201 when it was added, 200 when it was on file.
    @Sendable func addCard(_ request: Request, context: UserContext) async throws -> EditedResponse<CardResource> {
        let body = try await request.decodeBody(CardBody.self, context: context)
        var fields = FieldCheck()
        fields.require(
            ("number", body.number), ("expMonth", body.expMonth), ("expYear", body.expYear), ("cvv", body.cvv),
            ("holderName", body.holderName))
        let (number, expMonth, expYear, cvv, holderName) = try fields.checked(
            body.number, body.expMonth, body.expYear, body.cvv, body.holderName)
        let card = try CardRules.validate(
            number: number, expMonth: expMonth, expYear: expYear, cvv: cvv, holderName: holderName, today: today())
        let added = try await wallet.addCard(card, for: context.user)
        return EditedResponse(
            status: added.added ? .created : .ok, response: CardResource(added.card, position: added.append?.lastPosition))
    }

    @Sendable func removeCard(_ request: Request, context: UserContext) async throws -> Removed {
        let cardID = CardID(try context.parameters.requireUUID("cardID"))
        return Removed(position: try await wallet.removeCard(cardID, for: context.user)?.lastPosition)
    }

    @Sendable func deposit(_ request: Request, context: UserContext) async throws -> EditedResponse<Deposit> {
        let body = try await request.decodeBody(DepositBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("amountCents", body.amountCents), ("cardId", body.cardId))
        let parsedCardID = fields.id(body.cardId, "cardId", as: CardID.self)
        let (amountCents, cardID) = try fields.checked(body.amountCents, parsedCardID)
        let deposited = try await wallet.deposit(amountCents, from: cardID, for: context.user, today: today())
        return EditedResponse(
            status: .created,
            response: Deposit(
                amountCents: deposited.deposit.amountCents, cardId: deposited.deposit.cardID,
                chargeId: deposited.deposit.chargeID, balanceCents: deposited.balanceCents,
                availableCents: deposited.availableCents,
                position: deposited.append?.lastPosition))
    }
}

/// What a DELETE of a line or a card answers: where the log stands after it.
struct Removed: ResponseEncodable {
    var position: Int64?
}
