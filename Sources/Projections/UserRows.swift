import Foundation
import Marketplace
import Postgres

/// A row of `users_view`: a user's public and private profile, balance and counts. `table`
/// is its one declaration.
struct UserRow: Sendable, Equatable {
    var id = UserID.none
    var handle = ""
    var displayName = ""
    var email = ""
    var country: String?
    var defaultShareCents: Int?
    /// Counted by `ItemsProjection`, from the items' events.
    var completedDeals = 0
    var memberSince = Date(timeIntervalSince1970: 0)
    var updatedAt = Date(timeIntervalSince1970: 0)
    var balanceCents = 0
    var forgottenAt: Date?
    var reviewCount = 0
    var reviewStars = 0
    var photo: String?
    var heldCents = 0
    var emailVerified = false

    static let table = ViewTable<UserRow>(
        "users_view", blank: UserRow(),
        [
            ViewColumn("user_id", "uuid", \.id),
            ViewColumn("handle", "text", \.handle),
            ViewColumn("display_name", "text", \.displayName),
            ViewColumn("email", "text", \.email),
            ViewColumn("country", "text", \.country),
            ViewColumn("default_share_cents", "integer", \.defaultShareCents),
            ViewColumn("completed_deals", "integer", \.completedDeals),
            ViewColumn("member_since", "timestamp with time zone", \.memberSince),
            ViewColumn("updated_at", "timestamp with time zone", \.updatedAt),
            ViewColumn("balance_cents", "bigint", \.balanceCents),
            ViewColumn("forgotten_at", "timestamp with time zone", \.forgottenAt),
            ViewColumn("review_count", "integer", \.reviewCount),
            ViewColumn("review_stars", "integer", \.reviewStars),
            ViewColumn("photo", "text", \.photo),
            ViewColumn("held_cents", "bigint", \.heldCents),
            ViewColumn("email_verified", "boolean", \.emailVerified),
        ])

    /// A user as their registration makes them: what the appends insert and a rebuild holds.
    init(registered: UserRegistered, at recordedAt: Date) {
        (id, handle, displayName, email, country) =
            (registered.userID, registered.handle, registered.displayName, registered.email, registered.country)
        (memberSince, updatedAt) = (recordedAt, recordedAt)
    }

    init() {}
}

/// A row of `cards_view`: a card on file, as its last four digits and expiry show it.
struct CardRow: Sendable, Equatable {
    var id = CardID.none
    var user = UserID.none
    var network = ""
    var last4 = ""
    var expMonth = 0
    var expYear = 0
    var addedAt = Date(timeIntervalSince1970: 0)

    static let table = ViewTable<CardRow>(
        "cards_view", blank: CardRow(),
        [
            ViewColumn("card_id", "uuid", \.id),
            ViewColumn("user_id", "uuid", \.user),
            ViewColumn("network", "text", \.network),
            ViewColumn("last4", "text", \.last4),
            ViewColumn("exp_month", "integer", \.expMonth),
            ViewColumn("exp_year", "integer", \.expYear),
            ViewColumn("added_at", "timestamp with time zone", \.addedAt),
        ])

    init(_ card: CardOnFile, user: UserID, at recordedAt: Date) {
        (id, self.user, network, last4) = (card.cardID, user, card.network.rawValue, card.last4)
        (expMonth, expYear, addedAt) = (card.expMonth, card.expYear, recordedAt)
    }

    init() {}
}
