import Foundation
import Hummingbird
import Marketplace
import UseCases

/// `POST /v1/users`, `POST /v1/sessions`, `DELETE /v1/sessions/current`, `DELETE /v1/me`.
struct AccountsController: Sendable {
    let accounts: Accounts
    let limiter: WriteLimiter
    /// The server's day: a forgotten owner's bookings still to come are those after it.
    let today: @Sendable () -> Day

    struct RegisterBody: Decodable {
        var handle: String?
        var displayName: String?
        var email: String?
        var password: String?
        var country: String?
    }

    struct UserCreated: ResponseEncodable {
        var id: UserID
        var handle: String
        var displayName: String
        var email: String
        var country: String?
        var position: Int64
    }

    struct LoginBody: Decodable {
        var handle: String?
        var password: String?
    }

    @Sendable func register(_ request: Request, context: AppRequestContext) async throws -> EditedResponse<UserCreated> {
        // Before the body is read: a refused registration costs the server nothing more.
        try limiter.takeRegistration(from: context.clientAddress ?? "unknown")
        let body = try await request.decodeBody(RegisterBody.self, context: context)
        var fields = FieldCheck()
        fields.require(
            ("handle", body.handle), ("displayName", body.displayName), ("email", body.email), ("password", body.password))
        fields.alongside(
            UserDecider.givenRegistrationProblems(
                handle: body.handle, displayName: body.displayName, email: body.email, password: body.password,
                country: body.country))
        let (handle, displayName, email, password) = try fields.checked(body.handle, body.displayName, body.email, body.password)
        let registered = try await accounts.register(
            handle: handle, displayName: displayName, email: email, password: password, country: body.country)
        let user = registered.user
        return EditedResponse(
            status: .created,
            response: UserCreated(
                id: user.userID, handle: user.handle, displayName: user.displayName, email: user.email,
                country: user.country, position: registered.position))
    }

    @Sendable func login(_ request: Request, context: AppRequestContext) async throws -> EditedResponse<Session> {
        let body = try await request.decodeBody(LoginBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("handle", body.handle), ("password", body.password))
        let (handle, password) = try fields.checked(body.handle, body.password)
        let session = try await accounts.login(handle: handle, password: password, address: context.clientAddress ?? "unknown")
        return EditedResponse(status: .created, response: session)
    }

    @Sendable func logout(_ request: Request, context: UserContext) async throws -> HTTPResponse.Status {
        guard try await accounts.logout(token: context.token) else {
            throw Problem(.unauthorized, code: "unauthenticated", detail: "A valid bearer token is required.")
        }
        return .noContent
    }

    struct CloseBody: Decodable {
        var password: String?
    }

    /// Closes the account and forgets its user (SPEC §11.3), once the password is confirmed.
    @Sendable func close(_ request: Request, context: UserContext) async throws -> HTTPResponse.Status {
        let body = try await request.decodeBody(CloseBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("password", body.password))
        let password = try fields.checked(body.password)
        do {
            try await accounts.confirmPassword(of: context.user, password: password, address: context.clientAddress ?? "unknown")
        } catch let error as DomainError where error.code == DomainError.invalidCredentials.code {
            // Not 401: the session is good, and a client takes a 401 for a dead one and signs out.
            throw DomainError(
                .forbidden, "wrong_password", "The password is not this account's.",
                fields: [FieldError(field: "password", code: "wrong_password", message: "not this account's password")])
        }
        do {
            _ = try await accounts.forget(context.user, today: today())
        } catch let error as DomainError where error == .userNotFound {
            // The same request sent twice at once: the other one closed it, and this session with it.
            throw Problem(.unauthorized, code: "unauthenticated", detail: "This account was closed.")
        }
        return .noContent
    }
}
