import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres
import UUIDs

/// `users_view` and `cards_view`: every registered user's public and private profile, and
/// their cards on file.
///
/// Stated once, as a fold over typed rows (`Rows.fold`), as Marten's projections are: an
/// append reads the rows its batch touches by key (one statement per table), folds the
/// batch into them, and writes back the rows it changed, one statement per table; a build
/// from the first event holds every row in memory, folds, and copies them at its end.
///
/// A row written back holds what the fold read (a balance, not a change to it), so the read
/// must be current: it runs after `append_batch` took the log head's lock, in READ COMMITTED,
/// and every writer of these views appends (or, as a swap, holds that lock). A writer that
/// did neither would have its change overwritten.
public struct UsersProjection: ReadingProjection {
    public let name = "users"
    public init() {}

    /// The batch's users (their streams', a registration's, a forgetting's) and cards by key,
    /// and every card of a user it forgets.
    public func reads(_ events: [ProjectedEvent]) -> [PostgresQuery] {
        var users = Set<UserID>(), cards = Set<CardID>(), forgotten = Set<UserID>()
        for event in events where Aggregate.user.owns(event.streamID) {
            if let user = userID(of: event) { users.insert(user) }
            switch try? Aggregate.user.codec.decode(event) {
            case .registered(let registered): users.insert(registered.userID)
            case .forgotten(let gone):
                users.insert(gone.userID)
                forgotten.insert(gone.userID)
            case .cardAdded(let card): cards.insert(card.cardID)
            case .cardExpiryUpdated(let updated): cards.insert(updated.cardID)
            case .cardRemoved(let removed): cards.insert(removed.cardID)
            default: break
            }
        }
        guard !users.isEmpty || !cards.isEmpty else { return [] }
        let usersRead = UserRow.table.rows(where: "user_id", in: users)
        // Most batches add, change and forget no card: no read of them.
        guard !cards.isEmpty || !forgotten.isEmpty else { return [usersRead] }
        return [
            usersRead,
            """
            SELECT \(unsafeRaw: CardRow.table.selectList()) FROM cards_view
            WHERE card_id = ANY (\(cards.map(\.description))::uuid[]) OR user_id = ANY (\(forgotten.map(\.description))::uuid[])
            """,
        ]
    }

    /// The rows `reads` found, the batch folded into them, and those it changed written back:
    /// the users and cards it made or changed, the cards it took away deleted. (Users' deals
    /// and ratings are the items projection's, written after this one's: as read.)
    public func apply(_ events: [ProjectedEvent], read: [PostgresRows], _ session: inout PostgresSession) throws {
        guard let usersRead = read.first else { return }
        let users = try usersRead.map(UserRow.table.decode)
        let cards = try read.dropFirst().first.map { try $0.map(CardRow.table.decode) } ?? []
        var rows = Rows()
        for user in users { rows.users[user.id] = HeldUser(row: user, registered: 0) }
        for card in cards {
            rows.cards[card.id] = HeldCard(row: card, added: 0)
            rows.cardsByUser[card.user, default: []].append(card.id)
        }
        for event in events where Aggregate.user.owns(event.streamID) {
            try rows.fold(event, user: userID(of: event))
        }
        try UserRow.table.writeBack(
            rows.users.values.lazy.map(\.row), before: Dictionary(uniqueKeysWithValues: users.map { ($0.id, $0) }), key: \.id,
            keyColumns: "user_id", insert: Self.insertUsers, &session)
        let removed = cards.lazy.map(\.id).filter { rows.cards[$0] == nil }
        if !removed.isEmpty {
            try session.query("DELETE FROM cards_view WHERE card_id = ANY (\(removed.map(\.description))::uuid[])", prepared: true)
        }
        try CardRow.table.writeBack(
            rows.cards.values.lazy.map(\.row), before: Dictionary(uniqueKeysWithValues: cards.map { ($0.id, $0) }), key: \.id,
            keyColumns: "card_id", insert: Self.insertCards, &session)
    }

    /// A build from the first event holds each user and card as its row stands, folded as an
    /// append folds it, and writes them once by `COPY` at its end:
    /// registrations, cards, balances and counts were each an insert or an update of a row
    /// (1.7 s of the writer's 8.4 s in a 1.0M-event build, `pg_stat_statements`).
    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Rows()) { known in
            for event in events where Aggregate.user.owns(event.streamID) {
                try known.fold(event, user: userID(of: event))
            }
        }
    }

    /// The users and cards as the log left them. Each user's completed deals and ratings are
    /// counted by the items projection, from the items' events (`ItemsProjection.Rows`).
    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        let counts = memory.with(ItemsProjection().name, initial: ItemsProjection.Rows()) { items in
            defer { items.userCounts = [:] }
            return items.userCounts
        }
        try memory.with(name, initial: Rows()) { known in
            // In the order they were registered and added, as the appends insert them.
            let users = UserRow.table.copy(
                known.users.values.sorted(by: { $0.registered < $1.registered }).lazy.map { held in
                    var row = held.row
                    let counted = counts[row.id] ?? ItemsProjection.UserCounts()
                    (row.completedDeals, row.reviewCount, row.reviewStars) = (counted.completedDeals, counted.reviewCount, counted.reviewStars)
                    return row
                })
            let cards = CardRow.table.copy(known.cards.values.sorted(by: { $0.added < $1.added }).lazy.map(\.row))
            known = Rows()
            try session.copy(users)
            try session.copy(cards)
        }
    }

    /// The users' and cards' rows a fold holds: a batch's, read by key, in an append; every
    /// one, until its end, in a build from the first event.
    struct Rows: Sendable {
        var users: [UserID: HeldUser] = [:]
        var cards: [CardID: HeldCard] = [:]
        /// Each user's cards ever added, for their forgetting.
        var cardsByUser: [UserID: [CardID]] = [:]

        /// `event` made to the rows: the projection's one statement of what each event does.
        /// `user`: the stream's.
        mutating func fold(_ event: ProjectedEvent, user: UserID?) throws {
            switch try Aggregate.user.codec.decode(event) {
            case .registered(let registered):
                // The first registration of an id stays.
                guard users[registered.userID] == nil else { return }
                users[registered.userID] = HeldUser(row: UserRow(registered: registered, at: event.recordedAt), registered: event.position)
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
                let id = forgotten.userID
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
                guard let user, cards[card.cardID] == nil else { return }
                cards[card.cardID] = HeldCard(row: CardRow(card, user: user, at: event.recordedAt), added: event.position)
                cardsByUser[user, default: []].append(card.cardID)
            case .cardExpiryUpdated(let updated):
                cards[updated.cardID]?.row.expMonth = updated.expMonth
                cards[updated.cardID]?.row.expYear = updated.expYear
            case .cardRemoved(let removed):
                cards[removed.cardID] = nil
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
        private mutating func change(_ user: UserID?, _ event: ProjectedEvent, _ body: (inout UserRow) -> Void) {
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

    /// A user or card the fold made.
    static let insertUsers = UserRow.table.insert("insert users") { $0 }
    static let insertCards = CardRow.table.insert("insert cards") { $0 }

    func userID(of event: ProjectedEvent) -> UserID? {
        Aggregate.user.id(of: event.streamID)
    }
}
