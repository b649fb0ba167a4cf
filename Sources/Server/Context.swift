import Foundation
import Hummingbird
import HummingbirdAuth
import Marketplace
import UseCases

/// Who a live bearer token belongs to.
public struct SignedIn: Sendable {
    public var user: UserID
    /// The token itself, for logging out of this session.
    public var token: String
    /// An operator's suspension of the user, when the session was read (SPEC §12.5).
    public var suspension: Suspension? = nil
}

/// The request context of every route: Hummingbird's core, with a 1 MiB body limit, and who
/// is asking once `BearerAuthenticator` has said.
public struct AppRequestContext: AuthRequestContext {
    public var coreContext: CoreRequestContextStorage
    public var identity: SignedIn?
    /// The client's IP address, for rate limits (an IPv6 address by its /64); nil when unknown.
    public let clientAddress: String?

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.clientAddress = source.channel.remoteAddress?.ipAddress.map(ClientAddress.key)
    }

    /// What anyone may send without a token: a registration or a login is a few hundred bytes,
    /// and a megabyte of JSON cost a cooperative thread 54-130 ms to check and decode (issue
    /// 48: four clients looping on `/v1/sessions` took another user's read from 1 to 454 ms).
    /// Signed-in requests have `UserContext`'s megabyte.
    public var maxUploadSize: Int { 64 * 1024 }

    /// Writes JSON as it goes, without Foundation's intermediate tree (see the type).
    public var responseEncoder: StreamingJSONEncoder { StreamingJSONEncoder() }
}

/// The context of the routes that need a signed-in user, whose user is therefore never
/// missing: made from the app's context, or a 401 when no live token came with the request.
public struct UserContext: ChildRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let user: UserID
    public let token: String
    public let clientAddress: String?
    /// Where this request's reads go, on the routes a replica may serve (`ReadPlacementMiddleware`).
    public var readFrom: ReadFrom = .primary

    public init(context: AppRequestContext) throws {
        guard let identity = context.identity else {
            throw Problem(
                .unauthorized, code: "unauthenticated", detail: "A valid bearer token is required.",
                headers: [.wwwAuthenticate: "Bearer"])
        }
        self.coreContext = context.coreContext
        self.user = identity.user
        self.token = identity.token
        self.clientAddress = context.clientAddress
    }

    public var maxUploadSize: Int { 1024 * 1024 }
    public var responseEncoder: StreamingJSONEncoder { StreamingJSONEncoder() }
}

/// Says who a request's bearer token belongs to, while the session is live; says nothing for
/// a request without one, or with a dead one (the routes that need a user refuse it then).
/// A HummingbirdAuth authenticator.
struct BearerAuthenticator: AuthenticatorMiddleware {
    typealias Context = AppRequestContext
    let accounts: Accounts

    func authenticate(request: Request, context: AppRequestContext) async throws -> SignedIn? {
        guard let token = Self.token(request.headers[.authorization]), let session = try await accounts.session(token: token)
        else { return nil }
        return SignedIn(user: session.user, token: token, suspension: session.suspension)
    }

    /// The token of `Bearer <token>`, the scheme in any case (RFC 9110 §11.1), which
    /// HummingbirdAuth's `headers.bearer` reads only as `Bearer`.
    static func token(_ authorization: String?) -> String? {
        guard let authorization else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingWhiteSpace(newlines: false)
        return token.isEmpty ? nil : token
    }
}

/// A suspended user reads but does not write (SPEC §12.5): every request but a read, and but
/// logging out, is 403 `account_suspended` while the suspension holds.
struct SuspendedUsersRead: RouterMiddleware {
    typealias Context = AppRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let suspension = context.identity?.suspension, suspension.holds(at: Date()), request.method != .get,
            request.method != .head, !(request.method == .delete && request.uri.path == "/v1/sessions/current")
        {
            throw DomainError.accountSuspended(until: suspension.until)
        }
        return try await next(request, context)
    }
}
