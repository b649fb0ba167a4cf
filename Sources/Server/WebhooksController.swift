import Foundation
import HTTPTypes
import Hummingbird
import Marketplace
import UseCases

/// Webhooks (SPEC §12.6), for operators alone (`OperatorsOnly`): `POST /v1/admin/webhooks
/// {url, types, position?}` registers an endpoint and shows its secret, that once; `GET` lists
/// them, each with how far it has got; `DELETE .../{id}` stops one; `POST .../{id}/position
/// {position}` replays from a position. Settings of the server, not events of the log.
struct WebhooksController: Sendable {
    let webhooks: Webhooks

    struct RegisterBody: Decodable {
        var url: String?
        var types: [String]?
        var position: Int64?
    }

    struct PositionBody: Decodable {
        var position: Int64?
    }

    struct List: ResponseEncodable {
        var data: [WebhookResource]
    }

    @Sendable func register(_ request: Request, context: UserContext) async throws -> EditedResponse<CreatedWebhook> {
        let body = try await request.decodeBody(RegisterBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("url", body.url), ("types", body.types))
        fields.problems += Webhooks.problems(url: body.url, types: body.types, position: body.position)
        let (url, types) = try fields.checked(body.url, body.types)
        let created = try await webhooks.register(url: url, types: types, from: body.position, by: context.user)
        return EditedResponse(status: .created, response: created)
    }

    @Sendable func list(_ request: Request, context: UserContext) async throws -> List {
        List(data: try await webhooks.list(by: context.user))
    }

    @Sendable func delete(_ request: Request, context: UserContext) async throws -> HTTPResponse.Status {
        let id = try Self.id(context)
        try await webhooks.delete(id, by: context.user)
        return .noContent
    }

    /// `POST /v1/admin/webhooks/{id}/position {position}`: the endpoint, moved there.
    @Sendable func rewind(_ request: Request, context: UserContext) async throws -> WebhookResource {
        let id = try Self.id(context)
        let body = try await request.decodeBody(PositionBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("position", body.position))
        fields.problems += Webhooks.positionProblems(body.position)
        let position = try fields.checked(body.position)
        return try await webhooks.rewind(id, to: position, by: context.user)
    }

    /// The path's id: a malformed one names no webhook (404), as an unknown one.
    static func id(_ context: UserContext) throws -> UUID {
        guard let text = context.parameters.get("webhookID"), let id = UUID(uuidString: text) else { throw Webhooks.notFound }
        return id
    }
}

extension WebhookResource: ResponseEncodable {}
extension CreatedWebhook: ResponseEncodable {}
