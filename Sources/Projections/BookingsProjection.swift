import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// `bookings_view`, `blackouts_view` and `rental_prices_view`: each rental's bookings, the
/// days its owner closed, and each rental bid's prices (SPEC §12.2), which its booking shows.
///
/// Stated once, as a fold over its rows (`Bookings.fold`): an append reads the bookings its
/// batch touches by key (in the append's round trip), folds, and writes back what changed; a
/// build from the first event holds every booking, folds the same, and copies them at its
/// end. Blackouts and prices are only ever added (and a blackout removed): the fold gives
/// them as one insert (and one delete) per batch, the same to both ways.
public struct BookingsProjection: ReadingProjection {
    public let name = "bookings"
    public init() {}

    static let events: Set<String> = [
        BookingConfirmed.eventType, BookingCompleted.eventType, BlackoutAdded.eventType, BlackoutRemoved.eventType,
        ItemReserved.eventType, ItemClosed.eventType, ReviewWindowClosed.eventType, BookingCancelled.eventType,
        BidPlaced.eventType, BidRejected.eventType, BidWithdrawn.eventType, BookingReminded.eventType,
        DepositReleased.eventType, DepositClaimed.eventType, DisputeOpened.eventType, DisputeResolved.eventType,
        RentalPosted.eventType,
    ]
    static let readNothing: Set<String> = [
        RentalPosted.eventType, BidPlaced.eventType, BidRejected.eventType, BidWithdrawn.eventType, BlackoutAdded.eventType,
        BlackoutRemoved.eventType,
    ]

    /// The events of `events` the fold reads: an item's above, and forgettings.
    static func folded(_ events: [ProjectedEvent]) -> some Sequence<ProjectedEvent> {
        events.lazy.filter { event in
            event.type == UserForgotten.eventType
                ? Aggregate.user.owns(event.streamID) : Self.events.contains(event.type) && Aggregate.item.owns(event.streamID)
        }
    }

    /// What a batch reads, each told by its first column: the bookings it changes, by key (a
    /// second release's closing, by item; a forgetting, by party); and for a second release's
    /// reservation, the bid and its item as the views had them before the batch.
    public func reads(_ events: [ProjectedEvent]) -> [PostgresQuery] {
        var bookings = Set<BookingID>(), items = Set<ItemID>(), parties = Set<UserID>(), reserved = Set<BidID>()
        var reservedItems = Set<ItemID>()
        for event in Self.folded(events) {
            if event.type == UserForgotten.eventType {
                if case .forgotten(let forgotten) = try? Aggregate.user.codec.decode(event) { parties.insert(forgotten.userID) }
                continue
            }
            // Postings, bids and blackouts read nothing: the fold has what it needs from them.
            guard !Self.readNothing.contains(event.type), let decoded = try? Aggregate.item.codec.decode(event) else { continue }
            if let booking = Self.booking(of: decoded) { bookings.insert(booking) }
            switch decoded {
            case .closed:
                if let item = Aggregate.item.id(of: event.streamID) { items.insert(item) }
            case .reserved(let reservation):
                reserved.insert(reservation.bidID)
                bookings.insert(BookingID(reservation.bidID.rawValue))
                if let item = Aggregate.item.id(of: event.streamID) { reservedItems.insert(item) }
            default:
                break
            }
        }
        var reads: [PostgresQuery] = []
        if !bookings.isEmpty { reads.append(BookingRow.table.rows(where: "booking_id", in: bookings)) }
        if !items.isEmpty { reads.append(BookingRow.table.rows(where: "item_id", in: items)) }
        if !parties.isEmpty {
            reads.append(BookingRow.table.rows(where: "owner_id", in: parties))
            reads.append(BookingRow.table.rows(where: "renter_id", in: parties))
        }
        if !reserved.isEmpty {
            reads.append(
                """
                SELECT item_id AS rental_of, owner_id FROM items_view
                WHERE item_id = ANY (\(reservedItems.map(\.description))::uuid[]) AND kind <> 'request'
                """)
            reads.append(
                """
                SELECT b.bid_id AS terms_of, b.item_id, b.bidder_id, b.daily_price_cents, b.from_day, b.until_day
                FROM bids_view b
                WHERE b.bid_id = ANY (\(reserved.map(\.description))::uuid[]) AND b.owner_id IS NOT NULL
                """)
        }
        return reads
    }

