import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres
import UUIDs

/// `items_view`, `bids_view`, `reviews_view`, `messages_view` and `market_cells`: every item,
/// bid, review and message as clients read them, the market's map, and the deals and ratings
/// they add up to in `users_view`.
///
/// Stated once, as a fold over typed rows (`Rows.fold`, `ItemsFold.swift`), as Marten's
/// projections are. An append reads the items and bids its batch touches by key, with the
/// handles and held reviews it needs (`Keys`), folds the batch into them, and writes back
/// what changed: the items and bids set-based, one statement per table and set of columns
/// changed; the users' deals and ratings as one change of their counts; the market's cells
/// from each item's place before and after. A build from the first event holds every item
/// in memory, and each bid until its fate, folds, and copies them.
///
/// Reviews and messages are rows no later event reads back but to publish, hide or redact
/// them: the fold gives their statements, in the events' order, to both ways alike.
///
/// Total, like `evolve`: a valid event never fails here. A handle not (yet) in `users_view`
/// is written as empty rather than refusing the event. A row written back holds what the
/// fold read, so the read must be current: it runs after `append_batch` took the log head's
/// lock, and only this projection writes these views.
public struct ItemsProjection: ReadingProjection {
    public let name = "items"
    public init() {}

    public func reads(_ events: [ProjectedEvent]) -> [PostgresQuery] { Keys(events).reads }

    /// The rows `reads` found, the batch folded into them, and what it changed written.
    public func apply(_ events: [ProjectedEvent], read: [PostgresRows], _ session: inout PostgresSession) throws {
        var rows = Rows()
        let before = try rows.hold(read)
        try rows.register(events)
        var statements: [PostgresQuery] = []
        for event in events { try rows.fold(event, &statements) }
        for statement in statements { try session.query(statement, prepared: true) }
        try ItemRow.table.writeBack(
            rows.items.values.sorted(by: { $0.posted < $1.posted }).lazy.map(\.row), before: before.items, key: \.id,
            keyColumns: "item_id", insert: Self.insertItems, &session)
        try BidRow.table.writeBack(
            rows.bids.values, before: before.bids, key: \.id, keyColumns: "bid_id", insert: Self.insertBids, &session)
        try Self.count(rows.userCounts, &session)
        try Self.move(CellMoves(before: before.items, after: rows.items), &session)
    }

