import Aggregates
import EventStore
import Marketplace
import Payments
import Projections
import Synchronization

/// Bids: placing one, decided on the item and on its owner's blocks; the commands on a bid
/// (approve, withdraw, reject), decided on the stream of the item it was placed on; and the
/// messages its two parties write on it, decided there too and on the recipient's blocks.
public struct Bidding: Sendable {
    let gateway: CommandGateway
    let items: ItemsView
    let bidItems = BidItems(capacity: 100_000)
    /// Commands on bids, with the money they move.
    public let commands: ItemCommands
    let payments: CardPayments
    /// The fees each rental bid fixes (`RENTER_FEE_BPS`, `OWNER_FEE_BPS`).
    let fees: RentalFees

    public init(gateway: CommandGateway, payments: CardPayments, fees: RentalFees = .standard) {
        self.gateway = gateway
        self.items = ItemsView(gateway.store.pool)
        self.payments = payments
        self.commands = ItemCommands(gateway: gateway, processor: payments.processor)
        self.fees = fees
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
    ///
    /// A rental's bid puts its charge on hold (SPEC §12.2) in the same append: on the balance,
    /// whose available part must cover it (the renter's stream is expected as read), or as a
    /// card authorisation made before it with a key derived from the request, voided when the
    /// append is refused for certain, left to reconciliation when its outcome is unknown.
    public func place(
        _ bid: PlaceBid, on itemID: ItemID, by actor: UserID, today: Day
    ) async throws -> (bid: BidID, append: AppendResult?, event: BidPlaced?, item: PostedItem?) {
        var bid = bid
        bid.fees = fees
        guard case .card(let cardID) = bid.payWith, IdempotentRequest.current?.recorded == nil else {
            return try await place(bid, itemID, actor, today)
        }
        // Decided once with nothing held: nothing is authorised for a bid that would be refused
        // (a blocked bidder's included).
        var reads = StreamReads(gateway: gateway)
        let item = try await reads.load(.item, id: itemID)
        var decided = bid
        if let owner = item.ownerID { decided.isBlockedByOwner = try await reads.load(.user, id: owner).blocked.contains(actor) }
        let events = try Aggregate.item.decide(.placeBid(decided, today: today), item, actor)
        guard case .bidPlaced(let decided)? = events.first, let hold = decided.hold else {
            return try await place(bid, itemID, actor, today)
        }
        let renter = try await reads.load(.user, id: actor)
        try UserDecider.checkHold(hold.amountCents, paying: .card(cardID), renter, today: today)
        let card = try UserDecider.chargeableCard(cardID, in: renter, today: today)
        // Not counted as a card payment attempt: a hold names a card already added (card adds
        // are what card testing needs, 10 an hour), and bids have their own write limit. The
        // count cost a card bid a third of its throughput (1,969/s against 2,811/s).
        let authorization = try await payments.processor.authorize(
            token: card.processorToken, amountCents: hold.amountCents,
            idempotencyKey: CardPayments.chargeKey(actor, purpose: "bid:\(itemID)"))
        Failpoints.hit(.authorizeAfter)
        // The same request's authorisation, voided when its first try was refused: it holds nothing.
        guard !authorization.isVoided, authorization.capturedChargeID == nil else {
            throw DomainError(
                .conflict, "payment_voided",
                "This bid's card hold was released when it was first refused; send it again with a new Idempotency-Key.")
        }
        bid.authorizationID = authorization.id
        do {
            return try await place(bid, itemID, actor, today)
        } catch let error as DomainError where CardPayments.isCertainFailure(error) {
            // Unless a twin of this request placed the bid with this authorisation.
            let (item, _) = try await gateway.load(.item(itemID), .item)
            let held = item.item?.bids.contains { $0.hold?.authorizationID == authorization.id } ?? false
            if !held, try await gateway.recordedTwin(of: IdempotentRequest.current) == nil {
                try? await payments.processor.void(authorizationID: authorization.id)
            }
            throw error
        }
    }

    func place(
        _ bid: PlaceBid, _ itemID: ItemID, _ actor: UserID, _ today: Day
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
            let events = try Aggregate.item.decide(.placeBid(decided, today: today), item, actor)
            // The bid the events name: a repeated request answers the first one's bid.
            guard case .bidPlaced(let placed)? = events.first else {
                throw DomainError.bidNotFound.saying("No bid was placed.")
            }
            event = placed
            if let hold = placed.hold, let payWith = bid.payWith {
                // The renter's money, on their stream, as read: two holds never spend one balance.
                let renter = try await reads.load(.user, id: actor)
                try UserDecider.checkHold(hold.amountCents, paying: payWith, renter, today: today)
                checks.append(
                    try StreamWrite(
                        [UserEvent.rentalHoldPlaced(RentalHoldPlaced(bidID: placed.bidID, itemID: itemID, hold: hold))], to: .user,
                        id: actor))
            }
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
        return try await commands.handle(command, on: itemID, actor: actor).append
    }

    /// Approves a bid. A rental's charge held on a card is captured first, once (its key is the
    /// booking's), and recorded in the approval's append; a capture the processor refuses
    /// rejects the bid (`payment_failed`, its authorisation voided) and answers 409. A capture
    /// whose approval is refused for certain is refunded, unless the log holds it.
    public func approve(_ bidID: BidID, by actor: UserID, today: Day) async throws -> AppendResult? {
        let itemID = try await item(ofBid: bidID)
        if let replayed = try await gateway.replayed(on: .item, id: itemID) { return replayed.append }
        // A bid's hold never changes once placed: one this server knows as not on a card is
        // approved as any command is (from memory first, its append checking the version).
        let (known, _, _) = try await gateway.load(.item(itemID), .item, read: false)
        if let bid = known.item?.bid(bidID), bid.hold?.method != .card {
            return try await commands.handle(.approveBid(bidID, today: today), on: itemID, actor: actor).append
        }
        // A pending card-held bid known here is decided on as known (a stale one fails the
        // approval's append, whose refusal refunds the capture); anything else, as read.
        let state = known.item?.bid(bidID)?.status == .pending ? known : try await gateway.load(.item(itemID), .item).0
        guard let bid = state.item?.bid(bidID), bid.status == .pending, let authorization = bid.hold?.authorizationID else {
            return try await commands.handle(.approveBid(bidID, today: today), on: itemID, actor: actor).append
        }
        // Decided once with nothing captured: nothing is charged for an approval that would fail.
        _ = try Aggregate.item.decide(.approveBid(bidID, today: today, chargeID: ""), state, actor)
        let charge: Charge
        do {
            charge = try await payments.processor.capture(
                authorizationID: authorization, idempotencyKey: ItemCommands.captureKey(bidID))
            guard !charge.isRefunded else { throw DomainError.paymentFailed }
        } catch let error as DomainError where error.code == DomainError.paymentFailed.code {
            // Not this request's command (its key answers 409 again): the bid's end, which
            // releases its hold.
            _ = try? await IdempotentRequest.$current.withValue(nil) {
                try await commands.handle(.rejectBid(bidID, reason: "payment_failed"), on: itemID, actor: actor)
            }
            throw DomainError.paymentFailed
        }
        Failpoints.hit(.captureAfter)
        do {
            return try await commands.handle(.approveBid(bidID, today: today, chargeID: charge.id), on: itemID, actor: actor)
                .append
        } catch let error as DomainError where CardPayments.isCertainFailure(error) {
            // Refunded here only once the bid is decided otherwise (withdrawn, rejected): while
            // it is pending, a twin approval may yet record this same capture (its key is the
            // bid's), and a later one will; reconciliation refunds it if none ever does.
            let (now, _) = try await gateway.load(.item(itemID), .item)
            if let bid = now.item?.bid(bidID), bid.status != .pending, bid.status != .approved {
                do { try await payments.processor.refund(chargeID: charge.id) } catch {
                    gateway.logger.error(
                        "a refund failed; lender payments reconcile will give the charge back",
                        metadata: ["charge": "\(charge.id)", "error": "\(error)"])
                }
            }
            throw error
        }
    }
}

extension DomainError {
    /// The processor would not take a held card's payment at approval.
    public static let paymentFailed = DomainError(
        .conflict, "payment_failed", "The renter's card payment could not be taken; the bid is rejected.")
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