    /// The booking an event of one names.
    static func booking(of event: ItemEvent) -> BookingID? {
        switch event {
        case .bookingConfirmed(let confirmed): confirmed.bookingID
        case .bookingCancelled(let cancelled): cancelled.bookingID
        case .bookingCompleted(let completed): completed.bookingID
        case .reviewWindowClosed(let closed): closed.bookingID
        case .bookingReminded(let reminded): reminded.bookingID
        case .depositReleased(let released): released.bookingID
        case .depositClaimed(let claimed): claimed.bookingID
        case .disputeOpened(let opened): opened.bookingID
        case .disputeResolved(let resolved): resolved.bookingID
        default: nil
        }
    }

    public func apply(_ events: [ProjectedEvent], read: [PostgresRows], _ session: inout PostgresSession) throws {
        var bookings = Bookings()
        let before = try bookings.hold(read)
        for event in Self.folded(events) { try bookings.fold(event) }
        try BookingRow.table.writeBack(
            bookings.rows.values, before: before, key: \.id, keyColumns: "booking_id", insert: BookingRow.insert, &session)
        try bookings.writeAdditions(&session)
    }

    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Bookings()) { bookings in
            for event in Self.folded(events) { try bookings.fold(event) }
            try bookings.writeAdditions(&session)
        }
    }

    /// The bookings as the log left them.
    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        let copy = memory.with(name, initial: Bookings()) { bookings in
            defer { bookings = Bookings() }
            return BookingRow.table.copy(bookings.rows.values.sorted(by: { $0.position < $1.position }))
        }
        try session.copy(copy)
    }
}

extension BookingsProjection {
    /// The rows the fold holds: a batch's, read by key, in an append; every booking in a build.
    struct Bookings: Sendable {
        var rows: [BookingID: BookingRow] = [:]
        /// Each item's bookings: a second release's closing completes its item's. Each party's:
        /// a forgetting redacts theirs (a build holds every booking; none is scanned).
        var byItem: [ItemID: [BookingID]] = [:]
        var byParty: [UserID: [BookingID]] = [:]
        /// A second release's reservation of a bid is that bid's booking, if its item is a
        /// rental: the rentals' owners, and the terms of bids without a price (a second
        /// release's) until they are decided.
        var rentalOwners: [ItemID: UserID] = [:]
        var terms: [BidID: Terms] = [:]
        /// What the fold adds to the blackouts and prices, and the blackouts it removes.
        var blackouts: [BlackoutRow] = []
        var removedBlackouts: Set<BlackoutID> = []
        var prices: [BidID: RentalPriceRow] = [:]
        var pricesInOrder: [BidID] = []

        struct Terms: Sendable {
            var item: ItemID
            var bidder: UserID
            var dailyPriceCents: Int
            var from: Day
            var until: Day
        }

        /// A row read or made: held, and found by its item.
        mutating func hold(_ row: BookingRow) {
            guard rows[row.id] == nil else { return }
            rows[row.id] = row
            byItem[row.item, default: []].append(row.id)
            byParty[row.owner, default: []].append(row.id)
            if row.renter != row.owner { byParty[row.renter, default: []].append(row.id) }
        }

