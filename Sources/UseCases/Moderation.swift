import Aggregates
import Foundation
import EventStore
import Marketplace
import Projections

/// What operators do to what others posted (SPEC §12.5), each act an event whose actor is
/// the operator, with the money it moves in the same append (`ItemCommands`).
public struct Moderation: Sendable {
    let commands: ItemCommands
    let operators: Operators

    public init(commands: ItemCommands) {
        self.commands = commands
        self.operators = Operators(commands.gateway.store.pool)
    }

    /// Takes an item down: out of the market, its pending bids rejected, its upcoming
    /// bookings cancelled as by its owner. 403 `not_operator` for anyone but an operator.
    public func takeDown(_ item: ItemID, reason: String, by actor: UserID, today: Day) async throws -> AppendResult? {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        return try await commands.handle(.takeDown(reason: reason, today: today), on: item, actor: actor).append
    }

    /// Hides a review (by the id `reviews_view` makes from its deal and side): out of every list
    /// and rating. 404 `review_not_found` for no such review.
    public func hideReview(_ review: UUID, reason: String, by actor: UserID) async throws -> AppendResult? {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        let rows = try await commands.gateway.store.pool.query(
            "SELECT item_id, bid_id, role FROM reviews_view WHERE review_id = \(review)")
        guard let row = rows.first, let role = ReviewerRole(rawValue: try row.decode("role", as: String.self)) else {
            throw DomainError.reviewNotFound
        }
        let key = ReviewKey(BidID(try row.decode("bid_id", as: UUID.self)), role)
        return try await commands.handle(
            .hideReview(key, reason: reason), on: ItemID(try row.decode("item_id", as: UUID.self)), actor: actor
        ).append
    }

    /// Hides a message from its conversation: 404 `message_not_found` for no such message.
    public func hideMessage(_ message: MessageID, reason: String, by actor: UserID) async throws -> AppendResult? {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        let rows = try await commands.gateway.store.pool.query(
            "SELECT item_id FROM messages_view WHERE message_id = \(message.rawValue)")
        guard let item = try rows.first?.decode("item_id", as: UUID.self) else { throw DomainError.messageNotFound }
        return try await commands.handle(.hideMessage(message, reason: reason), on: ItemID(item), actor: actor).append
    }
}