    /// A build from the first event folds as an append does, into rows it holds from batch
    /// to batch: every item, written once as the log leaves it at the build's end (its
    /// statuses, bid counts, revisions and photos were each an update of its row: the
    /// statuses' alone 1.8 s of 1.04M events); every handle, where each insert looked one up
    /// by key; and each bid until its fate, then sent by `COPY` (the bids' insert was a
    /// build's costliest statement, 13 µs a bid, `pg_stat_statements`). Its market's cells are
    /// made once at its end (`finishRebuild`), where moving them batch by batch cost an upsert
    /// per cell touched.
    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Rows()) { rows in
            try rows.register(events)
            var statements: [PostgresQuery] = []
            for event in events { try rows.fold(event, &statements) }
            for statement in statements { try session.query(statement, prepared: true) }
            // The bids decided, out of memory: copied now, and never read back.
            let decided = rows.bids.values.filter { $0.status != .pending }
            for bid in decided {
                rows.bids[bid.id] = nil
                rows.copiedBids.insert(bid.id)
            }
            if !decided.isEmpty { try session.copy(BidRow.table.copy(decided)) }
            if !rows.lateFates.isEmpty {
                try session.query(BidRow.table.write(Self.lateFates, rows.lateFates.values), prepared: true)
                rows.lateFates = [:]
            }
        }
    }

    /// The items as the log left them, and the bids still undecided, written as they are;
    /// then each kept cell's count, sums and least item id, from the available items: what
    /// moving them item by item since the first event makes (`move`, migration 0021).
    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Rows()) { rows in
            // In the order they were posted, as the appends insert them: a table laid out the
            // same at each build, its pages in the order the market's newest read them.
            let items = ItemRow.table.copy(rows.items.values.sorted(by: { $0.posted < $1.posted }).lazy.map(\.row))
            let pending = BidRow.table.copy(rows.bids.values)
            let counts = rows.userCounts
            rows = Rows()
            // The users projection writes them with its rows.
            rows.userCounts = counts
            try session.copy(items)
            try session.copy(pending)
        }
        // The rebuild's own table, seen by no one else until a swap: emptied without dead rows.
        try session.query("TRUNCATE market_cells")
        try session.query(
            """
            INSERT INTO \(unsafeRaw: MarketCellRow.table.target)
            SELECT l, mercator_x(i.lng) >> (24 - l), mercator_y(i.lat) >> (24 - l), count(*),
                   sum(round(i.lat * 1e7)::bigint), sum(round(i.lng * 1e7)::bigint), (array_agg(i.item_id ORDER BY i.item_id))[1]
            FROM items_view i, unnest(\(unsafeRaw: Self.cellLevels)) AS l
            WHERE i.status = 'available'
            GROUP BY 1, 2, 3
            """)
    }

    /// What a batch's fold reads, by key: the items its events change (not those it posts:
    /// a posting makes a new stream, so its item has no row yet), every item of an owner it
    /// forgets, the bids it decides, the handles of those who post and bid, and the reviews
    /// held for the bookings it publishes.
    struct Keys {
        var items = Set<ItemID>(), owners = Set<UserID>(), fates = Set<BidID>(), handles = Set<UserID>()
        var bookings = Set<BidID>()

        /// The item events that change no item, bid or user row (and need none read).
        static let rowless: Set<String> = [
            MessageSent.eventType, MessageHidden.eventType, ReviewWindowClosed.eventType, BookingReminded.eventType,
            DepositReleased.eventType, DepositClaimed.eventType, DisputeOpened.eventType, DisputeResolved.eventType,
            SavedSearchesMatched.eventType, BookingCompleted.eventType,
        ]

        init(_ events: [ProjectedEvent]) {
            for event in events {
                if event.type == UserForgotten.eventType, Aggregate.user.owns(event.streamID),
                    case .forgotten(let forgotten) = try? Aggregate.user.codec.decode(event)
                {
                    owners.insert(forgotten.userID)
                    continue
                }
                guard Aggregate.item.owns(event.streamID), !Self.rowless.contains(event.type) else { continue }
                switch try? Aggregate.item.codec.decode(event) {
                case .rentalPosted(let posted): handles.insert(posted.ownerID)
                case .requestPosted(let posted): handles.insert(posted.ownerID)
                case .bidPlaced(let placed): handles.insert(placed.bidderID)
                case .bidWithdrawn(let withdrawn): fates.insert(withdrawn.bidID)
                case .bidRejected(let rejected): fates.insert(rejected.bidID)
                case .bidApproved(let approved): fates.insert(approved.bidID)
                case .reviewsPublished(let published): bookings.insert(published.bookingID)
                default: break
                }
                switch event.type {
                case RentalPosted.eventType, RequestPosted.eventType: break
                default: if let item = Aggregate.item.id(of: event.streamID) { items.insert(item) }
                }
            }
        }

        /// One read for each kind of key the batch has, each told by its first column.
        var reads: [PostgresQuery] {
            var reads: [PostgresQuery] = []
            if !owners.isEmpty {
                reads.append(
                    """
                    SELECT \(unsafeRaw: ItemRow.table.selectList()) FROM items_view
                    WHERE item_id = ANY (\(items.map(\.description))::uuid[]) OR owner_id = ANY (\(owners.map(\.description))::uuid[])
                    """)
            } else if !items.isEmpty {
                reads.append(ItemRow.table.rows(where: "item_id", in: items))
            }
            if !fates.isEmpty { reads.append(BidRow.table.rows(where: "bid_id", in: fates)) }
            if !handles.isEmpty {
                reads.append(
                    "SELECT user_id AS handle_of, handle FROM users_view WHERE user_id = ANY (\(handles.map(\.description))::uuid[])")
            }
            if !bookings.isEmpty {
                // Its reviews held unpublished and shown, as the fold holds them.
                reads.append(
                    """
                    SELECT bid_id AS held_for, subject_id, role, stars FROM reviews_view
                    WHERE bid_id = ANY (\(bookings.map(\.description))::uuid[]) AND NOT published AND NOT hidden ORDER BY position
                    """)
            }
            return reads
        }
    }
}

extension ItemsProjection.Rows {
    /// What `Keys.reads` found, held as the fold holds it, and returned as it was read (what
    /// the write-back compares with). Each result is told by its first column, not by its
    /// place: the reads were made from every event the batch might append, and `apply` gets
    /// those it did append (an append refused for its version drops out).
    mutating func hold(_ read: [PostgresRows]) throws -> (items: [ItemID: ItemRow], bids: [BidID: BidRow]) {
        var before: (items: [ItemID: ItemRow], bids: [BidID: BidRow]) = ([:], [:])
        for found in read {
            switch found.columns.first?.name {
            case "item_id":
                for row in found {
                    let item = try ItemRow.table.decode(row)
                    before.items[item.id] = item
                    items[item.id] = ItemsProjection.HeldItem(row: item, posted: item.position)
                    itemsByOwner[item.owner, default: []].append(item.id)
                }
            case "bid_id":
                for row in found {
                    let bid = try BidRow.table.decode(row)
                    before.bids[bid.id] = bid
                    bids[bid.id] = bid
                }
            case "handle_of":
                for row in found { handles[try row.decode("handle_of", as: UserID.self)] = try row.decode("handle", as: String.self) }
            case "held_for":
                for row in found {
                    let role = try row.decode("role", as: String.self)
                    guard let role = ReviewerRole(rawValue: role) else {
                        throw PostgresError(.decoding, message: "\(role) is no reviewer role", column: "role")
                    }
                    heldReviews[try row.decode("held_for", as: BidID.self), default: []].append(
                        ItemsProjection.HeldReview(
                            subject: try row.decode("subject_id", as: UserID.self), role: role, stars: try row.decode("stars")))
                }
            default:
                throw PostgresError(.decoding, message: "a read ItemsProjection.Keys does not make")
            }
        }
        return before
    }
}
