import Foundation
import Hummingbird
import NIOCore
import Marketplace

extension Request {
    /// The JSON body as `T`, or a problem: 413 when too large, 400 when not JSON of that shape.
    func decodeBody<T: Decodable>(_ type: T.Type, context: some RequestContext) async throws -> T {
        do {
            return try await decode(as: type, context: context)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw Problem(.contentTooLarge, code: "body_too_large", detail: "The body is larger than 1 MiB.")
        } catch {
            throw Problem(.badRequest, code: "malformed_body", detail: "The body is not the JSON object this route takes.")
        }
    }

    /// Like `decodeBody`, for routes whose body is optional: nil when there is none.
    func decodeBody<T: Decodable>(_ type: T.Type, context: some RequestContext, allowEmpty: Bool) async throws -> T? {
        var request = self
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: context.maxUploadSize)
        } catch {
            throw Problem(.contentTooLarge, code: "body_too_large", detail: "The body is larger than 1 MiB.")
        }
        if allowEmpty, buffer.readableBytes == 0 { return nil }
        do {
            return try JSONDecoder().decode(type, from: Data(buffer.readableBytesView))
        } catch {
            throw Problem(.badRequest, code: "malformed_body", detail: "The body is not the JSON object this route takes.")
        }
    }

    /// The bearer token of `Authorization: Bearer <token>`, if any.
    var bearerToken: String? {
        guard let header = headers[.authorization] else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else { return nil }
        return String(parts[1])
    }
}

/// Names the body fields a request left out, all at once (422 `required`).
func requireFields(_ fields: [(String, Any?)]) throws {
    let missing = fields.filter { $0.1 == nil }.map {
        FieldError(field: $0.0, code: "required", message: "\($0.0) is required")
    }
    if !missing.isEmpty { throw Problem(DomainError.invalid(missing)) }
}

/// Lets a request through only with a live bearer token, and says whose it is.
struct AuthenticationMiddleware<Context: AuthenticatedRequestContext>: RouterMiddleware {
    let accounts: Accounts

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard let token = request.bearerToken, let userID = try await accounts.authenticate(token: token) else {
            throw Problem(
                .unauthorized, code: "unauthenticated", detail: "A valid bearer token is required.",
                headers: [.wwwAuthenticate: "Bearer"])
        }
        var context = context
        context.identity = userID
        context.bearerToken = token
        return try await next(request, context)
    }
}

/// A request context that can carry who is asking.
public protocol AuthenticatedRequestContext: RequestContext {
    var identity: UserID? { get set }
    var bearerToken: String? { get set }
}

extension AuthenticatedRequestContext {
    /// The authenticated user; only routes behind `AuthenticationMiddleware` may ask.
    func requireIdentity() throws -> UserID {
        guard let identity else {
            throw Problem(.unauthorized, code: "unauthenticated", detail: "A valid bearer token is required.")
        }
        return identity
    }
}
