import EventStore
import Foundation
import Marketplace
import Postgres

/// `users_view`: every registered user's public and private profile fields.
public struct UsersProjection: InlineProjection {
    public let name = "users"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        for event in events where event.streamID.rawValue.hasPrefix("user-") {
            switch try DomainCodec.user.codec.decode(type: event.type, schemaVersion: event.schemaVersion, data: event.data) {
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
            case .blocked, .unblocked:
                break
            }
        }
    }

    func userID(of event: ProjectedEvent) -> UUID? {
        UUID(uuidString: String(event.streamID.rawValue.dropFirst("user-".count)))
    }
}
