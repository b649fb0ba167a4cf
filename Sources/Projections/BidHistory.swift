import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// One bid event of an item, as auditors read it: straight from the log, with its hashes.
public struct BidHistoryEntry: Codable, Sendable, Equatable {
    public var position: Int64
    public var streamVersion: Int
    public var type: String
    public var at: Date
    public var actorId: String?
    public var bidId: BidID
    /// Whose bid it is (not always the actor: an owner rejects a bidder's bid).
    public var bidderId: UserID
    public var dailyPriceCents: Int?
    /// The bid's status after this event.
    public var status: BidStatus
    public var reason: String?
    public var hash: String
    public var previousHash: String
}

/// An operator's act on an item (SPEC §12.5), as auditors read it beside its bids.
public struct OperatorActEntry: Codable, Sendable, Equatable {
    public var position: Int64
    public var type: String
    public var at: Date
    public var operatorId: String?
    /// The booking it was about, for a dispute's resolution or a cancellation.
    public var bookingId: BookingID?
    public var hash: String
}

/// Every bid event of an item, in log order: placed, withdrawn, rejected, approved.
public enum BidHistory {
    public static func entries(of item: ItemID, in store: EventStore) async throws -> [BidHistoryEntry] {
        try await history(of: item, in: store).bids
    }

    /// Its bid events, and what operators did to it: taken down, its owner suspended and
    /// reinstated, a message or a review hidden, a booking's dispute resolved or a booking
    /// cancelled in an operator's name. Each act names its operator (the event's actor).
    public static func history(of item: ItemID, in store: EventStore) async throws
        -> (bids: [BidHistoryEntry], acts: [OperatorActEntry])
    {
        var bidders = [BidID: UserID]()
        var entries = [BidHistoryEntry]()
        var acts = [OperatorActEntry]()
        for recorded in try await store.readStream(.item(item)) {
            let event = try Aggregate.item.codec.decode(recorded)
            let booking: BookingID? =
                switch event {
                case .disputeResolved(let resolved): resolved.bookingID
                // Neither party cancelled it: an operator did.
                case .bookingCancelled(let cancelled) where !cancelled.byOwner && cancelled.cancelledBy != cancelled.renterID:
                    cancelled.bookingID
                default: nil
                }
            if booking != nil || Self.isAct(event) {
                acts.append(
                    OperatorActEntry(
                        position: recorded.position, type: recorded.type, at: recorded.recordedAt,
                        operatorId: try? recorded.decodeMetadata().actorID, bookingId: booking, hash: recorded.hash.hexString))
            }
            let change: (bid: BidID, status: BidStatus, price: Int?, reason: String?)
            switch event {
            case .bidPlaced(let placed):
                bidders[placed.bidID] = placed.bidderID
                change = (placed.bidID, .pending, placed.dailyPriceCents, nil)
            case .bidWithdrawn(let withdrawn): change = (withdrawn.bidID, .withdrawn, nil, nil)
            case .bidRejected(let rejected): change = (rejected.bidID, .rejected, nil, rejected.reason)
            case .bidApproved(let approved): change = (approved.bidID, .approved, nil, nil)
            default: continue
            }
            guard let bidder = bidders[change.bid] else { continue }
            entries.append(
                BidHistoryEntry(
                    position: recorded.position, streamVersion: recorded.streamVersion, type: recorded.type,
                    at: recorded.recordedAt, actorId: try? recorded.decodeMetadata().actorID, bidId: change.bid,
                    bidderId: bidder, dailyPriceCents: change.price, status: change.status, reason: change.reason,
                    hash: recorded.hash.hexString, previousHash: recorded.previousHash.hexString))
        }
        return (entries, acts)
    }

    static func isAct(_ event: ItemEvent) -> Bool {
        switch event {
        case .takenDown, .suspended, .reinstated, .messageHidden, .reviewHidden: true
        default: false
        }
    }
}
