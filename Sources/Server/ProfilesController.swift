import EventStore
import Hummingbird
import Marketplace
import Projections
import UseCases

/// The signed-in user's profile and commands on it: `GET/PATCH /v1/me`, `POST /v1/me/blocks`,
/// `DELETE /v1/me/blocks/{userId}`; and `GET /v1/users/{id}`, the public profile.
struct ProfilesController: Sendable {
    let profiles: Profiles
    /// Answers after a command: from the primary, where the command's views committed with its events.
    let primary: ProfilesView
    /// Reads that may lag a moment behind (a replica).
    let reads: ProfilesView

    struct ProfileBody: Decodable {
        var displayName: String?
        var country: String?
        var defaultShareCents: Int?
    }

    struct BlockBody: Decodable {
        var userId: String?
    }

    @Sendable func me(_ request: Request, context: UserContext) async throws -> PrivateProfile {
        try await reads.privateProfile(context.user, blocked: try await profiles.blocked(by: context.user))
    }

    @Sendable func user(_ request: Request, context: UserContext) async throws -> PublicProfile {
        try await reads.publicProfile(UserID(try context.parameters.requireUUID("userID")))
    }

    @Sendable func updateProfile(_ request: Request, context: UserContext) async throws -> PrivateProfile {
        let body = try await request.decodeBody(ProfileBody.self, context: context)
        let command = UserCommand.updateProfile(
            displayName: body.displayName, country: body.country, defaultShareCents: body.defaultShareCents)
        return try await answer(try await profiles.handle(command, for: context.user), context)
    }

    @Sendable func block(_ request: Request, context: UserContext) async throws -> PrivateProfile {
        let body = try await request.decodeBody(BlockBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("userId", body.userId))
        try fields.throwIfAny()
        guard let other = body.userId.flatMap(UserID.init) else {
            throw DomainError.invalid([FieldError(field: "userId", code: "invalid_id", message: "a user id")])
        }
        return try await answer(try await profiles.block(other, by: context.user), context)
    }

    @Sendable func unblock(_ request: Request, context: UserContext) async throws -> PrivateProfile {
        let other = UserID(try context.parameters.requireUUID("userID"))
        return try await answer(try await profiles.handle(.unblock(other), for: context.user), context)
    }

    /// The profile as the command left it: the same resource as `GET /v1/me`.
    func answer(_ handled: (blocked: Set<UserID>, append: AppendResult?), _ context: UserContext) async throws -> PrivateProfile {
        try await primary.privateProfile(context.user, blocked: handled.blocked, position: handled.append?.lastPosition)
    }
}
