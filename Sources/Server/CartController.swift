import Foundation
import Hummingbird
import Marketplace
import Projections
import UseCases

/// The signed-in user's cart and paying for it: `GET/DELETE /v1/cart`, `POST /v1/cart/items`,
/// `PATCH/DELETE /v1/cart/items/{loanId}`, `POST /v1/cart/checkout`.
struct CartController: Sendable {
    let carts: Carts
    let view: CartView
    /// The server's day, as every controller decides on it (`buildApplication`'s `today`).
    let today: @Sendable () -> Day

    struct LineBody: Decodable {
        var loanId: String?
        var amountCents: Int?
    }

    struct PaymentBody: Decodable {
        var payWith: String?
        var cardId: String?
    }

    @Sendable func show(_ request: Request, context: UserContext) async throws -> CartResource {
        try await view.cart(of: context.user)
    }

    @Sendable func add(_ request: Request, context: UserContext) async throws -> EditedResponse<CartResource> {
        let body = try await request.decodeBody(LineBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("loanId", body.loanId))
        let parsedLoanID = fields.id(body.loanId, "loanId", as: LoanID.self)
        let loanID = try fields.checked(parsedLoanID)
        let append = try await carts.add(loanID, amountCents: body.amountCents, for: context.user)
        return EditedResponse(status: .created, response: try await view.cart(of: context.user, position: append?.lastPosition))
    }

    @Sendable func change(_ request: Request, context: UserContext) async throws -> CartResource {
        let loanID = LoanID(try context.parameters.requireUUID("loanID"))
        let body = try await request.decodeBody(LineBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("amountCents", body.amountCents))
        let amountCents = try fields.checked(body.amountCents)
        let append = try await carts.change(loanID, amountCents: amountCents, for: context.user)
        return try await view.cart(of: context.user, position: append?.lastPosition)
    }

    @Sendable func remove(_ request: Request, context: UserContext) async throws -> CartResource {
        try await command(.remove(LoanID(try context.parameters.requireUUID("loanID"))), context)
    }

    @Sendable func clear(_ request: Request, context: UserContext) async throws -> CartResource {
        try await command(.clear, context)
    }

    /// A command on the signed-in user's cart; answers the cart as it now stands.
    func command(_ command: CartCommand, _ context: UserContext) async throws -> CartResource {
        let append = try await carts.handle(command, for: context.user)
        return try await view.cart(of: context.user, position: append?.lastPosition)
    }

    @Sendable func checkout(_ request: Request, context: UserContext) async throws -> PaidCart {
        let body = try await request.decodeBody(PaymentBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("payWith", body.payWith))
        let cardID = fields.payingCard(body.payWith, body.cardId)
        try fields.throwIfAny()
        return try await carts.checkout(context.user, paying: cardID, today: today())
    }
}
