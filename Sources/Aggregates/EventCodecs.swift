import EventStore
import Marketplace

/// A domain event whose case does not wrap exactly one payload: a defect of the domain's enum.
public enum EventEncodingError: Error, Hashable {
    case notOnePayload(String)
}

extension EventCodec {
    /// Registers a domain event's body under its own name (`EventBody.eventType`).
    mutating func register<Body: EventBody>(_ body: Body.Type, wrap: @escaping @Sendable (Body) -> Event) {
        register(body, as: Body.eventType, wrap: wrap)
    }
}

/// Maps an aggregate's events to the log and back. Each domain event is an enum case that
/// wraps one payload, so encoding takes the payload out of the case: an event type is named
/// once here, at its registration, and nowhere else outside the domain.
public struct DomainCodec<Event: Sendable>: Sendable {
    public let codec: EventCodec<Event>

    init(_ codec: EventCodec<Event>) { self.codec = codec }

    /// Throws, never stores, for a case that wraps no registered payload (`EncodingTests`
    /// encode and decode one event of every case).
    public func encode(_ event: Event) throws -> NewEvent {
        let children = Mirror(reflecting: event).children
        guard children.count == 1, let payload = children.first?.value as? any EventBody else {
            throw EventEncodingError.notOnePayload("\(Event.self).\(event)")
        }
        return try codec.encode(payload)
    }

    public func decode(_ event: RecordedEvent) throws -> Event { try codec.decode(event) }

    public func decode(_ event: ProjectedEvent) throws -> Event {
        try codec.decode(type: event.type, schemaVersion: event.schemaVersion, data: event.data)
    }
}

extension DomainCodec where Event == UserEvent {
    public static let user: DomainCodec = {
        var codec = EventCodec<UserEvent>()
        codec.register(UserRegistered.self, wrap: UserEvent.registered)
        codec.register(ProfileUpdated.self, wrap: UserEvent.profileUpdated)
        codec.register(UserBlocked.self, wrap: UserEvent.blocked)
        codec.register(UserUnblocked.self, wrap: UserEvent.unblocked)
        codec.register(PaymentCardAdded.self, wrap: UserEvent.cardAdded)
        codec.register(PaymentCardExpiryUpdated.self, wrap: UserEvent.cardExpiryUpdated)
        codec.register(PaymentCardRemoved.self, wrap: UserEvent.cardRemoved)
        codec.register(FundsDeposited.self, wrap: UserEvent.fundsDeposited)
        codec.register(BalanceDebited.self, wrap: UserEvent.balanceDebited)
        codec.register(CardCharged.self, wrap: UserEvent.cardCharged)
        codec.register(BalanceCredited.self, wrap: UserEvent.balanceCredited)
        return DomainCodec(codec)
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
        return DomainCodec(codec)
    }()
}

extension DomainCodec where Event == LoanEvent {
    public static let loan: DomainCodec = {
        var codec = EventCodec<LoanEvent>()
        codec.register(LoanPosted.self, wrap: LoanEvent.posted)
        codec.register(LoanSharePurchased.self, wrap: LoanEvent.sharePurchased)
        codec.register(LoanFunded.self, wrap: LoanEvent.funded)
        codec.register(LoanRepaymentRecorded.self, wrap: LoanEvent.repaymentRecorded)
        codec.register(LoanRepaid.self, wrap: LoanEvent.repaid)
        codec.register(LoanExpired.self, wrap: LoanEvent.expired)
        return DomainCodec(codec)
    }()
}

extension DomainCodec where Event == CartEvent {
    public static let cart: DomainCodec = {
        var codec = EventCodec<CartEvent>()
        codec.register(CartItemAdded.self, wrap: CartEvent.itemAdded)
        codec.register(CartItemAmountChanged.self, wrap: CartEvent.amountChanged)
        codec.register(CartItemRemoved.self, wrap: CartEvent.itemRemoved)
        codec.register(CartCleared.self, wrap: CartEvent.cleared)
        codec.register(CartCheckedOut.self, wrap: CartEvent.checkedOut)
        return DomainCodec(codec)
    }()
}
