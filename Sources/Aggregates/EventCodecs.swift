import EventStore
import Marketplace

/// A domain event whose case does not wrap exactly one payload: a defect of the domain's enum.
public enum EventEncodingError: Error, Hashable {
    case notOnePayload(String)
}

extension EventCodec {
    /// Registers a domain event's body under its own name (`EventBody.eventType`).
    mutating func register<Body: EventBody>(
        _ body: Body.Type, personal: [PersonalField] = [], wrap: @escaping @Sendable (Body) -> Event
    ) {
        register(body, as: Body.eventType, personal: personal, wrap: wrap)
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
        let encoded = try codec.encode(payload)
        // What the inline projections read, without decoding it again.
        encoded.decoded.keep(event, of: encoded.data.text)
        return encoded
    }

    public func decode(_ event: RecordedEvent) throws -> Event { try codec.decode(event) }

    /// Decoded once for all the projections of a batch that read it.
    public func decode(_ event: ProjectedEvent) throws -> Event {
        try event.decoded.value(of: event.data.text, as: Event.self) {
            try codec.decode(type: event.type, schemaVersion: event.schemaVersion, data: event.data)
        }
    }
}

extension DomainCodec where Event == UserEvent {
    public static let user: DomainCodec = {
        var codec = EventCodec<UserEvent>()
        codec.register(
            UserRegistered.self,
            personal: [
                .init("displayName", of: .stream, redacted: .string(Redacted.name)),
                .init("email", of: .stream, redacted: .string(Redacted.text)), .init("country", of: .stream, redacted: .null),
            ], wrap: UserEvent.registered)
        codec.register(UserForgotten.self, wrap: UserEvent.forgotten)
        codec.register(
            ProfileUpdated.self,
            personal: [
                .init("displayName", of: .stream, redacted: .string(Redacted.name)), .init("country", of: .stream, redacted: .null),
            ], wrap: UserEvent.profileUpdated)
        codec.register(UserBlocked.self, wrap: UserEvent.blocked)
        codec.register(UserUnblocked.self, wrap: UserEvent.unblocked)
        codec.register(
            PaymentCardAdded.self,
            personal: [
                .init("fingerprint", of: .stream, redacted: .string(Redacted.text)),
                .init("processorToken", of: .stream, redacted: .string(Redacted.text)),
            ], wrap: UserEvent.cardAdded)
        codec.register(PaymentCardExpiryUpdated.self, wrap: UserEvent.cardExpiryUpdated)
        codec.register(PaymentCardRemoved.self, wrap: UserEvent.cardRemoved)
        codec.register(FundsDeposited.self, wrap: UserEvent.fundsDeposited)
        codec.register(BalanceDebited.self, wrap: UserEvent.balanceDebited)
        codec.register(CardCharged.self, wrap: UserEvent.cardCharged)
        codec.register(BalanceCredited.self, wrap: UserEvent.balanceCredited)
        codec.register(
            ProfilePhotoChanged.self, personal: [.init("digest", of: .stream, redacted: .null)], wrap: UserEvent.photoChanged)
        codec.register(RentalHoldPlaced.self, wrap: UserEvent.rentalHoldPlaced)
        codec.register(RentalHoldReleased.self, wrap: UserEvent.rentalHoldReleased)
        codec.register(RentalPaid.self, wrap: UserEvent.rentalPaid)
        codec.register(RentalRefunded.self, wrap: UserEvent.rentalRefunded)
        codec.register(RentalEarned.self, wrap: UserEvent.rentalEarned)
        codec.register(EmailVerified.self, wrap: UserEvent.emailVerified)
        codec.register(PasswordChanged.self, wrap: UserEvent.passwordChanged)
        codec.register(
            PayoutMethodSet.self, personal: [.init("token", of: .stream, redacted: .string(Redacted.text))],
            wrap: UserEvent.payoutMethodSet)
        codec.register(
            PayoutRequested.self, personal: [.init("token", of: .stream, redacted: .string(Redacted.text))],
            wrap: UserEvent.payoutRequested)
        codec.register(PayoutSent.self, wrap: UserEvent.payoutSent)
        codec.register(PayoutFailed.self, wrap: UserEvent.payoutFailed)
        // An operator's words on how they checked someone: theirs to forget with them.
        codec.register(
            IdentityVerified.self, personal: [.init("reason", of: .stream, redacted: .string(Redacted.text))],
            wrap: UserEvent.identityVerified)
        codec.register(BalanceSettled.self, wrap: UserEvent.balanceSettled)
        codec.register(UserSuspended.self, wrap: UserEvent.suspended)
        codec.register(UserReinstated.self, wrap: UserEvent.reinstated)
        return DomainCodec(codec)
    }()
}

