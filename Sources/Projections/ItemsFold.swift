import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

extension ItemsProjection {
    /// The rows the items projection's fold holds: a batch's, read by key, in an append;
    /// every item, and each bid until its fate, in a build from the first event.
    struct Rows: Sendable {
        /// Users' handles, as `users_view` keeps them (the first registration of an id).
        var handles: [UserID: String] = [:]
        var items: [ItemID: HeldItem] = [:]
        /// Each owner's items, for their forgetting.
        var itemsByOwner: [UserID: [ItemID]] = [:]
        var bids: [BidID: BidRow] = [:]
        /// A build's bids decided in an earlier batch, copied and no longer held.
        var copiedBids: Set<BidID> = []
        /// Fates for bids copied already (`decide`): each bid's last.
        var lateFates: [BidID: BidRow] = [:]
        /// What the batch (or, in a build, the log so far) adds to each user's completed deals
        /// and ratings.
        var userCounts: [UserID: UserCounts] = [:]
        /// A booking's reviews held unpublished and shown: counted when `ReviewsPublished` comes.
        var heldReviews: [BidID: [HeldReview]] = [:]

        /// The batch's registrations first: a posting or bid shows its author's handle as
        /// `users_view` holds it after the whole batch (the users projection's, applied first).
        mutating func register(_ events: [ProjectedEvent]) throws {
            for event in events where event.type == UserRegistered.eventType && Aggregate.user.owns(event.streamID) {
                guard case .registered(let registered) = try Aggregate.user.codec.decode(event) else { continue }
                if handles[registered.userID] == nil { handles[registered.userID] = registered.handle }
            }
        }