        /// What `reads` found, held as the fold holds it; the bookings returned as they were
        /// read (what the write-back compares with).
        mutating func hold(_ read: [PostgresRows]) throws -> [BookingID: BookingRow] {
            var before: [BookingID: BookingRow] = [:]
            for found in read {
                switch found.columns.first?.name {
                case "booking_id":
                    for row in found {
                        let booking = try BookingRow.table.decode(row)
                        before[booking.id] = booking
                        hold(booking)
                    }
                case "rental_of":
                    for row in found { rentalOwners[try row.decode("rental_of", as: ItemID.self)] = try row.decode("owner_id") }
                case "terms_of":
                    for row in found {
                        terms[try row.decode("terms_of", as: BidID.self)] = Terms(
                            item: try row.decode("item_id"), bidder: try row.decode("bidder_id"),
                            dailyPriceCents: try row.decode("daily_price_cents"),
                            from: try row.decode("from_day", as: PostgresDay.self).day,
                            until: try row.decode("until_day", as: PostgresDay.self).day)
                    }
                case nil:
                    continue
                default:
                    throw PostgresError(.decoding, message: "a read BookingsProjection.reads does not make")
                }
            }
            return before
        }

        /// `event` made to the rows: the projection's one statement of what each event does.
        mutating func fold(_ event: ProjectedEvent) throws {
            let at = event.recordedAt
            if event.type == UserForgotten.eventType {
                guard case .forgotten(let forgotten) = try Aggregate.user.codec.decode(event) else { return }
                forget(forgotten.userID)
                return
            }
            guard let item = Aggregate.item.id(of: event.streamID) else { return }
            let decoded = try Aggregate.item.codec.decode(event)
            switch decoded {
            case .rentalPosted(let posted):
                if rentalOwners[item] == nil { rentalOwners[item] = posted.ownerID }
            case .bidPlaced(let placed):
                if let price = placed.price, let hold = placed.hold {
                    if prices[placed.bidID] == nil {
                        prices[placed.bidID] = RentalPriceRow(bid: placed.bidID, price, payWith: hold.method)
                        pricesInOrder.append(placed.bidID)
                    }
                } else if rentalOwners[item] != nil, placed.price == nil {
                    terms[placed.bidID] = Terms(
                        item: item, bidder: placed.bidderID, dailyPriceCents: placed.dailyPriceCents, from: placed.from,
                        until: placed.until)
                }
            case .bidRejected(let rejected):
                terms[rejected.bidID] = nil
            case .bidWithdrawn(let withdrawn):
                terms[withdrawn.bidID] = nil
            case .bookingConfirmed(let confirmed):
                // A bid booked this way is no second release's reservation.
                terms[BidID(confirmed.bookingID.rawValue)] = nil
                hold(
                    BookingRow(
                        id: confirmed.bookingID, item: item, owner: confirmed.ownerID, renter: confirmed.renterID, from: confirmed.from,
                        until: confirmed.until, dailyPriceCents: confirmed.dailyPriceCents, status: .confirmed, createdAt: at,
                        position: event.position, depositCents: confirmed.depositCents,
                        depositStatus: confirmed.depositCents == nil ? nil : "held"))
            case .reserved(let reserved):
                // A second release's reservation: a booking of the bid's days if the item is a rental.
                defer { terms[reserved.bidID] = nil }
                guard let terms = terms[reserved.bidID], let owner = rentalOwners[terms.item] else { return }
                hold(
                    BookingRow(
                        id: BookingID(reserved.bidID.rawValue), item: terms.item, owner: owner, renter: terms.bidder, from: terms.from,
                        until: terms.until, dailyPriceCents: terms.dailyPriceCents, status: .confirmed, createdAt: at,
                        position: event.position))
            case .closed:
                // ... and its closing, that booking's completion (a reservation is the item's only
                // one), its deal reviewed the old way.
                for id in byItem[item] ?? [] where rows[id]?.status == .confirmed {
                    change(id, event) { row in
                        (row.status, row.completedAt, row.reviewsClosed) = (.completed, at, true)
                    }
                }
            case .bookingCancelled(let cancelled):
                change(cancelled.bookingID, event) { row in
                    (row.status, row.cancelledAt, row.cancelledBy) = (.cancelled, at, cancelled.cancelledBy)
                    (row.refundCents, row.settledPayoutCents, row.settledFeesCents) =
                        (cancelled.refundCents, cancelled.payoutCents, cancelled.feesCents)
                }
            case .bookingCompleted(let completed):
                change(completed.bookingID, event) { row in
                    (row.status, row.completedAt, row.completedOn) = (.completed, at, completed.completedOn)
                    row.reviewsClosed = completed.completedOn == nil
                    (row.settledPayoutCents, row.settledFeesCents) = (completed.payoutCents, completed.feesCents)
                }
            case .reviewWindowClosed(let closed):
                change(closed.bookingID, event) { $0.reviewsClosed = true }
            case .bookingReminded(let reminded):
                // Not an answer's to wait for: its position stays.
                rows[reminded.bookingID]?.reminded = true
            case .depositReleased(let released):
                change(released.bookingID, event) { $0.depositStatus = "released" }
            case .depositClaimed(let claimed):
                change(claimed.bookingID, event) { row in (row.claimCents, row.claimText) = (claimed.amountCents, claimed.text) }
            case .disputeOpened(let opened):
                change(opened.bookingID, event) { row in
                    (row.disputeReason, row.disputeText, row.disputeOpenedBy, row.disputeStatus) =
                        (opened.reason.rawValue, opened.text, opened.openedBy, "open")
                }
            case .disputeResolved(let resolved):
                change(resolved.bookingID, event) { row in
                    if row.depositStatus != nil { row.depositStatus = "divided" }
                    if row.disputeStatus != nil { row.disputeStatus = "resolved" }
                    (row.resolutionRenterCents, row.resolutionOwnerCents) = (resolved.renterCents, resolved.ownerCents)
                    (row.resolvedBy, row.resolution) = (resolved.operatorID, resolved.reason)
                }
            case .blackoutAdded(let added):
                blackouts.append(BlackoutRow(id: added.blackoutID, item: item, from: added.from, until: added.until, createdAt: at))
            case .blackoutRemoved(let removed):
                // Removed before the batch's adds are written: an add in it is dropped instead.
                blackouts.removeAll { $0.id == removed.blackoutID }
                removedBlackouts.insert(removed.blackoutID)
            default:
                break
            }
        }

