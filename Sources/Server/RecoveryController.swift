import Aggregates
import Crypto
import Foundation
import Hummingbird
import Marketplace
import Synchronization
import UseCases

/// Password reset and change, e-mail verification (SPEC §12.4). What they mail goes through
/// the outbox.
struct RecoveryController: Sendable {
    let accounts: Accounts
    let mail: MailSettings
    let resetAddresses = ResetAddresses()

    struct ResetBody: Decodable {
        var email: String?
    }

    struct ConfirmResetBody: Decodable {
        var token: String?
        var password: String?
    }

    struct ChangeBody: Decodable {
        var currentPassword: String?
        var newPassword: String?
    }

    struct CodeBody: Decodable {
        var code: String?
    }

    /// Always 202, whether an account has the address or not.
    @Sendable func requestReset(_ request: Request, context: AppRequestContext) async throws -> HTTPResponse.Status {
        let body = try await request.decodeBody(ResetBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("email", body.email))
        fields.longest(body.email, 254, "email")
        if let email = body.email, email.utf8.count <= 254, !UserDecider.isValidEmail(email) {
            fields.problems.append(FieldError(field: "email", code: "invalid_email", message: "not a well-formed e-mail address"))
        }
        let email = try fields.checked(body.email)
        try resetAddresses.admit(email, from: context.clientAddress ?? "unknown")
        try await accounts.requestPasswordReset(email: email, mail: mail)
        return .accepted
    }

    @Sendable func confirmReset(_ request: Request, context: AppRequestContext) async throws -> HTTPResponse.Status {
        let body = try await request.decodeBody(ConfirmResetBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("token", body.token), ("password", body.password))
        fields.longest(body.token, 200, "token")
        let (token, password) = try fields.checked(body.token, body.password)
        try await accounts.confirmPasswordReset(token: token, password: password)
        return .noContent
    }

    @Sendable func changePassword(_ request: Request, context: UserContext) async throws -> HTTPResponse.Status {
        let body = try await request.decodeBody(ChangeBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("currentPassword", body.currentPassword), ("newPassword", body.newPassword))
        fields.longest(body.currentPassword, 128, "currentPassword")
        let (currentPassword, newPassword) = try fields.checked(body.currentPassword, body.newPassword)
        try await accounts.changePassword(
            of: context.user, current: currentPassword, new: newPassword, keeping: context.token,
            address: context.clientAddress ?? "unknown")
        return .noContent
    }

    @Sendable func requestVerification(_ request: Request, context: UserContext) async throws -> HTTPResponse.Status {
        try await accounts.requestEmailVerification(for: context.user, mail: mail)
        return .accepted
    }

    @Sendable func confirmVerification(_ request: Request, context: UserContext) async throws -> Verified {
        let body = try await request.decodeBody(CodeBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("code", body.code))
        fields.longest(body.code, 20, "code")
        let code = try fields.checked(body.code)
        try await accounts.confirmEmailVerification(for: context.user, code: code)
        return Verified(emailVerified: true)
    }

    struct Verified: ResponseEncodable {
        var emailVerified: Bool
    }
}

/// The addresses each client asked resets for in the last hour: the same one again and again
/// is answered (202, and the account's own limit decides what is mailed), a 21st other one is
/// 429: someone trying addresses to find accounts. In each server's memory, as write limits.
final class ResetAddresses: Sendable {
    static let perClientPerHour = 20
    private let seen = Mutex([String: (since: ContinuousClock.Instant, addresses: Set<Data>)]())

    func admit(_ email: String, from client: String) throws {
        let address = Data(SHA256.hash(data: Data(email.lowercased().utf8)))
        let now = ContinuousClock.now
        let refused: Bool = seen.withLock { seen in
            if seen.count > 100_000 { seen = seen.filter { now - $0.value.since < .seconds(3600) } }
            var entry: (since: ContinuousClock.Instant, addresses: Set<Data>) =
                seen[client].flatMap { now - $0.since < .seconds(3600) ? $0 : nil } ?? (now, [])
            guard entry.addresses.contains(address) || entry.addresses.count < Self.perClientPerHour else { return true }
            entry.addresses.insert(address)
            seen[client] = entry
            return false
        }
        if refused {
            throw Problem(
                .tooManyRequests, code: "too_many_addresses",
                detail: "Resets for at most \(Self.perClientPerHour) addresses an hour from one client.",
                headers: [.retryAfter: "3600"])
        }
    }
}

/// `REQUIRE_VERIFIED_EMAIL=on`: posting and bidding need a verified address (403
/// `email_unverified`), as the user's own stream says.
struct VerifiedEmailMiddleware: RouterMiddleware {
    let gateway: CommandGateway

    func handle(_ request: Request, context: UserContext, next: (Request, UserContext) async throws -> Response) async throws
        -> Response
    {
        if request.method == .post, IdempotentRequest.current?.recorded == nil {
            let (state, _) = try await gateway.load(.user(context.user), .user)
            guard state.emailVerified else {
                throw DomainError(
                    .forbidden, "email_unverified",
                    "Confirm your e-mail address first: POST /v1/me/email-verification mails you a code.")
            }
        }
        return try await next(request, context)
    }
}