extension DomainCodec where Event == ItemEvent {
    public static let item: DomainCodec = {
        var codec = EventCodec<ItemEvent>()
        codec.register(RentalPosted.self, personal: Redacted.posting(of: .field("ownerID")), wrap: ItemEvent.rentalPosted)
        codec.register(RequestPosted.self, personal: Redacted.posting(of: .field("ownerID")), wrap: ItemEvent.requestPosted)
        // Only the owner revises an item.
        codec.register(ItemRevised.self, personal: Redacted.posting(of: .actor), wrap: ItemEvent.revised)
        codec.register(ItemWithdrawn.self, wrap: ItemEvent.withdrawn)
        codec.register(
            BidPlaced.self, personal: [.init("message", of: .field("bidderID"), redacted: .string(Redacted.text))],
            wrap: ItemEvent.bidPlaced)
        codec.register(BidWithdrawn.self, wrap: ItemEvent.bidWithdrawn)
        codec.register(BidRejected.self, wrap: ItemEvent.bidRejected)
        codec.register(BidApproved.self, wrap: ItemEvent.bidApproved)
        codec.register(ItemReserved.self, wrap: ItemEvent.reserved)
        codec.register(ItemClosed.self, wrap: ItemEvent.closed)
        codec.register(ItemRelisted.self, wrap: ItemEvent.relisted)
        codec.register(
            ReviewWritten.self, personal: [.init("text", of: .field("authorID"), redacted: .string(Redacted.text))],
            wrap: ItemEvent.reviewWritten)
        codec.register(
            MessageSent.self, personal: [.init("text", of: .field("authorID"), redacted: .string(Redacted.text))],
            wrap: ItemEvent.messageSent)
        codec.register(ItemPhotoAdded.self, wrap: ItemEvent.photoAdded)
        codec.register(ItemPhotoRemoved.self, wrap: ItemEvent.photoRemoved)
        codec.register(BookingConfirmed.self, wrap: ItemEvent.bookingConfirmed)
        codec.register(BookingCompleted.self, wrap: ItemEvent.bookingCompleted)
        codec.register(BookingReminded.self, wrap: ItemEvent.bookingReminded)
        codec.register(
            BookingCancelled.self, personal: [.init("reason", of: .field("cancelledBy"), redacted: .string(Redacted.text))],
            wrap: ItemEvent.bookingCancelled)
        codec.register(BlackoutAdded.self, wrap: ItemEvent.blackoutAdded)
        codec.register(BlackoutRemoved.self, wrap: ItemEvent.blackoutRemoved)
        codec.register(ItemWindowRevised.self, wrap: ItemEvent.windowRevised)
        codec.register(ItemExpired.self, wrap: ItemEvent.expired)
        codec.register(ItemTakenDown.self, wrap: ItemEvent.takenDown)
        codec.register(ItemSuspended.self, wrap: ItemEvent.suspended)
        codec.register(ItemReinstated.self, wrap: ItemEvent.reinstated)
        codec.register(DepositReleased.self, wrap: ItemEvent.depositReleased)
        // The parties' own words are theirs: sealed with the writer's key.
        codec.register(
            DepositClaimed.self, personal: [.init("text", of: .actor, redacted: .string(Redacted.text))],
            wrap: ItemEvent.depositClaimed)
        codec.register(
            DisputeOpened.self, personal: [.init("text", of: .actor, redacted: .string(Redacted.text))],
            wrap: ItemEvent.disputeOpened)
        codec.register(DisputeResolved.self, wrap: ItemEvent.disputeResolved)
        codec.register(MessageHidden.self, wrap: ItemEvent.messageHidden)
        codec.register(ReviewHidden.self, wrap: ItemEvent.reviewHidden)
        codec.register(ReviewsPublished.self, wrap: ItemEvent.reviewsPublished)
        codec.register(ReviewWindowClosed.self, wrap: ItemEvent.reviewWindowClosed)
        codec.register(SavedSearchesMatched.self, wrap: ItemEvent.savedSearchesMatched)
        return DomainCodec(codec)
    }()
}

