import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// `users_view`: every registered user's public and private profile fields.
///
/// A batch's changes to a user's profile, photo and balance are folded into one change a user
/// and written at its end, one statement for them all: no other projection reads the views
/// before this one has applied the whole batch, so only this projection's own statements
/// could tell, and a registration or a forgetting writes what was folded first.
public struct UsersProjection: InlineProjection {
    public let name = "users"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        var changes = ProfileChanges()
        for event in events where Aggregate.user.owns(event.streamID) {
            switch try Aggregate.user.codec.decode(event) {
            case .registered(let registered):
                if changes.touches(registered.userID.rawValue) { try changes.write(&session) }
                try session.query(
                    """
                    INSERT INTO users_view (user_id, handle, display_name, email, country, member_since, updated_at)
                    VALUES (\(registered.userID.rawValue), \(registered.handle), \(registered.displayName),
                            \(registered.email), \(registered.country), \(event.recordedAt), \(event.recordedAt))
                    ON CONFLICT (user_id) DO NOTHING
                    """, prepared: true)
            case .profileUpdated(let updated):
                changes.change(userID(of: event), at: event.recordedAt) { change in
                    change.displayName = updated.displayName ?? change.displayName
                    change.country = updated.country ?? change.country
                    change.defaultShareCents = updated.defaultShareCents ?? change.defaultShareCents
                }
            case .photoChanged(let changed):
                changes.change(userID(of: event), at: event.recordedAt) { $0.photo = .some(changed.digest) }
            case .blocked, .unblocked, .cardCharged:
                break
            case .forgotten(let forgotten):
                try changes.write(&session)
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
                changes.change(userID(of: event), at: event.recordedAt) { $0.balanceCents += deposit.amountCents }
            case .balanceCredited(let credit):
                changes.change(userID(of: event), at: event.recordedAt) { $0.balanceCents += credit.amountCents }
            case .balanceDebited(let debit):
                changes.change(userID(of: event), at: event.recordedAt) { $0.balanceCents -= debit.amountCents }
            }
        }
        try changes.write(&session)
    }

    func userID(of event: ProjectedEvent) -> UUID? {
        UUID(uuidString: String(event.streamID.rawValue.dropFirst("user-".count)))
    }
}

/// What a batch changed of each user's row, as one change a user: the last value given of
/// each field, the balance's changes summed, the time of the last change.
private struct ProfileChanges {
    struct Change {
        var displayName: String?
        var country: String?
        var defaultShareCents: Int?
        /// `.some(nil)`: the photo was taken away.
        var photo: String??
        var balanceCents = 0
        var at = Date(timeIntervalSince1970: 0)
    }

    private var changes: [UUID: Change] = [:]

    func touches(_ user: UUID) -> Bool { changes[user] != nil }

    mutating func change(_ user: UUID?, at time: Date, _ body: (inout Change) -> Void) {
        guard let user else { return }
        body(&changes[user, default: Change()])
        changes[user]?.at = time
    }

    /// One statement; the rows found by key (`= ANY`), so that a batch of a few users is
    /// never a scan of them all.
    mutating func write(_ session: inout PostgresSession) throws {
        guard !changes.isEmpty else { return }
        var users = PostgresBatchColumn(), names = PostgresBatchColumn(), countries = PostgresBatchColumn(), shares = PostgresBatchColumn()
        var photoSet = PostgresBatchColumn(), photos = PostgresBatchColumn(), balances = PostgresBatchColumn(), times = PostgresBatchColumn()
        for (user, change) in changes {
            users.append(user)
            names.append(change.displayName)
            countries.append(change.country)
            shares.append(change.defaultShareCents)
            photoSet.append(change.photo != nil)
            photos.append(change.photo ?? nil)
            balances.append(change.balanceCents)
            times.append(change.at)
        }
        try session.query(
            """
            UPDATE users_view u
            SET display_name = coalesce(c.display_name, u.display_name), country = coalesce(c.country, u.country),
                default_share_cents = coalesce(c.share, u.default_share_cents),
                photo = CASE WHEN c.photo_set THEN c.photo ELSE u.photo END,
                balance_cents = u.balance_cents + c.balance, updated_at = c.at
            FROM unnest(\(users)::uuid[], \(names)::text[], \(countries)::text[], \(shares)::int4[], \(photoSet)::bool[],
                        \(photos)::text[], \(balances)::int8[], \(times)::timestamptz[])
                 AS c(user_id, display_name, country, share, photo_set, photo, balance, at)
            WHERE u.user_id = c.user_id AND u.user_id = ANY (\(users)::uuid[])
            """, prepared: true)
        changes = [:]
    }
}
