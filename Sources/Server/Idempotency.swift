import Crypto
import EventStore
import Foundation
import HTTPTypes
import Hummingbird
import Marketplace
import UseCases

extension HTTPField.Name {
    static let idempotencyKey = HTTPField.Name("Idempotency-Key")!
    static let idempotentReplayed = HTTPField.Name("Idempotent-Replayed")!
}

/// `Idempotency-Key` on POST, PATCH and DELETE, per user: the same key with the same request
/// gets the first answer again and writes nothing; with another request, a 422.
///
/// The key is written by the event store in the transaction that appends the command's events
/// (`CommandGateway` passes it on), so it is spent exactly when the command commits: no claim
/// before, no store after, nothing that a failure between them could release or lose. This
/// middleware only digests the request, refuses a key used for another one, and tells the
/// gateway (through `IdempotentRequest.current`) what the key already holds. A repeat is
/// answered by the same handler, which the gateway gives the first request's events and state
/// instead of deciding again. A refused command writes nothing, so its key stays unspent.
struct IdempotencyMiddleware: RouterMiddleware {
    let store: EventStore
    /// Keys the request digest: a body may hold a card's number and CVV, and a plain hash of
    /// so few possible values could be reversed by trying them all.
    let digestKey: SymmetricKey

    func handle(_ request: Request, context: UserContext, next: (Request, UserContext) async throws -> Response) async throws
        -> Response
    {
        guard [.post, .patch, .delete].contains(request.method), let key = request.headers[.idempotencyKey] else {
            return try await next(request, context)
        }
        let user = context.user
        guard (1...200).contains(key.count), key.allSatisfy({ $0.isASCII && !$0.isWhitespace && !$0.isNewline }) else {
            throw Problem(.badRequest, code: "invalid_idempotency_key", detail: "An Idempotency-Key is 1 to 200 visible ASCII characters.")
        }
        var request = request
        let body = try await request.collectBodyWithinLimit(context: context)
        // The one reading of the body's shape, duplicate keys included, before anything digests it.
        // The digest is of the canonical JSON (`JSONDocument.canonical`: a client retrying with
        // its keys in another order, or other spacing, sends the same request), off the tape
        // the check read; a body that is not JSON, of its bytes.
        let bytes = body.withUnsafeReadableBytes { Array($0) }
        let checked = try JSONShape.CheckedBody(bytes)
        var digest = HMAC<SHA256>(key: digestKey)
        digest.update(data: Data("\(request.method.rawValue) \(request.uri.path)\n".utf8))
        digest.update(data: checked.document?.canonical() ?? bytes)
        let idempotency = Idempotency(actor: user.description, key: key, requestHash: Data(digest.finalize()).hexString)

        let recorded = try await store.idempotencyRecord(actor: idempotency.actor, key: key)
        if let recorded, recorded.requestHash != idempotency.requestHash { throw IdempotentRequest.keyReused }
        let current = IdempotentRequest(idempotency, recorded: recorded)
        var response = try await IdempotentRequest.$current.withValue(current) {
            try await JSONShape.$checkedBody.withValue(checked) { try await next(request, context) }
        }
        if current.wasReplayed {
            LenderMetrics.idempotentReplays.increment()
            response.headers[.idempotentReplayed] = "true"
        }
        return response
    }
}