        /// `event` made to the rows: the projection's one statement of what each event does.
        /// The statements on reviews and messages it makes go to `statements`, in order.
        mutating func fold(_ event: ProjectedEvent, _ statements: inout [PostgresQuery]) throws {
            if event.type == UserForgotten.eventType, Aggregate.user.owns(event.streamID) {
                guard case .forgotten(let forgotten) = try Aggregate.user.codec.decode(event) else { return }
                forget(forgotten.userID, event)
                statements += ItemsProjection.redactions(of: forgotten.userID)
                return
            }
            guard Aggregate.item.owns(event.streamID) else { return }
            let item = Aggregate.item.id(of: event.streamID)
            let decoded = try Aggregate.item.codec.decode(event)
            switch decoded {
            case .rentalPosted, .requestPosted:
                // The first posting of an id stays.
                guard var posted = ItemRow(posted: decoded, ownerHandle: "", at: event.recordedAt, position: event.position),
                    items[posted.id] == nil
                else { return }
                posted.ownerHandle = handles[posted.owner] ?? ""
                items[posted.id] = HeldItem(row: posted, posted: event.position)
                itemsByOwner[posted.owner, default: []].append(posted.id)
            case .revised(let revised):
                change(item) { $0.revise(revised, event) }
            case .withdrawn:
                setStatus(item, .withdrawn, event)
            case .takenDown:
                setStatus(item, .takenDown, event)
            case .suspended:
                setStatus(item, .suspended, event)
            case .reinstated:
                setStatus(item, .available, event)
            case .expired:
                setStatus(item, .expired, event)
            case .reserved(let reserved):
                setStatus(item, .reserved, event, deal: .some(reserved.bidderID))
            case .closed:
                setStatus(item, .closed, event)
                // A completed deal for both parties: the owner and the bidder it was reserved for.
                if let held = item.flatMap({ items[$0]?.row }) {
                    for user in Set([held.owner, held.deal].compactMap { $0 }) { count(user) { $0.completedDeals += 1 } }
                }
            case .relisted:
                setStatus(item, .available, event, deal: .some(nil))
            case .photoAdded(let added):
                change(item) { held in
                    if Gallery.add(added.digest, to: &held.photos) { held.touch(event) }
                }
            case .photoRemoved(let removed):
                change(item) { held in
                    Gallery.remove(removed.digest, from: &held.photos)
                    held.touch(event)
                }
            case .bidPlaced(let placed):
                // The first placing of an id stays (and its insert keeps the row already written).
                if bids[placed.bidID] == nil && !copiedBids.contains(placed.bidID) {
                    bids[placed.bidID] = BidRow(
                        placed: placed, item: item, owner: item.flatMap { items[$0]?.row.owner },
                        bidderHandle: handles[placed.bidderID] ?? "", at: event.recordedAt)
                }
                change(item) { held in
                    held.bidCount += 1
                    held.touch(event)
                }
            case .bidWithdrawn(let withdrawn):
                decide(withdrawn.bidID, .withdrawn, reason: nil, event)
            case .bidRejected(let rejected):
                decide(rejected.bidID, .rejected, reason: rejected.reason, event)
            case .bidApproved(let approved):
                decide(approved.bidID, .approved, reason: nil, event)
            case .reviewWritten(let review) where review.held == true:
                // A booking's review: written, shown and counted once published. The first of a
                // side stays, as its insert keeps it.
                if !(heldReviews[review.bidID] ?? []).contains(where: { $0.role == review.role }) {
                    heldReviews[review.bidID, default: []].append(
                        HeldReview(subject: review.subjectID, role: review.role, stars: review.stars))
                }
                statements.append(ReviewRow.table.write(ItemsProjection.insertReviews, [ReviewRow(review, item: item, event)]))
            case .reviewWritten(let review):
                statements.append(ReviewRow.table.write(ItemsProjection.insertReviews, [ReviewRow(review, item: item, event)]))
                rate(review.subjectID, review.role, item, by: 1, review.stars, event)
            case .reviewsPublished(let published):
                // Each counts as a review written at once: its subject, and the item when the renter wrote it.
                for review in heldReviews.removeValue(forKey: published.bookingID) ?? [] {
                    rate(review.subject, review.role, item, by: 1, review.stars, event)
                }
                statements.append(
                    "UPDATE reviews_view SET published = true WHERE bid_id = \(published.bookingID.rawValue) AND NOT published")
            case .reviewHidden(let hidden):
                // Out of the lists, and out of the ratings it was counted in; a held one is
                // never counted at its publication.
                heldReviews[hidden.bidID]?.removeAll { $0.role == hidden.role && $0.subject == hidden.subjectID }
                if hidden.counted { rate(hidden.subjectID, hidden.role, item, by: -1, hidden.stars, nil) }
                statements.append("UPDATE reviews_view SET hidden = true WHERE bid_id = \(hidden.bidID) AND role = \(hidden.role.rawValue)")
            case .bookingCompleted(let completed):
                for user in Set([completed.ownerID, completed.renterID]) { count(user) { $0.completedDeals += 1 } }
            case .windowRevised(let revised):
                change(item) { held in
                    held.from = revised.availableFrom
                    held.until = revised.availableUntil
                    held.touch(event)
                }
            case .bookingConfirmed, .bookingCancelled, .blackoutAdded, .blackoutRemoved:
                // The rows are `BookingsProjection`'s; the rental's free days changed, so a market
                // refresh (`updatedSince`) hears of it.
                change(item) { $0.touch(event) }
            case .messageSent(let message):
                statements.append(MessageRow.table.write(ItemsProjection.insertMessages, [MessageRow(message, item: item, event)]))
            case .messageHidden(let hidden):
                statements.append(
                    "UPDATE messages_view SET text = \(MessageHidden.hiddenText) WHERE message_id = \(hidden.messageID.rawValue)")
            case .reviewWindowClosed, .bookingReminded, .depositReleased, .depositClaimed, .disputeOpened, .disputeResolved:
                // `BookingsProjection`'s.
                break
            case .savedSearchesMatched:
                // `FeedProjection`'s.
                break
            }
        }

        /// `body` made to the item's row, if the log posted it (an append reads every item
        /// its batch changes: one not read has no row).
        private mutating func change(_ item: ItemID?, _ body: (inout ItemRow) -> Void) {
            guard let item, items[item] != nil else { return }
            body(&items[item]!.row)
        }