        /// The booking `id`, if held, changed by `event`, whose position it then has.
        mutating func change(_ id: BookingID, _ event: ProjectedEvent, _ body: (inout BookingRow) -> Void) {
            guard var row = rows[id] else { return }
            body(&row)
            row.position = event.position
            rows[id] = row
        }

        /// A forgotten party's words on a claim (the owner's) or a dispute (its opener's), as a
        /// replay reads them.
        mutating func forget(_ user: UserID) {
            for id in byParty[user] ?? [] {
                if rows[id]?.owner == user, rows[id]?.claimText != nil { rows[id]?.claimText = Redacted.text }
                if rows[id]?.disputeOpenedBy == user, rows[id]?.disputeText != nil { rows[id]?.disputeText = Redacted.text }
            }
        }

        /// The batch's blackouts and prices, written: removals first (an add the batch removed
        /// again is dropped from its adds), then one insert each; the first of an id stays.
        mutating func writeAdditions(_ session: inout PostgresSession) throws {
            if !removedBlackouts.isEmpty {
                try session.query(
                    "DELETE FROM blackouts_view WHERE blackout_id = ANY (\(removedBlackouts.map(\.description))::uuid[])",
                    prepared: true)
            }
            if !blackouts.isEmpty { try session.query(BlackoutRow.table.write(BlackoutRow.insert, blackouts), prepared: true) }
            if !pricesInOrder.isEmpty {
                try session.query(RentalPriceRow.table.write(RentalPriceRow.insert, pricesInOrder.compactMap { prices[$0] }), prepared: true)
            }
            (blackouts, removedBlackouts, prices, pricesInOrder) = ([], [], [:], [])
        }
    }
}
