import Aggregates
import EventStore
import Foundation
import Logging
import Marketplace
import Payments
import Postgres
import UUIDs

/// Charging a card for a command, and recording what it paid for, exactly once.
///
/// The charge carries an idempotency key derived from the command (its user, purpose and
/// `Idempotency-Key`), so a retried request is the same charge at the processor. After it,
/// `record` appends the events that hold the charge id. If the append is refused for certain
/// (a rule, a conflict that outlasted the retries), the charge is refunded. If its outcome is
/// unknown (the connection died during COMMIT), it is not: the events may be stored, and
/// `lender payments reconcile` later refunds only charges the log does not hold.
public struct CardPayments: Sendable {
    public let processor: any PaymentProcessor
    let limits: PaymentLimits
    let gateway: CommandGateway

    public init(processor: any PaymentProcessor, limits: PaymentLimits, gateway: CommandGateway) {
        self.processor = processor
        self.limits = limits
        self.gateway = gateway
    }

    /// The processor `setup` makes on the gateway's pool, limited to its attempts an hour.
    public init(_ setup: PaymentsSetup, gateway: CommandGateway) {
        self.init(
            processor: setup.makeProcessor(gateway.store.pool),
            limits: PaymentLimits(pool: gateway.store.pool, perHour: setup.attemptsPerHour), gateway: gateway)
    }

    func pay<Result>(
        _ amountCents: Int, with card: CardOnFile, for user: UserID, purpose: String,
        _ record: (Charge) async throws -> Result
    ) async throws -> Result {
        try await limits.reserve(.cardCharge, for: user)
        let charge = try await processor.charge(
            token: card.processorToken, amountCents: amountCents, idempotencyKey: Self.chargeKey(user, purpose: purpose))
        Failpoints.hit(.chargeAfter)
        guard !charge.isRefunded else {
            throw DomainError(
                .conflict, "payment_refunded",
                "This payment was refunded and was not recorded; send it again with a new Idempotency-Key.")
        }
        do {
            return try await record(charge)
        } catch let error as DomainError where Self.isCertainFailure(error) {
            // A twin of this request (the same key and body, so the same charge) may have
            // recorded it: the log holds it then.
            let (state, _) = try await gateway.load(.user(user), .user)
            let twin = try await gateway.recordedTwin(of: IdempotentRequest.current)
            if !state.chargeIDs.contains(charge.id), twin == nil {
                do { try await processor.refund(chargeID: charge.id) } catch {
                    gateway.logger.error(
                        "a refund failed; lender payments reconcile will give the charge back",
                        metadata: ["charge": "\(charge.id)", "error": "\(error)"])
                }
            }
            throw error
        } catch {
            gateway.logger.warning(
                "a charge's append has an unknown outcome; it is not refunded here",
                metadata: ["charge": "\(charge.id)", "error": "\(error)"])
            throw error
        }
    }

    /// Refused by a rule, so nothing was appended. (A charge already recorded is the log's.)
    static func isCertainFailure(_ error: DomainError) -> Bool {
        error.code != UserDecider.chargeAlreadyRecorded
    }

    /// The request's own `Idempotency-Key` and digest when it has one, so a retried request
    /// charges once and a key reused for another body is another charge; else a fresh one:
    /// the command's own id.
    static func chargeKey(_ user: UserID, purpose: String) -> String {
        guard let idempotency = IdempotentRequest.current?.idempotency else {
            return "\(user):\(purpose):\(UUID.random().lowercaseText)"
        }
        return "\(user):\(purpose):\(idempotency.key):\(idempotency.requestHash.prefix(16))"
    }
}

/// Per user and sliding hour, how many cards may be added and charged: enough for anyone
/// paying, too few to test a list of stolen card numbers. Counted in the database, so every
/// server shares the count, under a lock, so a burst cannot slip past it.
public struct PaymentLimits: Sendable {
    public enum Kind: String, Sendable {
        case cardAdd = "card_add"
        case cardCharge = "card_charge"
    }

    let pool: PostgresPool
    var perHour = 10

    public init(pool: PostgresPool, perHour: Int = 10) {
        self.pool = pool
        self.perHour = perHour
    }

    /// Counts one more attempt, or throws 429 with `Retry-After` when the last hour's are
    /// spent: until the oldest of them is an hour old (migration 0031).
    public func reserve(_ kind: Kind, for user: UserID) async throws {
        let limit = perHour
        let row = try await pool.query(
            "SELECT allowed, wait_seconds FROM reserve_payment_attempt(\(user.rawValue), \(kind.rawValue), \(limit)::int)",
            prepared: true
        ).single()
        guard try row.decode("allowed", as: Bool.self) else {
            let wait = max(1, try row.decode("wait_seconds", as: Int.self))
            let what = kind == .cardAdd ? "card adds" : "card payments"
            throw TryLater(
                .tooManyAttempts, code: "too_many_payment_attempts",
                detail: "At most \(limit) \(what) an hour; try again in \(wait) s.", retryAfterSeconds: wait)
        }
    }
}

/// What the money use cases need: the processor charges go to (made on the server's pool,
/// where the sandbox keeps its books), and the card fingerprint key.
public struct PaymentsSetup: Sendable {
    public var makeProcessor: @Sendable (PostgresPool) -> any PaymentProcessor
    public var fingerprinter: CardFingerprinter
    /// Card adds, and card charges, per user and hour.
    public var attemptsPerHour = 10
    /// What rental bids pay the marketplace (`RENTER_FEE_BPS`, `OWNER_FEE_BPS`).
    public var rentalFees = RentalFees.standard
    /// Where payouts go (SPEC §12.3): the sandbox unless another is built in.
    public var makePayoutProcessor: @Sendable (PostgresPool) -> any PayoutProcessor = { SandboxPayoutProcessor(pool: $0) }
    /// `PAYOUT_VERIFY_ABOVE_CENTS`: 30 days' payouts over it need a verified identity.
    public var payoutVerifyAboveCents = UserDecider.defaultPayoutVerifyAboveCents

    public init(makeProcessor: @escaping @Sendable (PostgresPool) -> any PaymentProcessor, fingerprinter: CardFingerprinter) {
        self.makeProcessor = makeProcessor
        self.fingerprinter = fingerprinter
    }

    /// The sandbox processor, with fingerprints keyed by `secret`.
    public static func sandbox(secret: Data) throws -> PaymentsSetup {
        PaymentsSetup(makeProcessor: { SandboxPaymentProcessor(pool: $0) }, fingerprinter: try CardFingerprinter(secret: secret))
    }
}