        /// One more (or less) deal or rating for `user`. Written to their row, if they have
        /// one: a build's users projection copies only the users it registered.
        private mutating func count(_ user: UserID, _ body: (inout UserCounts) -> Void) {
            body(&userCounts[user, default: UserCounts()])
        }

        /// A review's stars counted (`by` 1) or taken back (-1): its subject's rating, and the
        /// item's when the renter wrote it. `event`: the change's, setting the item's time; nil
        /// for a hiding, which leaves it.
        private mutating func rate(
            _ subject: UserID, _ role: ReviewerRole, _ item: ItemID?, by sign: Int, _ stars: Int, _ event: ProjectedEvent?
        ) {
            count(subject) { counts in
                counts.reviewCount += sign
                counts.reviewStars += sign * stars
            }
            // A renter's review rates the item too; an owner's rates only the renter.
            guard role == .bidder else { return }
            change(item) { held in
                held.reviewCount += sign
                held.reviewStars += sign * stars
                if let event { held.touch(event) }
            }
        }

        /// A new status. `deal`: the bidder of the deal it is reserved for (`.some(nil)`: none
        /// any more); nil keeps it.
        private mutating func setStatus(_ item: ItemID?, _ status: ItemStatus, _ event: ProjectedEvent, deal: UserID?? = nil) {
            change(item) { held in
                if !ItemsProjection.keepsStatus(held.kind, status, dealSet: deal != nil) { held.status = status }
                if let deal { held.deal = deal }
                held.touch(event)
            }
        }

        /// A bid's fate, if the log placed it. A build copies a bid at its fate; a second fate
        /// (which the deciders refuse: a bid no longer pending has none) is kept in
        /// `lateFates`, for its row as written.
        private mutating func decide(_ bid: BidID, _ status: BidStatus, reason: String?, _ event: ProjectedEvent) {
            guard bids[bid] != nil else {
                guard copiedBids.contains(bid) else { return }
                var late = BidRow()
                (late.id, late.status, late.reason, late.updatedAt) = (bid, status, reason, event.recordedAt)
                lateFates[bid] = late
                return
            }
            (bids[bid]!.status, bids[bid]!.reason, bids[bid]!.updatedAt) = (status, reason, event.recordedAt)
        }

        /// A forgotten owner's items keep their listing but lose the place, the texts and the
        /// photos, and show `former user`; a forgotten bidder's bids lose their handle and
        /// message. The rows not held here are redacted by `redactions`, in step.
        private mutating func forget(_ user: UserID, _ event: ProjectedEvent) {
            for id in itemsByOwner[user] ?? [] where items[id]?.row.owner == user {
                change(id) { held in
                    held.ownerHandle = Redacted.name
                    held.location = Location(lat: 0, lng: 0, place: Redacted.text)
                    held.title = Redacted.text
                    held.description = Redacted.text
                    held.photos = []
                    held.touch(event)
                }
            }
            for (id, bid) in bids where bid.bidder == user {
                bids[id]!.bidderHandle = Redacted.name
                if bid.message != nil { bids[id]!.message = Redacted.text }
            }
        }
    }

    /// A booking's review held unpublished: whom it rates, as whom, with how many stars.
    struct HeldReview: Sendable {
        var subject: UserID
        var role: ReviewerRole
        var stars: Int
    }

    /// What the items' events add to a user's row.
    struct UserCounts: Sendable {
        var completedDeals = 0
        var reviewCount = 0
        var reviewStars = 0
    }

    /// An item as its row stands, and where the log posted it: the order new rows are
    /// written in.
    struct HeldItem: Sendable {
        var row: ItemRow
        let posted: Int64
    }

    /// A rental is booked by date and stays available: a second release's reservation,
    /// closing and relisting of one (`deal` set, or `reserved` and `closed`) leave its status.
    static func keepsStatus(_ kind: ItemKind, _ status: ItemStatus, dealSet: Bool) -> Bool {
        kind == .rental && (dealSet || status == .reserved || status == .closed)
    }
}