extension DomainCodec where Event == LoanEvent {
    public static let loan: DomainCodec = {
        var codec = EventCodec<LoanEvent>()
        codec.register(LoanPosted.self, personal: Redacted.posting(of: .field("borrowerID")), wrap: LoanEvent.posted)
        codec.register(LoanSharePurchased.self, wrap: LoanEvent.sharePurchased)
        codec.register(LoanFunded.self, wrap: LoanEvent.funded)
        codec.register(LoanRepaymentRecorded.self, wrap: LoanEvent.repaymentRecorded)
        codec.register(LoanRepaid.self, wrap: LoanEvent.repaid)
        codec.register(LoanExpired.self, wrap: LoanEvent.expired)
        // Only the borrower adds or removes their loan's photos.
        codec.register(
            LoanPhotoAdded.self, personal: [.init("digest", of: .actor, redacted: .null)], wrap: LoanEvent.photoAdded)
        codec.register(
            LoanPhotoRemoved.self, personal: [.init("digest", of: .actor, redacted: .null)], wrap: LoanEvent.photoRemoved)
        codec.register(LoanTakenDown.self, wrap: LoanEvent.takenDown)
        codec.register(LoanSuspended.self, wrap: LoanEvent.suspended)
        codec.register(LoanReinstated.self, wrap: LoanEvent.reinstated)
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

/// What a forgotten person's sealed fields read as (SPEC §11.3).
public enum Redacted {
    public static let name = "former user"
    public static let text = "[removed]"
    /// No place: views of a forgotten person's items and loans show it at 0, 0.
    public static let location: JSONValue = .object(["lat": .int(0), "lng": .int(0), "place": .string(text)])

    /// A posting's place and its texts (issue 48: "call me on 555-0100" in a description).
    static func posting(of subject: PersonalField.Subject) -> [PersonalField] {
        [
            .init("location", of: subject, redacted: location), .init("title", of: subject, redacted: .string(text)),
            .init("description", of: subject, redacted: .string(text)),
        ]
    }
}

/// The personal fields of every event the server writes (SPEC §11.3): e-mail, display name,
/// country, where a person keeps or needs things and where a borrower works, the titles and
/// descriptions they post (free text: a phone number, a name), what a bidder wrote in a bid,
/// a review or a message, card fingerprints and processor tokens, and which photo is a
/// person's own or their loan's (often of themselves). Amounts, ids, statuses, categories and
/// handles stay clear (a handle stays reserved; it shows as `former user`). Events written
/// before 0.3.0 hold their titles and descriptions clear in the log; the views remove them
/// all the same.
public let lenderPersonalFields: [String: [PersonalField]] = DomainCodec.user.codec.personalFields
    .merging(DomainCodec.item.codec.personalFields) { $1 }
    .merging(DomainCodec.loan.codec.personalFields) { $1 }
    .merging(DomainCodec.cart.codec.personalFields) { $1 }
    .merging(DomainCodec.report.codec.personalFields) { $1 }

/// Every event type the server writes, of every aggregate: what a webhook may subscribe to.
public let lenderEventTypes: Set<String> = DomainCodec.user.codec.types
    .union(DomainCodec.item.codec.types)
    .union(DomainCodec.loan.codec.types)
    .union(DomainCodec.cart.codec.types)
    .union(DomainCodec.report.codec.types)

extension DomainCodec where Event == ReportEvent {
    public static let report: DomainCodec = {
        var codec = EventCodec<ReportEvent>()
        codec.register(
            ReportFiled.self, personal: [.init("text", of: .field("reporterID"), redacted: .string(Redacted.text))],
            wrap: ReportEvent.filed)
        codec.register(ReportResolved.self, wrap: ReportEvent.resolved)
        return DomainCodec(codec)
    }()
}

extension UserID {
    /// The name of this user's data key.
    public var dataSubject: String { description }
}
