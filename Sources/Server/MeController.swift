import EventStore
import Foundation
import Hummingbird
import Marketplace

/// The signed-in user's own commands: `PATCH /v1/me`, `POST /v1/me/blocks`,
/// `DELETE /v1/me/blocks/{userId}`.
struct MeController<Context: AuthenticatedRequestContext>: Sendable {
    let gateway: CommandGateway

    struct ProfileBody: Decodable {
        var displayName: String?
        var country: String?
        var defaultShareCents: Int?
    }

    struct BlockBody: Decodable {
        var userId: String?
    }

    func addRoutes(
        to router: Router<Context>, authentication: AuthenticationMiddleware<Context>, idempotency: IdempotencyMiddleware<Context>,
        limiter: WriteLimiter
    ) {
        let me = router.group("/v1/me").add(middleware: authentication).add(middleware: idempotency)
            .add(middleware: WriteLimitMiddleware(limiter: limiter, kind: .changes))
        me.patch(use: updateProfile)
        me.post("blocks", use: block)
        me.delete("blocks/:userID", use: unblock)
    }

    @Sendable func updateProfile(_ request: Request, context: Context) async throws -> PrivateProfile {
        let body = try await request.decodeBody(ProfileBody.self, context: context)
        return try await handle(
            .updateProfile(displayName: body.displayName, country: body.country, defaultShareCents: body.defaultShareCents),
            context)
    }

    @Sendable func block(_ request: Request, context: Context) async throws -> PrivateProfile {
        let body = try await request.decodeBody(BlockBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("userId", body.userId))
        try fields.throwIfAny()
        guard let other = body.userId.flatMap(UserID.init) else {
            throw Problem(DomainError.invalid([FieldError(field: "userId", code: "invalid_id", message: "a user id")]))
        }
        // Whether the other user exists is their stream's to say, not this one's.
        guard try await gateway.store.version(of: StreamID("user", other)) > 0 else {
            throw DomainError(.notFound, "user_not_found", "No user has the id \(other).")
        }
        return try await handle(.block(other), context)
    }

    @Sendable func unblock(_ request: Request, context: Context) async throws -> PrivateProfile {
        try await handle(.unblock(UserID(try context.parameters.requireUUID("userID"))), context)
    }

    /// A command on the signed-in user's own stream; answers the profile as it now stands:
    /// the same resource as `GET /v1/me`, read from the primary, where the command's views
    /// committed with its events.
    func handle(_ command: UserCommand, _ context: Context) async throws -> PrivateProfile {
        let me = try context.requireIdentity()
        let handled = try await gateway.handle(command, on: .user, id: me, actor: me)
        return try await PrivateProfile.read(
            me, from: gateway.store.pool, blocked: handled.state.blocked, position: handled.append?.lastPosition)
    }
}
