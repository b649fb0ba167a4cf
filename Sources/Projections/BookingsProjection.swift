import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// `bookings_view`, `blackouts_view` and `rental_prices_view`: each rental's bookings, the
/// days its owner closed, and each rental bid's prices (SPEC §12.2), which its booking shows.
///
/// Stated once: the appends and a rebuild run the same statements (no `Memory`, no second
/// fold). It runs after `ItemsProjection` in its group, so a batch's bids are in `bids_view`
/// when a second release's `ItemReserved` is read here as a booking of the bid's days.
public struct BookingsProjection: InlineProjection {
    public let name = "bookings"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        var plan = WritePlan()
        for event in events {
            if event.type == UserForgotten.eventType, case .forgotten(let forgotten) = try Aggregate.user.codec.decode(event) {
                // Their words on a claim or a dispute, as a replay reads them; found by party,
                // whose indexes a rebuild keeps (`Rebuild.lookups`).
                let user = forgotten.userID.rawValue
                plan.barrier([
                    """
                    UPDATE bookings_view
                    SET claim_text = CASE WHEN claim_text IS NOT NULL THEN \(Redacted.text) END,
                        dispute_text = CASE WHEN dispute_opened_by = \(user) AND dispute_text IS NOT NULL THEN \(Redacted.text)
                                            ELSE dispute_text END
                    WHERE owner_id = \(user) AND (claim_text IS NOT NULL OR dispute_opened_by = \(user))
                    """,
                    """
                    UPDATE bookings_view SET dispute_text = \(Redacted.text)
                    WHERE renter_id = \(user) AND dispute_opened_by = \(user) AND dispute_text IS NOT NULL
                    """,
                ])
                continue
            }
            guard Aggregate.item.owns(event.streamID) else { continue }
            switch event.type {
            case BookingConfirmed.eventType, BookingCompleted.eventType, BlackoutAdded.eventType, BlackoutRemoved.eventType,
                ItemReserved.eventType, ItemClosed.eventType, ReviewWindowClosed.eventType, BookingCancelled.eventType,
                BidPlaced.eventType, BookingReminded.eventType, DepositReleased.eventType, DepositClaimed.eventType,
                DisputeOpened.eventType, DisputeResolved.eventType:
                break
            default:
                continue
            }
            guard let item = Aggregate.item.id(of: event.streamID)?.rawValue else { continue }
            let at = event.recordedAt
            // Each item's writes in the events' order; items apart from each other.
            let row = WritePlan.Row(.item, item)
            switch try Aggregate.item.codec.decode(event) {
            case .bidPlaced(let placed):
                guard let price = placed.price, let hold = placed.hold else { break }
                plan.add(
                    [RentalPriceRow.table.write(RentalPriceRow.insert, [RentalPriceRow(bid: placed.bidID, price, payWith: hold.method)])],
                    writes: [row])
            case .bookingCancelled(let cancelled):
                plan.add(
                    [
                        """
                        UPDATE bookings_view
                        SET status = 'cancelled', cancelled_at = \(at), cancelled_by = \(cancelled.cancelledBy.rawValue),
                            refund_cents = \(cancelled.refundCents),
                            settled_payout_cents = \(cancelled.payoutCents), settled_fees_cents = \(cancelled.feesCents),
                            position = \(event.position)
                        WHERE booking_id = \(cancelled.bookingID.rawValue)
                        """
                    ], writes: [row])
            case .bookingConfirmed(let confirmed):
                plan.add(
                    [
                        """
                        INSERT INTO bookings_view (booking_id, item_id, owner_id, renter_id, from_day, until_day,
                                                   daily_price_cents, status, created_at, position, deposit_cents, deposit_status)
                        VALUES (\(confirmed.bookingID.rawValue), \(item), \(confirmed.ownerID.rawValue), \(confirmed.renterID.rawValue),
                                \(confirmed.from.description)::date, \(confirmed.until.description)::date,
                                \(confirmed.dailyPriceCents), 'confirmed', \(at), \(event.position), \(confirmed.depositCents),
                                \(confirmed.depositCents == nil ? nil : "held"))
                        ON CONFLICT (booking_id) DO NOTHING
                        """
                    ], writes: [row])
            case .bookingCompleted(let completed):
                plan.add(
                    [
                        """
                        UPDATE bookings_view
                        SET status = 'completed', completed_at = \(at), completed_on = \(completed.completedOn?.description)::date,
                            reviews_closed = \(completed.completedOn == nil), settled_payout_cents = \(completed.payoutCents),
                            settled_fees_cents = \(completed.feesCents), position = \(event.position)
                        WHERE booking_id = \(completed.bookingID.rawValue)
                        """
                    ], writes: [row])
            case .blackoutAdded(let added):
                let blackout = BlackoutRow(id: added.blackoutID, item: ItemID(item), from: added.from, until: added.until, createdAt: at)
                plan.add([BlackoutRow.table.write(BlackoutRow.insert, [blackout])], writes: [row])
            case .blackoutRemoved(let removed):
                plan.add(["DELETE FROM blackouts_view WHERE blackout_id = \(removed.blackoutID.rawValue)"], writes: [row])
            case .reserved(let reserved):
                // A second release's reservation: a booking of the bid's days if the item is a
                // rental. A rebuild writes its items at its end, so there the item is not known
                // yet: every reservation is written, and a request's taken away at the end.
                plan.add(
                    [
                        """
                        INSERT INTO bookings_view (booking_id, item_id, owner_id, renter_id, from_day, until_day,
                                                   daily_price_cents, status, created_at, position)
                        SELECT b.bid_id, \(item), b.owner_id, b.bidder_id, b.from_day, b.until_day, b.daily_price_cents,
                               'confirmed', \(at), \(event.position)
                        FROM bids_view b
                        WHERE b.bid_id = \(reserved.bidID.rawValue) AND b.owner_id IS NOT NULL
                          AND NOT EXISTS (SELECT FROM items_view WHERE item_id = \(item) AND kind = 'request')
                        ON CONFLICT (booking_id) DO NOTHING
                        """
                    ], writes: [row])
            case .closed:
                // ... and its closing, that booking's completion (a reservation is the item's only
                // one), its deal reviewed the old way.
                plan.add(
                    [
                        """
                        UPDATE bookings_view SET status = 'completed', completed_at = \(at), reviews_closed = true,
                               position = \(event.position)
                        WHERE item_id = \(item) AND status = 'confirmed'
                        """
                    ], writes: [row])
            case .reviewWindowClosed(let closed):
                plan.add(
                    [
                        """
                        UPDATE bookings_view SET reviews_closed = true, position = \(event.position)
                        WHERE booking_id = \(closed.bookingID.rawValue)
                        """
                    ], writes: [row])
            case .bookingReminded(let reminded):
                plan.add(
                    ["UPDATE bookings_view SET reminded = true WHERE booking_id = \(reminded.bookingID.rawValue)"], writes: [row])
            case .depositReleased(let released):
                plan.add(
                    [
                        """
                        UPDATE bookings_view SET deposit_status = 'released', position = \(event.position)
                        WHERE booking_id = \(released.bookingID.rawValue)
                        """
                    ], writes: [row])
            case .depositClaimed(let claimed):
                plan.add(
                    [
                        """
                        UPDATE bookings_view SET claim_cents = \(claimed.amountCents), claim_text = \(claimed.text),
                               position = \(event.position)
                        WHERE booking_id = \(claimed.bookingID.rawValue)
                        """
                    ], writes: [row])
            case .disputeOpened(let opened):
                plan.add(
                    [
                        """
                        UPDATE bookings_view SET dispute_reason = \(opened.reason.rawValue), dispute_text = \(opened.text),
                               dispute_opened_by = \(opened.openedBy.rawValue), dispute_status = 'open', position = \(event.position)
                        WHERE booking_id = \(opened.bookingID.rawValue)
                        """
                    ], writes: [row])
            case .disputeResolved(let resolved):
                plan.add(
                    [
                        """
                        UPDATE bookings_view
                        SET deposit_status = CASE WHEN deposit_status IS NULL THEN NULL ELSE 'divided' END,
                            dispute_status = CASE WHEN dispute_status IS NULL THEN NULL ELSE 'resolved' END,
                            resolution_renter_cents = \(resolved.renterCents), resolution_owner_cents = \(resolved.ownerCents),
                            resolved_by = \(resolved.operatorID.rawValue), resolution = \(resolved.reason),
                            position = \(event.position)
                        WHERE booking_id = \(resolved.bookingID.rawValue)
                        """
                    ], writes: [row])
            default:
                break
            }
        }
        try plan.run(&session)
    }

    /// The requests' reservations a rebuild wrote before it knew their items' kinds.
    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try session.query(
            """
            DELETE FROM bookings_view b USING items_view i WHERE i.item_id = b.item_id AND i.kind = 'request'
            """)
    }
}
