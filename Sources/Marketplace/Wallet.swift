// The money side of a user's stream: cards on file, deposits, payments and credits.
// The balance is folded from these events; nothing adds to or takes from it otherwise.

/// A card as it may be kept (SPEC §4): never its number or CVV.
public struct CardOnFile: Codable, Hashable, Sendable {
    public var cardID: CardID
    public var network: CardNetwork
    public var last4: String
    public var expMonth: Int
    public var expYear: Int
    /// HMAC-SHA-256 of the number with the server's secret: the same card, recognised.
    public var fingerprint: String
    /// The payment processor's reference for the card, what a charge names.
    public var processorToken: String

    public init(
        cardID: CardID, network: CardNetwork, last4: String, expMonth: Int, expYear: Int, fingerprint: String,
        processorToken: String
    ) {
        self.cardID = cardID
        self.network = network
        self.last4 = last4
        self.expMonth = expMonth
        self.expYear = expYear
        self.fingerprint = fingerprint
        self.processorToken = processorToken
    }

    /// `•••• 4242`.
    public var redacted: String { CardRules.redacted(last4: last4) }

    /// Valid through the last day of its expiry month.
    public func isExpired(on today: Day) -> Bool { (expYear, expMonth) < (today.year, today.month) }
}

public typealias PaymentCardAdded = CardOnFile
extension CardOnFile: EventBody {
    public static let eventType = "PaymentCardAdded"
}

/// The same card added again with another expiry: the card on file is kept, its expiry updated.
public struct PaymentCardExpiryUpdated: EventBody, Hashable {
    public static let eventType = "PaymentCardExpiryUpdated"
    public var cardID: CardID
    public var expMonth: Int
    public var expYear: Int

    public init(cardID: CardID, expMonth: Int, expYear: Int) {
        self.cardID = cardID
        self.expMonth = expMonth
        self.expYear = expYear
    }
}

public struct PaymentCardRemoved: EventBody, Hashable {
    public static let eventType = "PaymentCardRemoved"
    public var cardID: CardID

    public init(cardID: CardID) {
        self.cardID = cardID
    }
}

public struct FundsDeposited: EventBody, Hashable {
    public static let eventType = "FundsDeposited"
    public var amountCents: Int
    public var cardID: CardID
    /// The processor's id of the charge that brought the funds.
    public var chargeID: String

    public init(amountCents: Int, cardID: CardID, chargeID: String) {
        self.amountCents = amountCents
        self.cardID = cardID
        self.chargeID = chargeID
    }
}

/// What a payment from a user's balance or card paid for.
public enum PaymentPurpose: String, Codable, Hashable, Sendable {
    /// Loan shares bought through the cart.
    case checkout
    /// A borrower's repayment of their loan, which the lenders are credited.
    case repayment
}

/// A checkout or a repayment paid from the balance.
public struct BalanceDebited: EventBody, Hashable {
    public static let eventType = "BalanceDebited"
    public var amountCents: Int
    public var reason: PaymentPurpose
    /// The loan repaid (repayments only).
    public var loanID: LoanID?

    public init(amountCents: Int, reason: PaymentPurpose = .checkout, loanID: LoanID? = nil) {
        self.amountCents = amountCents
        self.reason = reason
        self.loanID = loanID
    }
}

/// A checkout or a repayment paid by card: the balance is untouched.
public struct CardCharged: EventBody, Hashable {
    public static let eventType = "CardCharged"
    public var cardID: CardID
    public var amountCents: Int
    public var chargeID: String
    /// Absent in events written before repayments were paid: a checkout.
    public var purpose: PaymentPurpose?
    /// The loan repaid (repayments only).
    public var loanID: LoanID?

    public init(cardID: CardID, amountCents: Int, chargeID: String, purpose: PaymentPurpose = .checkout, loanID: LoanID? = nil) {
        self.cardID = cardID
        self.amountCents = amountCents
        self.chargeID = chargeID
        self.purpose = purpose
        self.loanID = loanID
    }
}

/// A lender's part of a repayment, or a refund of an expired loan, written on the lender's
/// stream in the same append as the loan's event, so the balance folds from one stream.
public struct BalanceCredited: EventBody, Hashable {
    public static let eventType = "BalanceCredited"
    public enum Reason: String, Codable, Hashable, Sendable { case repayment, refund }
    public var amountCents: Int
    public var loanID: LoanID
    public var reason: Reason

    public init(amountCents: Int, loanID: LoanID, reason: Reason) {
        self.amountCents = amountCents
        self.loanID = loanID
        self.reason = reason
    }
}

extension UserDecider {
    public static let depositRange = 500...500_000

    /// The card to charge, if it is on file and not expired; the rule for deposits and card checkouts.
    public static func chargeableCard(_ cardID: CardID, in state: UserState, today: Day) throws -> CardOnFile {
        guard let card = state.cards.first(where: { $0.cardID == cardID }) else {
            throw DomainError.cardNotFound
        }
        guard !card.isExpired(on: today) else {
            throw DomainError(.conflict, "card_expired", "The card expired at the end of \(card.expMonth)/\(card.expYear).")
        }
        return card
    }

    /// A processor's charge is recorded once on a user's stream: money it brought in is never
    /// counted twice, whatever retried.
    public static func checkNewCharge(_ chargeID: String, in state: UserState) throws {
        guard !state.chargeIDs.contains(chargeID) else {
            throw DomainError(.conflict, chargeAlreadyRecorded, "The charge \(chargeID) is already recorded.")
        }
    }

    /// The code of `checkNewCharge`'s refusal: the charge is in the log, so it must not be refunded.
    public static let chargeAlreadyRecorded = "charge_already_recorded"

    /// Checks a deposit before the card is charged, and again when it is recorded.
    public static func checkDeposit(amountCents: Int, cardID: CardID, _ state: UserState, today: Day) throws -> CardOnFile {
        guard state.exists else { throw DomainError.userNotFound }
        guard depositRange.contains(amountCents) else {
            throw DomainError.invalid([
                FieldError(field: "amountCents", code: "invalid_amount", message: "500 to 500000 cents")
            ])
        }
        return try chargeableCard(cardID, in: state, today: today)
    }
}
