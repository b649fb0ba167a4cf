import EventStore
import Marketplace

// The log's names for the domain's events: each payload's `eventType`, schema version 1.
extension UserRegistered: EventPayload {}
extension ProfileUpdated: EventPayload {}
extension UserBlocked: EventPayload {}
extension UserUnblocked: EventPayload {}
extension RentalPosted: EventPayload {}
extension RequestPosted: EventPayload {}
extension ItemRevised: EventPayload {}
extension ItemWithdrawn: EventPayload {}
extension BidPlaced: EventPayload {}
extension BidWithdrawn: EventPayload {}
extension BidRejected: EventPayload {}
extension BidApproved: EventPayload {}
extension ItemReserved: EventPayload {}
extension ItemClosed: EventPayload {}
extension ItemRelisted: EventPayload {}

/// Maps an aggregate's events to the log and back.
public struct DomainCodec<Event: Sendable>: Sendable {
    public let codec: EventCodec<Event>
    public let encode: @Sendable (Event) throws -> NewEvent
}

extension DomainCodec where Event == UserEvent {
    public static let user: DomainCodec = {
        var codec = EventCodec<UserEvent>()
        codec.register(UserRegistered.self, wrap: UserEvent.registered)
        codec.register(ProfileUpdated.self, wrap: UserEvent.profileUpdated)
        codec.register(UserBlocked.self, wrap: UserEvent.blocked)
        codec.register(UserUnblocked.self, wrap: UserEvent.unblocked)
        return DomainCodec(codec: codec) { [codec] event in
            switch event {
            case .registered(let payload): try codec.encode(payload)
            case .profileUpdated(let payload): try codec.encode(payload)
            case .blocked(let payload): try codec.encode(payload)
            case .unblocked(let payload): try codec.encode(payload)
            }
        }
    }()
}

extension DomainCodec where Event == ItemEvent {
    public static let item: DomainCodec = {
        var codec = EventCodec<ItemEvent>()
        codec.register(RentalPosted.self, wrap: ItemEvent.rentalPosted)
        codec.register(RequestPosted.self, wrap: ItemEvent.requestPosted)
        codec.register(ItemRevised.self, wrap: ItemEvent.revised)
        codec.register(ItemWithdrawn.self, wrap: ItemEvent.withdrawn)
        codec.register(BidPlaced.self, wrap: ItemEvent.bidPlaced)
        codec.register(BidWithdrawn.self, wrap: ItemEvent.bidWithdrawn)
        codec.register(BidRejected.self, wrap: ItemEvent.bidRejected)
        codec.register(BidApproved.self, wrap: ItemEvent.bidApproved)
        codec.register(ItemReserved.self, wrap: ItemEvent.reserved)
        codec.register(ItemClosed.self, wrap: ItemEvent.closed)
        codec.register(ItemRelisted.self, wrap: ItemEvent.relisted)
        return DomainCodec(codec: codec) { [codec] event in
            switch event {
            case .rentalPosted(let payload): try codec.encode(payload)
            case .requestPosted(let payload): try codec.encode(payload)
            case .revised(let payload): try codec.encode(payload)
            case .withdrawn(let payload): try codec.encode(payload)
            case .bidPlaced(let payload): try codec.encode(payload)
            case .bidWithdrawn(let payload): try codec.encode(payload)
            case .bidRejected(let payload): try codec.encode(payload)
            case .bidApproved(let payload): try codec.encode(payload)
            case .reserved(let payload): try codec.encode(payload)
            case .closed(let payload): try codec.encode(payload)
            case .relisted(let payload): try codec.encode(payload)
            }
        }
    }()
}
