import Foundation
import Aggregates
import EventStore
import Marketplace
import Projections

/// The signed-in user's commands on their own stream: the profile's fields and blocks.
public struct Profiles: Sendable {
    let gateway: CommandGateway

    public init(gateway: CommandGateway) { self.gateway = gateway }

    /// Whom the user blocked, and the append, after the command.
    public func handle(_ command: UserCommand, for me: UserID) async throws -> (blocked: Set<UserID>, append: AppendResult?) {
        let handled = try await gateway.handle(command, on: .user, id: me, actor: me)
        return (handled.state.blocked, handled.append)
    }

    public func block(_ other: UserID, by me: UserID) async throws -> (blocked: Set<UserID>, append: AppendResult?) {
        // Whether the other user exists is their stream's to say, not this one's.
        guard try await gateway.store.version(of: .user(other)) > 0 else {
            throw DomainError.userNotFound.saying("No user has the id \(other).")
        }
        return try await handle(.block(other), for: me)
    }

    /// Whom the user blocked: the user's own stream's to say.
    public func blocked(by me: UserID) async throws -> Set<UserID> {
        try await gateway.load(.user(me), .user).0.blocked
    }
}

extension Profiles {
    /// Every movement of money on the user's stream, oldest first (their export's statement).
    public func balanceHistory(of me: UserID) async throws -> [BalanceEntry] {
        try await BalanceHistory.entries(of: me, in: gateway.store, before: nil, limit: .max).entries.reversed()
    }
}
