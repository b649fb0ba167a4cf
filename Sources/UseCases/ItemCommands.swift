import Aggregates
import EventStore
import Logging
import Marketplace
import Payments

/// Commands on an item's stream, with the money they move (SPEC §12.2): a bid that ends
/// releases its hold, an approval captures it into escrow, a completion or a cancellation
/// settles it. The moves are decided from the item's events (`RentalMoney`) and appended on
/// the users' streams in the same append; the processor is told afterwards what the log
/// decided (an authorisation voided, a card refunded), with keys that make a retry, or
/// `lender payments reconcile` after a crash, do it once.
public struct ItemCommands: Sendable {
    let gateway: CommandGateway
    /// Nil where none is at hand (a forgetting's withdrawals): reconciliation voids then.
    let processor: (any PaymentProcessor)?

    public init(gateway: CommandGateway, processor: (any PaymentProcessor)?) {
        self.gateway = gateway
        self.processor = processor
    }

    public func handle(
        _ command: ItemCommand, on itemID: ItemID, actor: UserID, metadata: EventMetadata = EventMetadata()
    ) async throws -> Handled<ItemState, ItemEvent> {
        var moves = [(user: UserID, event: UserEvent)]()
        let handled = try await gateway.handle(
            command, on: .item, id: itemID, actor: actor, metadata: metadata,
            consequences: { state, events in
                moves = RentalMoney.moves(of: events, on: state)
                return try Self.writes(moves)
            })
        if handled.append != nil { await settle(moves) }
        return handled
    }

    /// The moves, one write a user, in order.
    static func writes(_ moves: [(user: UserID, event: UserEvent)]) throws -> [StreamWrite] {
        var order = [UserID]()
        var byUser = [UserID: [UserEvent]]()
        for move in moves {
            if byUser[move.user] == nil { order.append(move.user) }
            byUser[move.user, default: []].append(move.event)
        }
        return try order.map { try StreamWrite(byUser[$0]!, to: .user, id: $0, checked: false) }
    }

    /// What the processor must do for what the log now holds. A failure here leaves it to
    /// `lender payments reconcile`, which finds the same work from the log.
    func settle(_ moves: [(user: UserID, event: UserEvent)]) async {
        guard let processor else { return }
        for (_, event) in moves {
            do {
                switch event {
                case .rentalHoldReleased(let released):
                    if let authorization = released.hold.authorizationID { try await processor.void(authorizationID: authorization) }
                case .rentalRefunded(let refund):
                    if let charge = refund.chargeID {
                        try await processor.refund(
                            chargeID: charge, amountCents: refund.amountCents, idempotencyKey: Self.refundKey(refund.bookingID))
                    }
                default:
                    break
                }
            } catch {
                gateway.logger.error(
                    "the processor was not told; lender payments reconcile will do it",
                    metadata: ["event": "\(event)", "error": "\(error)"])
            }
        }
    }

    /// A booking is refunded once, so its refund's key is the booking's.
    public static func refundKey(_ booking: BookingID) -> String { "refund:\(booking)" }
    /// A bid's authorisation is captured once, by the booking it becomes.
    public static func captureKey(_ booking: BookingID) -> String { "capture:\(booking)" }
}
