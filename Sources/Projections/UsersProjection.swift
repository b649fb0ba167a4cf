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
        var plan = WritePlan()
        for event in events where Aggregate.user.owns(event.streamID) {
            switch try Aggregate.user.codec.decode(event) {
            case .registered(let registered):
                if changes.touches(registered.userID.rawValue), let folded = changes.take() { plan.barrier([folded]) }
                plan.add(
                    Self.insertUsers, UserRow.table.values(UserRow(registered: registered, at: event.recordedAt)),
                    writes: [WritePlan.Row(.user, registered.userID.rawValue)])
            case .profileUpdated(let updated):
                changes.change(userID(of: event), at: event.recordedAt) { change in
                    change.displayName = updated.displayName ?? change.displayName
                    change.country = updated.country ?? change.country
                    change.defaultShareCents = updated.defaultShareCents ?? change.defaultShareCents
                }
            case .photoChanged(let changed):
                changes.change(userID(of: event), at: event.recordedAt) { $0.photo = .some(changed.digest) }
            case .blocked, .unblocked, .cardCharged, .passwordChanged:
                break
            case .emailVerified:
                changes.change(userID(of: event), at: event.recordedAt) { $0.emailVerified = true }
            case .forgotten(let forgotten):
                // Ids, handle and money stay; nothing personal does (SPEC §11.3).
                plan.barrier(
                    [changes.take()].compactMap { $0 } + [
                        """
                        UPDATE users_view
                        SET display_name = \(Redacted.name), email = \(Redacted.text), country = NULL, default_share_cents = NULL,
                            photo = NULL, forgotten_at = \(event.recordedAt), updated_at = \(event.recordedAt)
                        WHERE user_id = \(forgotten.userID.rawValue)
                        """,
                        "DELETE FROM cards_view WHERE user_id = \(forgotten.userID.rawValue)",
                    ])
            case .cardAdded(let card):
                // A card's stream is its user's, so a card always has one.
                guard let user = userID(of: event) else { break }
                plan.add(
                    Self.insertCards, CardRow.table.values(CardRow(card, user: user, at: event.recordedAt)),
                    writes: [WritePlan.Row(.card, card.cardID.rawValue)])
            case .cardExpiryUpdated(let updated):
                plan.add(
                    [
                        """
                        UPDATE cards_view SET exp_month = \(updated.expMonth), exp_year = \(updated.expYear)
                        WHERE card_id = \(updated.cardID.rawValue)
                        """
                    ], writes: [WritePlan.Row(.card, updated.cardID.rawValue)])
            case .cardRemoved(let removed):
                plan.add(
                    ["DELETE FROM cards_view WHERE card_id = \(removed.cardID.rawValue)"],
                    writes: [WritePlan.Row(.card, removed.cardID.rawValue)])
            case let money:
                // Deposits, payments, credits, holds: what each does to a balance is stated once.
                let moved = UserDecider.balanceChange(of: money)
                guard moved != (0, 0) else { break }
                changes.change(userID(of: event), at: event.recordedAt) {
                    $0.balanceCents += moved.balanceCents
                    $0.heldCents += moved.heldCents
                }
            }
        }
        try plan.run(&session)
        if let folded = changes.take() { try session.query(folded, prepared: true) }
    }

    /// A build from the first event holds each user and card as its row stands, changed in
    /// memory as the statements above change it, and writes them once by `COPY` at its end:
    /// registrations, cards, balances and counts were each an insert or an update of a row
    /// (1.7 s of the writer's 8.4 s in a 1.0M-event build, `pg_stat_statements`).
    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Memory()) { known in
            for event in events where Aggregate.user.owns(event.streamID) {
                try known.fold(event, user: userID(of: event))
            }
        }
    }

    /// The users and cards as the log left them. Each user's completed deals and ratings are
    /// counted by the items projection, from the items' events (`ItemsProjection.Memory`).
    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        let counts = memory.with(ItemsProjection().name, initial: ItemsProjection.Memory()) { items in
            defer { items.userCounts = [:] }
            return items.userCounts
        }
        try memory.with(name, initial: Memory()) { known in
            // In the order they were registered and added, as the appends insert them.
            let users = UserRow.table.copy(
                known.users.values.sorted(by: { $0.registered < $1.registered }).lazy.map { held in
                    var row = held.row
                    let counted = counts[row.id] ?? ItemsProjection.UserCounts()
                    (row.completedDeals, row.reviewCount, row.reviewStars) = (counted.completedDeals, counted.reviewCount, counted.reviewStars)
                    return row
                })
            let cards = CardRow.table.copy(known.cards.values.sorted(by: { $0.added < $1.added }).lazy.map(\.row))
            known = Memory()
            try session.copy(users)
            try session.copy(cards)
        }
    }

    /// What a build holds until its end: each user's and each card's row.
    struct Memory: Sendable {
        var users: [UUID: HeldUser] = [:]
        var cards: [UUID: HeldCard] = [:]
        /// Each user's cards ever added, for their forgetting.
        var cardsByUser: [UUID: [UUID]] = [:]

        /// `event` made to the rows, as `apply`'s statements make it. `user`: the stream's.
        mutating func fold(_ event: ProjectedEvent, user: UUID?) throws {
            switch try Aggregate.user.codec.decode(event) {
            case .registered(let registered):
                // The first registration of an id, as the insert's `ON CONFLICT DO NOTHING`.
                guard users[registered.userID.rawValue] == nil else { return }
                users[registered.userID.rawValue] = HeldUser(row: UserRow(registered: registered, at: event.recordedAt), registered: event.position)
            case .profileUpdated(let updated):
                change(user, event) { held in
                    held.displayName = updated.displayName ?? held.displayName
                    held.country = updated.country ?? held.country
                    held.defaultShareCents = updated.defaultShareCents ?? held.defaultShareCents
                }
            case .photoChanged(let changed):
                change(user, event) { $0.photo = changed.digest }
            case .blocked, .unblocked, .cardCharged, .passwordChanged:
                break
            case .emailVerified:
                change(user, event) { $0.emailVerified = true }
            case .forgotten(let forgotten):
                let id = forgotten.userID.rawValue
                change(id, event) { held in
                    held.displayName = Redacted.name
                    held.email = Redacted.text
                    held.country = nil
                    held.defaultShareCents = nil
                    held.photo = nil
                    held.forgottenAt = event.recordedAt
                }
                for card in cardsByUser.removeValue(forKey: id) ?? [] where cards[card]?.row.user == id { cards[card] = nil }
            case .cardAdded(let card):
                guard let user, cards[card.cardID.rawValue] == nil else { return }
                cards[card.cardID.rawValue] = HeldCard(row: CardRow(card, user: user, at: event.recordedAt), added: event.position)
                cardsByUser[user, default: []].append(card.cardID.rawValue)
            case .cardExpiryUpdated(let updated):
                cards[updated.cardID.rawValue]?.row.expMonth = updated.expMonth
                cards[updated.cardID.rawValue]?.row.expYear = updated.expYear
            case .cardRemoved(let removed):
                cards[removed.cardID.rawValue] = nil
            case let money:
                let moved = UserDecider.balanceChange(of: money)
                guard moved != (0, 0) else { return }
                change(user, event) {
                    $0.balanceCents += moved.balanceCents
                    $0.heldCents += moved.heldCents
                }
            }
        }

        /// `body` made to the user's row, if the log registered them: an update of the appends
        /// finds no row otherwise. Every change of a row sets its time.
        private mutating func change(_ user: UUID?, _ event: ProjectedEvent, _ body: (inout UserRow) -> Void) {
            guard let user, users[user] != nil else { return }
            body(&users[user]!.row)
            users[user]!.row.updatedAt = event.recordedAt
        }
    }

    /// A user of a build as their row stands, and where the log registered them: the order
    /// `finishRebuild` copies the users in.
    struct HeldUser: Sendable {
        var row: UserRow
        let registered: Int64
    }

    /// A card of a build as its row stands, and where the log added it.
    struct HeldCard: Sendable {
        var row: CardRow
        let added: Int64
    }

    /// New users (`UserRow(registered:)`); a registration of an id already there is the first's.
    static let insertUsers = UserRow.table.insert("insert users") { "\($0)\nON CONFLICT (user_id) DO NOTHING" }

    static let insertCards = CardRow.table.insert("insert cards") { "\($0)\nON CONFLICT (card_id) DO NOTHING" }

    func userID(of event: ProjectedEvent) -> UUID? {
        Aggregate.user.id(of: event.streamID)?.rawValue
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
        var heldCents = 0
        var emailVerified = false
        var at = Date(timeIntervalSince1970: 0)
    }

    private var changes: [UUID: Change] = [:]

    func touches(_ user: UUID) -> Bool { changes[user] != nil }

    mutating func change(_ user: UUID?, at time: Date, _ body: (inout Change) -> Void) {
        guard let user else { return }
        body(&changes[user, default: Change()])
        changes[user]?.at = time
    }

    /// The folded changes as one statement, and none left; nil when there are none. The rows
    /// are found by key (`= ANY`), so that a batch of a few users is never a scan of them all.
    mutating func take() -> PostgresQuery? {
        guard !changes.isEmpty else { return nil }
        var users = PostgresBatchColumn(), names = PostgresBatchColumn(), countries = PostgresBatchColumn(), shares = PostgresBatchColumn()
        var photoSet = PostgresBatchColumn(), photos = PostgresBatchColumn(), balances = PostgresBatchColumn(), times = PostgresBatchColumn()
        var holds = PostgresBatchColumn(), verified = PostgresBatchColumn()
        for (user, change) in changes {
            users.append(user)
            names.append(change.displayName)
            countries.append(change.country)
            shares.append(change.defaultShareCents)
            photoSet.append(change.photo != nil)
            photos.append(change.photo ?? nil)
            balances.append(change.balanceCents)
            holds.append(change.heldCents)
            verified.append(change.emailVerified)
            times.append(change.at)
        }
        defer { changes = [:] }
        return """
            UPDATE users_view u
            SET display_name = coalesce(c.display_name, u.display_name), country = coalesce(c.country, u.country),
                default_share_cents = coalesce(c.share, u.default_share_cents),
                photo = CASE WHEN c.photo_set THEN c.photo ELSE u.photo END,
                balance_cents = u.balance_cents + c.balance, held_cents = u.held_cents + c.held,
                email_verified = u.email_verified OR c.verified, updated_at = c.at
            FROM unnest(\(users)::uuid[], \(names)::text[], \(countries)::text[], \(shares)::int4[], \(photoSet)::bool[],
                        \(photos)::text[], \(balances)::int8[], \(times)::timestamptz[], \(holds)::int8[], \(verified)::bool[])
                 AS c(user_id, display_name, country, share, photo_set, photo, balance, at, held, verified)
            WHERE u.user_id = c.user_id AND u.user_id = ANY (\(users)::uuid[])
            """
    }
}
