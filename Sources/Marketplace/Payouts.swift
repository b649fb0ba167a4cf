import Foundation

public enum PayoutTag {}
public typealias PayoutID = Identifier<PayoutTag>

/// Where a user's payouts go: a processor's token for a bank account (never its number).
public struct PayoutMethodSet: EventBody, Hashable {
    public static let eventType = "PayoutMethodSet"
    public var kind: String
    /// Personal: sealed with the user's key.
    public var token: String

    public init(kind: String = "bank_account", token: String) {
        self.kind = kind
        self.token = token
    }
}

/// A payout's amount leaves the balance, before any money moves: two payouts, or a payout and
/// a checkout, can never spend the same cents. The transfer follows, keyed by the payout's id.
public struct PayoutRequested: EventBody, Hashable {
    public static let eventType = "PayoutRequested"
    public var payoutID: PayoutID
    public var amountCents: Int
    /// When it was asked for (the decider's clock): the day's attempts and the 30 days'
    /// total are counted from it.
    public var requestedAt: Date
    /// Where it goes, fixed when it is asked for (personal: sealed with the user's key): a
    /// method changed before the transfer does not move it.
    public var token: String?

    public init(payoutID: PayoutID, amountCents: Int, requestedAt: Date, token: String?) {
        self.payoutID = payoutID
        self.amountCents = amountCents
        self.requestedAt = requestedAt
        self.token = token
    }
}

/// An operator settled what a user's balance held outside Lender (a balance under the
/// smallest payout, say, before they are forgotten): the money leaves the platform, recorded.
public struct BalanceSettled: EventBody, Hashable {
    public static let eventType = "BalanceSettled"
    public var amountCents: Int
    /// The operator, and why.
    public var settledBy: String
    public var reason: String

    public init(amountCents: Int, settledBy: String, reason: String) {
        self.amountCents = amountCents
        self.settledBy = settledBy
        self.reason = reason
    }
}

/// The processor made the transfer.
public struct PayoutSent: EventBody, Hashable {
    public static let eventType = "PayoutSent"
    public var payoutID: PayoutID
    public var amountCents: Int
    public var transferID: String

    public init(payoutID: PayoutID, amountCents: Int, transferID: String) {
        self.payoutID = payoutID
        self.amountCents = amountCents
        self.transferID = transferID
    }
}

/// The transfer failed (or was never made): the amount is back in the balance.
public struct PayoutFailed: EventBody, Hashable {
    public static let eventType = "PayoutFailed"
    public var payoutID: PayoutID
    public var amountCents: Int
    public var reason: String

    public init(payoutID: PayoutID, amountCents: Int, reason: String) {
        self.payoutID = payoutID
        self.amountCents = amountCents
        self.reason = reason
    }
}

/// An operator checked who the user is (`lender users verify-identity`): larger payouts may go.
public struct IdentityVerified: EventBody, Hashable {
    public static let eventType = "IdentityVerified"
    /// The operator: as the command line names them, or `operator:{id}` from the desk and the API.
    public var verifiedBy: String
    /// What the operator checked, when they said (the CLI's events have none).
    public var reason: String?

    public init(verifiedBy: String, reason: String? = nil) {
        self.verifiedBy = verifiedBy
        self.reason = reason
    }
}

public enum PayoutStatus: String, Codable, Hashable, Sendable { case pending, sent, failed }

/// A payout as the user's stream knows it.
public struct Payout: Hashable, Sendable {
    public var id: PayoutID
    public var amountCents: Int
    public var requestedAt: Date
    public var status: PayoutStatus
    public var transferID: String?
    /// The account it goes to (nil in a log that did not say: the method's at the time).
    public var token: String?
}

/// What the payouts' rules need from outside the stream: the clock and the operator's limit.
public struct PayoutRequest: Hashable, Sendable {
    public var payoutID: PayoutID
    public var amountCents: Int
    public var now: Date
    /// `PAYOUT_VERIFY_ABOVE_CENTS`: 30 days' payouts over it need a verified identity.
    public var verifyAboveCents: Int

    public init(payoutID: PayoutID = PayoutID(), amountCents: Int, now: Date, verifyAboveCents: Int) {
        self.payoutID = payoutID
        self.amountCents = amountCents
        self.now = now
        self.verifyAboveCents = verifyAboveCents
    }
}

/// The transfer's outcome, as the processor said.
public enum PayoutOutcome: Hashable, Sendable {
    case sent(transferID: String)
    case failed(reason: String)
}

extension UserDecider {
    public static let payoutAmounts = 1_000...10_000_000
    public static let payoutsPerDay = 5
    public static let payoutVerificationDays = 30
    public static let defaultPayoutVerifyAboveCents = 100_000

