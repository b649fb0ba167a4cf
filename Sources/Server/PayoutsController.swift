import Foundation
import Hummingbird
import Marketplace
import Projections
import UseCases

/// Money out (SPEC §12.3): `PUT /v1/me/payout-method`, `POST /v1/me/payouts`, `GET /v1/me/payouts`.
struct PayoutsController: Sendable {
    let payouts: Payouts
    let view: PayoutsView

    struct MethodBody: Decodable {
        var kind: String?
        var token: String?
    }

    /// A payout method shows only how the token ends: the token is personal data.
    struct Method: ResponseEncodable {
        var kind: String
        var tokenEnding: String
        var position: Int64?
    }

    struct PayoutBody: Decodable {
        var amountCents: Int?
    }

    @Sendable func setMethod(_ request: Request, context: UserContext) async throws -> Method {
        let body = try await request.decodeBody(MethodBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("kind", body.kind), ("token", body.token))
        if let kind = body.kind, kind != "bank_account" {
            fields.problems.append(FieldError(field: "kind", code: "invalid_kind", message: "bank_account"))
        }
        fields.longest(body.token, 200, "token")
        let token = try fields.checked(body.token)
        let handled = try await payouts.setMethod(token: token, for: context.user)
        return Method(
            kind: "bank_account", tokenEnding: String((handled.state.payoutToken ?? "").suffix(4)),
            position: handled.append?.lastPosition)
    }

    @Sendable func request(_ request: Request, context: UserContext) async throws -> EditedResponse<PayoutResource> {
        let body = try await request.decodeBody(PayoutBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("amountCents", body.amountCents))
        let amountCents = try fields.checked(body.amountCents)
        let finished = try await payouts.request(amountCents, for: context.user, now: Date())
        guard finished.payout.status != .failed else { throw Payouts.payoutFailed }
        var resource = PayoutResource(finished.payout)
        resource.position = finished.position
        return EditedResponse(status: .created, response: resource)
    }

    @Sendable func list(_ request: Request, context: UserContext) async throws -> Page<PayoutResource> {
        let limit = try request.pageLimit()
        let (rows, more) = try await view.payouts(of: context.user, before: try request.positionCursor(), limit: limit)
        return Page(data: rows, nextCursor: more ? rows.last?.position.map { String($0) } : nil)
    }
}

extension PayoutResource {
    init(_ payout: Payout) {
        self.init(
            id: payout.id, amountCents: payout.amountCents, status: payout.status.rawValue, createdAt: payout.requestedAt,
            position: nil)
    }
}

extension PayoutResource: ResponseEncodable {}
