import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// `users_view`: every registered user's public and private profile fields.
public struct UsersProjection: InlineProjection {
    public let name = "users"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        for event in events where Aggregate.user.owns(event.streamID) {
            switch try Aggregate.user.codec.decode(event) {
            case .registered(let registered):
                try session.query(
                    """
                    INSERT INTO users_view (user_id, handle, display_name, email, country, member_since, updated_at)
                    VALUES (\(registered.userID.rawValue), \(registered.handle), \(registered.displayName),
                            \(registered.email), \(registered.country), \(event.recordedAt), \(event.recordedAt))
                    ON CONFLICT (user_id) DO NOTHING
                    """, prepared: true)
            case .profileUpdated(let updated):
                try session.query(
                    """
                    UPDATE users_view
                    SET display_name = coalesce(\(updated.displayName), display_name),
                        country = coalesce(\(updated.country), country),
                        default_share_cents = coalesce(\(updated.defaultShareCents), default_share_cents),
                        updated_at = \(event.recordedAt)
                    WHERE user_id = \(userID(of: event))
                    """, prepared: true)
            case .photoChanged(let changed):
                try session.query(
                    """
                    UPDATE users_view SET photo = \(changed.digest), updated_at = \(event.recordedAt)
                    WHERE user_id = \(userID(of: event))
                    """, prepared: true)
            case .blocked, .unblocked, .cardCharged:
                break
            case .forgotten(let forgotten):
                // Ids, handle and money stay; nothing personal does (SPEC §11.3).
                try session.query(
                    """
                    UPDATE users_view
                    SET display_name = \(Redacted.name), email = \(Redacted.text), country = NULL, default_share_cents = NULL,
                        photo = NULL, forgotten_at = \(event.recordedAt), updated_at = \(event.recordedAt)
                    WHERE user_id = \(forgotten.userID.rawValue)
                    """, prepared: true)
                try session.query("DELETE FROM cards_view WHERE user_id = \(forgotten.userID.rawValue)", prepared: true)
            case .cardAdded(let card):
                try session.query(
                    """
                    INSERT INTO cards_view (card_id, user_id, network, last4, exp_month, exp_year, added_at)
                    VALUES (\(card.cardID.rawValue), \(userID(of: event)), \(card.network.rawValue), \(card.last4),
                            \(card.expMonth), \(card.expYear), \(event.recordedAt))
                    ON CONFLICT (card_id) DO NOTHING
                    """, prepared: true)
            case .cardExpiryUpdated(let updated):
                try session.query(
                    """
                    UPDATE cards_view SET exp_month = \(updated.expMonth), exp_year = \(updated.expYear)
                    WHERE card_id = \(updated.cardID.rawValue)
                    """, prepared: true)
            case .cardRemoved(let removed):
                try session.query("DELETE FROM cards_view WHERE card_id = \(removed.cardID.rawValue)", prepared: true)
            case .fundsDeposited(let deposit):
                try addToBalance(&session, deposit.amountCents, event)
            case .balanceCredited(let credit):
                try addToBalance(&session, credit.amountCents, event)
            case .balanceDebited(let debit):
                try addToBalance(&session, -debit.amountCents, event)
            }
        }
    }

    func addToBalance(_ session: inout PostgresSession, _ cents: Int, _ event: ProjectedEvent) throws {
        try session.query(
            """
            UPDATE users_view SET balance_cents = balance_cents + \(cents), updated_at = \(event.recordedAt)
            WHERE user_id = \(userID(of: event))
            """, prepared: true)
    }

    func userID(of event: ProjectedEvent) -> UUID? {
        UUID(uuidString: String(event.streamID.rawValue.dropFirst("user-".count)))
    }
}