    /// An account number must never reach the server: 8 digits in a row are refused, whatever
    /// else the token holds (an IBAN, a sort code and account, a bare number).
    public static func payoutTokenProblems(_ token: String) -> [FieldError] {
        var run = 0
        for byte in token.utf8 {
            run = (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) ? run + 1 : 0
            if run >= 8 {
                return [
                    FieldError(
                        field: "token", code: "raw_account_number",
                        message: "an account number; send the processor's token for it, made on the device")
                ]
            }
        }
        guard (1...200).contains(token.utf8.count), token.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 }) else {
            return [FieldError(field: "token", code: "invalid_token", message: "a processor's token of 1 to 200 printable ASCII characters")]
        }
        return []
    }

    static func decidePayout(_ request: PayoutRequest, _ state: UserState) throws -> [UserEvent] {
        guard state.exists else { throw DomainError.userNotFound }
        guard payoutAmounts.contains(request.amountCents) else {
            throw DomainError.invalid([
                FieldError(field: "amountCents", code: "invalid_amount", message: "a whole number of cents from 1,000 to 10,000,000")
            ])
        }
        guard state.emailVerified else {
            throw DomainError(
                .forbidden, "email_unverified", "Confirm your e-mail address first: POST /v1/me/email-verification mails you a code.")
        }
        guard state.payoutToken != nil else {
            throw DomainError(.conflict, "payout_method_missing", "Add a bank account first: PUT /v1/me/payout-method.")
        }
        let lastDay = state.payouts.filter { $0.requestedAt > request.now.addingTimeInterval(-86_400) }
        guard lastDay.count < payoutsPerDay else {
            throw DomainError(.tooOften, "too_many_payout_attempts", "At most \(payoutsPerDay) payouts a day.")
        }
        let window = request.now.addingTimeInterval(-Double(payoutVerificationDays) * 86_400)
        let recent = state.payouts.filter { $0.status != .failed && $0.requestedAt > window }.reduce(0) { $0 + $1.amountCents }
        guard state.identityVerified || recent + request.amountCents <= request.verifyAboveCents else {
            throw DomainError(
                .forbidden, "identity_unverified",
                "Payouts over \(request.verifyAboveCents) cents in \(payoutVerificationDays) days need your identity checked first.")
        }
        guard request.amountCents <= state.availableCents else {
            throw DomainError(
                .conflict, "insufficient_funds",
                "You have \(state.availableCents) cents available (the balance less what rental bids hold).")
        }
        guard !state.payouts.contains(where: { $0.id == request.payoutID }) else { return [] }
        return [
            .payoutRequested(
                PayoutRequested(
                    payoutID: request.payoutID, amountCents: request.amountCents, requestedAt: request.now, token: state.payoutToken))
        ]
    }

    /// The transfer's outcome, once: a payout already sent or failed is left as it is (a retry
    /// and reconciliation may both record it).
    static func decidePayoutOutcome(_ payoutID: PayoutID, _ outcome: PayoutOutcome, _ state: UserState) throws -> [UserEvent] {
        guard let payout = state.payouts.first(where: { $0.id == payoutID }) else {
            throw DomainError(.notFound, "payout_not_found", "No such payout.")
        }
        guard payout.status == .pending else { return [] }
        switch outcome {
        case .sent(let transferID):
            return [.payoutSent(PayoutSent(payoutID: payoutID, amountCents: payout.amountCents, transferID: transferID))]
        case .failed(let reason):
            return [.payoutFailed(PayoutFailed(payoutID: payoutID, amountCents: payout.amountCents, reason: reason))]
        }
    }

    /// What an operator may settle: the available balance, all of it (holds end with their bids).
    static func decideSettlement(_ by: String, reason: String, _ state: UserState) throws -> [UserEvent] {
        guard state.exists else { throw DomainError.userNotFound }
        guard state.heldCents == 0 else {
            throw DomainError(
                .conflict, "balance_held", "\(state.heldCents) cents are held for rental bids: they end first (withdrawn or answered).")
        }
        guard !state.payouts.contains(where: { $0.status == .pending }) else { throw payoutPending }
        guard state.balanceCents > 0 else { return [] }
        return [.balanceSettled(BalanceSettled(amountCents: state.balanceCents, settledBy: by, reason: reason))]
    }

    public static let payoutPending = DomainError(
        .conflict, "payout_pending", "A payout is on its way to the bank; its outcome is recorded first (lender payouts reconcile).")

    static func evolvePayouts(_ state: inout UserState, _ event: UserEvent) {
        switch event {
        case .payoutMethodSet(let set):
            state.payoutToken = set.token
        case .payoutRequested(let requested):
            state.payouts.append(
                Payout(
                    id: requested.payoutID, amountCents: requested.amountCents, requestedAt: requested.requestedAt, status: .pending,
                    token: requested.token))
        case .payoutSent(let sent):
            if let index = state.payouts.firstIndex(where: { $0.id == sent.payoutID }) {
                state.payouts[index].status = .sent
                state.payouts[index].transferID = sent.transferID
            }
        case .payoutFailed(let failed):
            if let index = state.payouts.firstIndex(where: { $0.id == failed.payoutID }) { state.payouts[index].status = .failed }
        case .identityVerified:
            state.identityVerified = true
        default:
            break
        }
    }
}

/// The processor's idempotency key of a payout's transfer: one transfer a payout, whoever
/// makes it (the request, its retry, reconciliation).
public enum PayoutKeys {
    public static func key(_ payout: PayoutID) -> String { "payout:\(payout)" }
}
