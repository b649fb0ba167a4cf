import Aggregates
import EventStore
import Foundation
import Marketplace
import Payments
import Postgres

/// A user's cards and deposits. A card's number reaches the processor and the fingerprint,
/// and no event, table or log line.
public struct Wallet: Sendable {
    public let gateway: CommandGateway
    let payments: CardPayments
    let fingerprinter: CardFingerprinter

    public init(gateway: CommandGateway, payments: CardPayments, fingerprinter: CardFingerprinter) {
        self.gateway = gateway
        self.payments = payments
        self.fingerprinter = fingerprinter
    }

    /// The card as the command left it, and whether it was added (false: it was on file).
    public struct CardAdded: Sendable {
        public var card: CardOnFile
        public var added: Bool
        public var append: AppendResult?
    }

    public func addCard(_ card: ValidatedCard, for me: UserID) async throws -> CardAdded {
        let fingerprint = fingerprinter.fingerprint(card)
        // A repeat answers the first request's card, and registers nothing, counts nothing.
        if let handled = try await gateway.replayed(on: .user, id: me) { return try added(handled, fingerprint) }
        let (state, version) = try await gateway.load(.user(me), .user)
        // A card already on file is not registered with the processor again.
        let token: String
        if let known = state.cards.first(where: { $0.fingerprint == fingerprint }) {
            token = known.processorToken
        } else {
            try await payments.limits.reserve(.cardAdd, for: me)
            token = try await payments.processor.register(card)
        }
        let onFile = CardOnFile(
            cardID: CardID(), network: card.network, last4: card.last4, expMonth: card.expMonth, expYear: card.expYear,
            fingerprint: fingerprint, processorToken: token)
        let handled = try await gateway.handle(
            .addCard(onFile), on: .user, id: me, actor: me, first: .loaded(state, version: version))
        return try added(handled, fingerprint)
    }

    func added(_ handled: Handled<UserState, UserEvent>, _ fingerprint: String) throws -> CardAdded {
        // Only a repeat of a request that found the card on file, after it was removed since.
        guard let kept = handled.state.cards.first(where: { $0.fingerprint == fingerprint }) else {
            throw DomainError.cardNotFound.saying("The card is no longer on file.")
        }
        let added = handled.events.contains { if case .cardAdded = $0 { true } else { false } }
        return CardAdded(card: kept, added: added, append: handled.append)
    }

    public func removeCard(_ cardID: CardID, for me: UserID) async throws -> AppendResult? {
        try await gateway.handle(.removeCard(cardID), on: .user, id: me, actor: me).append
    }

    /// What a deposit recorded, and the balance after it.
    public struct Deposited: Sendable {
        public var deposit: FundsDeposited
        public var balanceCents: Int
        /// The balance less what rental bids hold of it.
        public var availableCents: Int
        public var append: AppendResult?
    }

    public func deposit(_ amount: Int, from cardID: CardID, for me: UserID, today: Day) async throws -> Deposited {
        let handled: Handled<UserState, UserEvent>
        if let replayed = try await gateway.replayed(on: .user, id: me) {
            handled = replayed
        } else {
            // The rules first, so that nothing is charged for a deposit that would be refused.
            let (state, version) = try await gateway.load(.user(me), .user)
            let card = try UserDecider.checkDeposit(amountCents: amount, cardID: cardID, state, today: today)
            handled = try await payments.pay(amount, with: card, for: me, purpose: "deposit") { charge in
                try await gateway.handle(
                    .deposit(amountCents: amount, cardID: cardID, chargeID: charge.id, today: today), on: .user, id: me,
                    actor: me, first: .loaded(state, version: version))
            }
        }
        guard case .fundsDeposited(let deposited)? = handled.events.first else {
            throw DepositNotRecorded()
        }
        return Deposited(
            deposit: deposited, balanceCents: handled.state.balanceCents, availableCents: handled.state.availableCents,
            append: handled.append)
    }

    /// A deposit whose command appended no deposit: a defect, never a client's fault.
    struct DepositNotRecorded: Error {}
}
