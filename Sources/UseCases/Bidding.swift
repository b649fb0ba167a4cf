import Aggregates
import EventStore
import Marketplace
import Projections
import Synchronization

/// Bids: placing one, decided on the item and on its owner's blocks; the commands on a bid
/// (approve, withdraw, reject), decided on the stream of the item it was placed on; and the
/// messages its two parties write on it, decided there too and on the recipient's blocks.
public struct Bidding: Sendable {
    let gateway: CommandGateway
    let items: ItemsView
    let bidItems = BidItems(capacity: 100_000)

    public init(gateway: CommandGateway) {
        self.gateway = gateway
        self.items = ItemsView(gateway.store.pool)
    }

    /// The item a bid was placed on, as this server learnt it or from the view.
    func item(ofBid bid: BidID) async throws -> ItemID {
        if let item = bidItems.item(of: bid) { return item }
        let item = try await items.item(ofBid: bid)
        bidItems.store(item, of: bid)
        return item
    }

    /// Places the bid; answers its id (a repeated request: the first one's), the append, and
    /// the event when this call appended it (nil for a repeat answered from its record), with
    /// the item as decided on (its title, kind and photos go in the answer).
    /// Whether the owner has blocked the bidder is the owner's stream's to say: the bid is
    /// decided on the owner's blocks as read, and appended only if the owner's stream is still
    /// at that version (a block committed meanwhile makes it decide again).
    public func place(
        _ bid: PlaceBid, on itemID: ItemID, by actor: UserID
    ) async throws -> (bid: BidID, append: AppendResult?, event: BidPlaced?, item: PostedItem?) {
        // The decision's event, kept beside the recorded outcome (an id), which a repeat answers.
        var event: BidPlaced?
        var decidedOn: PostedItem?
        let (placed, append) = try await gateway.handleAcross("placeBid", actor: actor) {
            (reads: inout StreamReads) -> (writes: [StreamWrite], outcome: BidID) in
            let item = try await reads.load(.item, id: itemID)
            decidedOn = item.item
            var checks = [StreamWrite]()
            var decided = bid
            if let owner = item.ownerID {
                decided.isBlockedByOwner = try await reads.load(.user, id: owner).blocked.contains(actor)
                checks.append(try StreamWrite([UserEvent](), to: .user, id: owner))
            }
            let events = try Aggregate.item.decide(.placeBid(decided), item, actor)
            // The bid the events name: a repeated request answers the first one's bid.
            guard case .bidPlaced(let placed)? = events.first else {
                throw DomainError.bidNotFound.saying("No bid was placed.")
            }
            event = placed
            return ([try StreamWrite(events, to: .item, id: itemID)] + checks, placed.bidID)
        }
        let appended = append?.recordedAt == nil ? nil : event.flatMap { $0.bidID == placed ? $0 : nil }
        bidItems.store(itemID, of: placed)
        return (placed, append, appended, decidedOn)
    }

    /// Writes to the other party of a bid; answers the message's id and the append. Like a
    /// bid, decided on the recipient's blocks as read and appended only if they still hold.
    public func send(_ message: SendMessage, by actor: UserID) async throws -> (message: MessageID, append: AppendResult?) {
        let itemID = try await item(ofBid: message.bidID)
        let (sent, append) = try await gateway.handleAcross("sendMessage", actor: actor) {
            (reads: inout StreamReads) -> (writes: [StreamWrite], outcome: MessageID) in
            let item = try await reads.load(.item, id: itemID)
            var checks = [StreamWrite]()
            var decided = message
            if let owner = item.ownerID, let bid = item.item?.bid(message.bidID) {
                let recipient = actor == owner ? bid.bidderID : owner
                decided.isBlockedByRecipient = try await reads.load(.user, id: recipient).blocked.contains(actor)
                checks.append(try StreamWrite([UserEvent](), to: .user, id: recipient))
            }
            let events = try Aggregate.item.decide(.sendMessage(decided), item, actor)
            guard case .messageSent(let sent)? = events.first else {
                throw DomainError.bidNotFound.saying("No message was sent.")
            }
            return ([try StreamWrite(events, to: .item, id: itemID)] + checks, sent.messageID)
        }
        return (sent, append)
    }

    /// A command on a bid, decided on its item's stream.
    public func decide(_ command: ItemCommand, onBid bidID: BidID, by actor: UserID) async throws -> AppendResult? {
        let itemID = try await item(ofBid: bidID)
        return try await gateway.handle(command, on: .item, id: itemID, actor: actor).append
    }
}

/// Which item each bid is on: a bid never moves to another item, so what was read once (or
/// placed here) holds for good, and a command on a bid need not ask the view again. At
/// capacity it starts again empty, as `StreamStates` does.
final class BidItems: Sendable {
    private let capacity: Int
    private let entries = Mutex<[BidID: ItemID]>([:])

    init(capacity: Int) { self.capacity = capacity }

    func item(of bid: BidID) -> ItemID? { entries.withLock { $0[bid] } }

    func store(_ item: ItemID, of bid: BidID) {
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[bid] = item
        }
    }
}
