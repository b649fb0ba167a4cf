import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Marketplace
import NIOCore
import Postgres
import Projections
import UseCases

/// An operator signed in to the desk: the session is an ordinary one (`POST /v1/sessions`'s,
/// with its login limits and revocation), its token in an HttpOnly, SameSite=Strict cookie.
struct DeskOperator: Sendable {
    var user: UserID
    var token: String
    /// The token every form of this session posts back (HMAC of the session's token).
    var csrf: String
    var suspended: Bool
}

/// Why the desk will not serve a request, as a page: its status and its code.
struct DeskRefusal: Error {
    var status: HTTPResponse.Status
    var code: String
    var detail: String

    static let notOperator = DeskRefusal(status: .forbidden, code: "not_operator", detail: "Only operators may use the desk.")
    static let forged = DeskRefusal(
        status: .forbidden, code: "csrf_failed", detail: "This form did not come from the desk's own page: nothing was changed.")
    static let signedOut = DeskRefusal(status: .forbidden, code: "unauthenticated", detail: "Sign in to the desk first.")
}

/// Cookies, CSRF tokens and the origin check.
struct DeskSessions: Sendable {
    let accounts: Accounts
    let operators: Operators
    let csrfKey: SymmetricKey

    static let cookie = "lender_desk"
    /// Before sign-in: a random value the login form's token is bound to (login CSRF).
    static let loginCookie = "lender_desk_login"

    /// The operator of the request's desk cookie (or bearer token); nil without a live
    /// session; `DeskRefusal.notOperator` for anyone else's.
    func signedIn(_ request: Request) async throws -> DeskOperator? {
        guard let token = request.cookies[Self.cookie]?.value ?? BearerAuthenticator.token(request.headers[.authorization]),
            !token.isEmpty, let live = try await accounts.session(token: token)
        else { return nil }
        guard try await operators.contains(live.user) else { throw DeskRefusal.notOperator }
        return DeskOperator(
            user: live.user, token: token, csrf: csrf(for: "session:" + token),
            suspended: live.suspension?.holds(at: Date()) ?? false)
    }

    func csrf(for text: String) -> String {
        Data(HMAC<SHA256>.authenticationCode(for: Data(text.utf8), using: csrfKey)).hexString
    }

    /// A form's `csrf` field must be `expected`, and a browser's `Origin` (or `Sec-Fetch-Site`)
    /// must be this server's: either failing, nothing is done.
    func checkForm(_ request: Request, _ form: [String: String], expected: String) throws {
        guard let sent = form["csrf"], Self.equal(sent, expected) else { throw DeskRefusal.forged }
        if let site = request.headers[.secFetchSite], !["same-origin", "none"].contains(site) { throw DeskRefusal.forged }
        if let origin = request.headers[.origin] {
            guard let host = request.head.authority, origin == "http://\(host)" || origin == "https://\(host)" else {
                throw DeskRefusal.forged
            }
        }
    }

    static func equal(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// `Set-Cookie` for the desk: HttpOnly, SameSite=Strict, only under `/desk`, Secure when
    /// the request came over TLS (directly or through a proxy that says so).
    static func setCookie(_ name: String, _ value: String, maxAge: Int, _ request: Request) -> String {
        let secure = request.head.scheme == "https" || request.headers[.xForwardedProto] == "https"
        return "\(name)=\(value); Path=/desk; Max-Age=\(maxAge); HttpOnly; SameSite=Strict\(secure ? "; Secure" : "")"
    }

    static func randomHex() -> String {
        Data((0..<16).map { _ in UInt8.random(in: 0...255) }).hexString
    }
}
