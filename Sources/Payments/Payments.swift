import Crypto
import Foundation
import Marketplace
import Postgres

/// Recognises a card added twice without keeping its number: HMAC-SHA-256 of the digits,
/// keyed by a server secret, so the fingerprint cannot be reversed by trying every number.
public struct CardFingerprinter: Sendable {
    private let key: SymmetricKey

    /// The secret must be at least 16 bytes; `scripts/serve` generates 32 random ones.
    public init(secret: Data) throws {
        guard secret.count >= 16 else { throw PaymentsConfigurationError.secretTooShort }
        self.key = SymmetricKey(data: secret)
    }

    /// Another key from the same secret, for another purpose (HMAC of the purpose's name).
    public func derivedKey(for purpose: String) -> SymmetricKey {
        SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(purpose.utf8), using: key)))
    }

    public func fingerprint(_ card: ValidatedCard) -> String {
        HMAC<SHA256>.authenticationCode(for: Data(card.digits.utf8), using: key)
            .map { String(format: "%02x", $0) }.joined()
    }
}

public enum PaymentsConfigurationError: Error, CustomStringConvertible {
    case secretTooShort
    case unknownProcessor(String)

    public var description: String {
        switch self {
        case .secretTooShort: "the card fingerprint secret must be at least 16 bytes"
        case .unknownProcessor(let name): "unknown payment processor \(name) (known: sandbox)"
        }
    }
}

/// A charge as the processor keeps it.
public struct Charge: Sendable, Hashable {
    public var id: String
    public var amountCents: Int
    public var idempotencyKey: String
    public var createdAt: Date
    public var refundedAt: Date?

    public init(id: String, amountCents: Int, idempotencyKey: String, createdAt: Date, refundedAt: Date?) {
        self.id = id
        self.amountCents = amountCents
        self.idempotencyKey = idempotencyKey
        self.createdAt = createdAt
        self.refundedAt = refundedAt
    }

    public var isRefunded: Bool { refundedAt != nil }
}

extension Charge {
    /// The columns of `sandbox_charges` that `init(row:)` reads.
    static let columns = "charge_id, idempotency_key, token, amount_cents, created_at, refunded_at"

    init(row: PostgresRow) throws {
        self.init(
            id: try row.decode("charge_id"), amountCents: try row.decode("amount_cents"),
            idempotencyKey: try row.decode("idempotency_key"), createdAt: try row.decode("created_at"),
            refundedAt: try row.decode("refunded_at", as: Date?.self))
    }
}

/// Where charges go. Only this sees a card's number, once, when the card is added; charges
/// name the card by the processor's token. A declined charge throws `card_declined` (402).
public protocol PaymentProcessor: Sendable {
    /// Registers a card; the token is what charges name, and what may be kept.
    func register(_ card: ValidatedCard) async throws -> String
    /// Charges `amountCents` to the card. The same idempotency key charges at most once and
    /// answers the same charge (refunded, if it since was); with another card or amount it is
    /// refused (`payment_key_reused`), as a real processor does.
    func charge(token: String, amountCents: Int, idempotencyKey: String) async throws -> Charge
    /// Gives a charge back. Refunding a refunded charge does nothing: safe to retry.
    func refund(chargeID: String) async throws
    /// Gives a charge back only if nothing charged it again (a retry) since `cutoff`: what
    /// reconciliation does, so it never races a retry that is recording the charge. True
    /// when this call refunded it.
    func refund(chargeID: String, unusedSince cutoff: Date) async throws -> Bool
    /// The charges last used before `cutoff` and not refunded: what reconciliation holds
    /// against the log.
    func unrefundedCharges(before cutoff: Date) async throws -> [Charge]
    /// One charge, by its id; nil when the processor never made it.
    func charge(id: String) async throws -> Charge?

    // Authorisations (SPEC §12.2): a rental's charge held on the card at bid time, captured at
    // approval, voided when the bid ends without a booking.

    /// Holds `amountCents` on the card. The same key holds at most once and answers the same
    /// authorisation; declined cards throw `card_declined` (402).
    func authorize(token: String, amountCents: Int, idempotencyKey: String) async throws -> Authorization
    /// Charges the whole authorisation: a charge (`charge(id:)` finds it) made once per key. A
    /// voided or refused authorisation throws `payment_failed` (409).
    func capture(authorizationID: String, idempotencyKey: String) async throws -> Charge
    /// Frees an authorisation that was not captured. Voiding twice, or a captured one, does nothing.
    func void(authorizationID: String) async throws
    /// Gives back part of a charge, once per key: safe to retry.
    func refund(chargeID: String, amountCents: Int, idempotencyKey: String) async throws
    /// The cents refunded of a charge, by refunds of the given key (all of them when nil).
    func refundedCents(chargeID: String, idempotencyKey: String?) async throws -> Int
    /// Authorisations neither captured nor voided, last used before `cutoff`: what
    /// reconciliation holds against the log.
    func openAuthorizations(before cutoff: Date) async throws -> [Authorization]
    /// Voids an authorisation only if nothing used it again since `cutoff` (as `refund(chargeID:unusedSince:)`).
    func void(authorizationID: String, unusedSince cutoff: Date) async throws -> Bool
    /// One authorisation, by its id; nil when the processor never made it.
    func authorization(id: String) async throws -> Authorization?
}

/// A hold on a card, as the processor keeps it.
public struct Authorization: Sendable, Hashable {
    public var id: String
    public var amountCents: Int
    public var idempotencyKey: String
    public var createdAt: Date
    public var isVoided: Bool
    public var capturedChargeID: String?

    public init(id: String, amountCents: Int, idempotencyKey: String, createdAt: Date, isVoided: Bool, capturedChargeID: String?) {
        self.id = id
        self.amountCents = amountCents
        self.idempotencyKey = idempotencyKey
        self.createdAt = createdAt
        self.isVoided = isVoided
        self.capturedChargeID = capturedChargeID
    }
}

extension Authorization {
    static let columns = "authorization_id, idempotency_key, token, amount_cents, created_at, voided_at, captured_charge_id"

    init(row: PostgresRow) throws {
        self.init(
            id: try row.decode("authorization_id"), amountCents: try row.decode("amount_cents"),
            idempotencyKey: try row.decode("idempotency_key"), createdAt: try row.decode("created_at"),
            isVoided: try row.decode("voided_at", as: Date?.self) != nil,
            capturedChargeID: try row.decode("captured_charge_id", as: String?.self))
    }
}

public enum PaymentProcessors {
    /// A processor chosen by name (`PAYMENT_PROCESSOR`); `sandbox` is the only one built in.
    public static func named(_ name: String, pool: PostgresPool) throws -> any PaymentProcessor {
        guard name == "sandbox" else { throw PaymentsConfigurationError.unknownProcessor(name) }
        return SandboxPaymentProcessor(pool: pool)
    }

    /// Checks the name without a database, for start-up errors before anything connects.
    public static func validate(_ name: String) throws {
        guard name == "sandbox" else { throw PaymentsConfigurationError.unknownProcessor(name) }
    }
}

/// A payment provider's test mode (SPEC §4): approves every valid card except the documented
/// decline numbers, which it knows by the token it gave them. Its books are a table of its
/// own (`sandbox_charges`), outside the log, shared by every server: a charge is found again
/// by its idempotency key, so a retried charge is the same charge, and refunds are real rows
/// that reconciliation can be tested against.
public struct SandboxPaymentProcessor: PaymentProcessor {
    /// Always declined: generic decline, insufficient funds, lost card (as in common test modes).
    public static let declinedNumbers: Set<String> = ["4000000000000002", "4000000000009995", "4000000000009987"]
    /// Authorised, but every capture is refused (as a card blocked between bid and approval).
    public static let captureRefusedNumber = "4000000000000341"

    let pool: PostgresPool

    public init(pool: PostgresPool) {
        self.pool = pool
    }

    public func register(_ card: ValidatedCard) async throws -> String {
        let declines = Self.declinedNumbers.contains(card.digits)
        let refusesCapture = card.digits == Self.captureRefusedNumber
        return "tok_sandbox_\(declines ? "decline_" : refusesCapture ? "nocapture_" : "")\(UUID().uuidString.lowercased())"
    }

    public func charge(token: String, amountCents: Int, idempotencyKey: String) async throws -> Charge {
        guard token.hasPrefix("tok_sandbox_") else {
            throw DomainError(.paymentDeclined, "card_declined", "The payment processor does not know this card.")
        }
        guard !token.hasPrefix("tok_sandbox_decline_") else {
            throw DomainError(.paymentDeclined, "card_declined", "The card was declined.")
        }
        let id = "ch_sandbox_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        // Inserted, or the charge this key already made. The second statement sees a charge that
        // a concurrent retry committed while the first waited on it; the first's snapshot does not.
        var row = try await pool.query(
            """
            INSERT INTO sandbox_charges (charge_id, idempotency_key, token, amount_cents)
            VALUES (\(id), \(idempotencyKey), \(token), \(amountCents))
            ON CONFLICT (idempotency_key) DO NOTHING
            RETURNING \(unsafeRaw: Charge.columns)
            """
        ).first
        if row == nil {
            // A retry: marked used, under the row's lock, so reconciliation either refunded it
            // first (and the retry sees that) or leaves it alone.
            row = try await pool.query(
                """
                UPDATE sandbox_charges SET last_used_at = now() WHERE idempotency_key = \(idempotencyKey)
                RETURNING \(unsafeRaw: Charge.columns)
                """
            ).single()
        }
        guard let row else { throw PostgresError(.decoding, message: "the charge was neither made nor found") }
        guard try row.decode("token", as: String.self) == token, try row.decode("amount_cents", as: Int.self) == amountCents
        else {
            throw DomainError(
                .conflict, "payment_key_reused",
                "This payment was first made with another card or amount; nothing more was charged.")
        }
        return try Charge(row: row)
    }

    public func refund(chargeID: String) async throws {
        try await pool.query(
            "UPDATE sandbox_charges SET refunded_at = now() WHERE charge_id = \(chargeID) AND refunded_at IS NULL")
    }

    public func refund(chargeID: String, unusedSince cutoff: Date) async throws -> Bool {
        try await pool.query(
            """
            UPDATE sandbox_charges SET refunded_at = now()
            WHERE charge_id = \(chargeID) AND refunded_at IS NULL AND last_used_at < \(cutoff)
            """
        ).affectedRows == 1
    }

    public func charge(id: String) async throws -> Charge? {
        try await pool.query(
            "SELECT \(unsafeRaw: Charge.columns) FROM sandbox_charges WHERE charge_id = \(id)"
        ).first.map(Charge.init(row:))
    }

    public func unrefundedCharges(before cutoff: Date) async throws -> [Charge] {
        try await pool.query(
            """
            SELECT \(unsafeRaw: Charge.columns) FROM sandbox_charges
            WHERE refunded_at IS NULL AND last_used_at < \(cutoff)
            ORDER BY created_at, charge_id
            """
        ).map(Charge.init(row:))
    }

    public func authorize(token: String, amountCents: Int, idempotencyKey: String) async throws -> Authorization {
        guard token.hasPrefix("tok_sandbox_") else {
            throw DomainError(.paymentDeclined, "card_declined", "The payment processor does not know this card.")
        }
        guard !token.hasPrefix("tok_sandbox_decline_") else {
            throw DomainError(.paymentDeclined, "card_declined", "The card was declined.")
        }
        let id = "auth_sandbox_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        // As `charge`: inserted, or the one this key made, marked used again.
        var row = try await pool.query(
            """
            INSERT INTO sandbox_authorizations (authorization_id, idempotency_key, token, amount_cents)
            VALUES (\(id), \(idempotencyKey), \(token), \(amountCents))
            ON CONFLICT (idempotency_key) DO NOTHING
            RETURNING \(unsafeRaw: Authorization.columns)
            """
        ).first
        if row == nil {
            row = try await pool.query(
                """
                UPDATE sandbox_authorizations SET last_used_at = now() WHERE idempotency_key = \(idempotencyKey)
                RETURNING \(unsafeRaw: Authorization.columns)
                """
            ).single()
        }
        guard let row else { throw PostgresError(.decoding, message: "the authorisation was neither made nor found") }
        guard try row.decode("token", as: String.self) == token, try row.decode("amount_cents", as: Int.self) == amountCents
        else {
            throw DomainError(
                .conflict, "payment_key_reused",
                "This payment was first authorised with another card or amount; nothing more was held.")
        }
        return try Authorization(row: row)
    }

    public func capture(authorizationID: String, idempotencyKey: String) async throws -> Charge {
        let chargeID = "ch_sandbox_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let refused = DomainError(.conflict, "payment_failed", "The card's payment could not be taken.")
        // One statement, under the authorisation's row lock: a charge made and the
        // authorisation marked captured by it; or, captured before (a retry, or a twin that
        // waited on the lock), that capture's id; or nothing (voided, or refused).
        let row = try await pool.query(
            """
            WITH held AS (
                SELECT token, amount_cents, voided_at, captured_charge_id FROM sandbox_authorizations
                WHERE authorization_id = \(authorizationID) FOR UPDATE
            ), made AS (
                INSERT INTO sandbox_charges (charge_id, idempotency_key, token, amount_cents)
                SELECT \(chargeID), \(idempotencyKey), token, amount_cents FROM held
                WHERE captured_charge_id IS NULL AND voided_at IS NULL AND NOT starts_with(token, 'tok_sandbox_nocapture_')
                RETURNING \(unsafeRaw: Charge.columns)
            ), marked AS (
                UPDATE sandbox_authorizations SET captured_charge_id = made.charge_id, last_used_at = now()
                FROM made WHERE authorization_id = \(authorizationID)
            )
            SELECT made.*, (SELECT captured_charge_id FROM held) AS before FROM (SELECT 1) one LEFT JOIN made ON true
            """
        ).single()
        if try row.decode("charge_id", as: String?.self) != nil { return try Charge(row: row) }
        guard let before = try row.decode("before", as: String?.self) else { throw refused }
        let captured = try await pool.query(
            "UPDATE sandbox_charges SET last_used_at = now() WHERE charge_id = \(before) RETURNING \(unsafeRaw: Charge.columns)"
        ).single()
        // The same capture only for the same key, as a real processor answers a retry.
        guard try captured.decode("idempotency_key", as: String.self) == idempotencyKey else { throw refused }
        return try Charge(row: captured)
    }

    public func void(authorizationID: String) async throws {
        try await pool.query(
            """
            UPDATE sandbox_authorizations SET voided_at = now()
            WHERE authorization_id = \(authorizationID) AND voided_at IS NULL AND captured_charge_id IS NULL
            """)
    }

    public func void(authorizationID: String, unusedSince cutoff: Date) async throws -> Bool {
        try await pool.query(
            """
            UPDATE sandbox_authorizations SET voided_at = now()
            WHERE authorization_id = \(authorizationID) AND voided_at IS NULL AND captured_charge_id IS NULL
              AND last_used_at < \(cutoff)
            """
        ).affectedRows == 1
    }

    public func refund(chargeID: String, amountCents: Int, idempotencyKey: String) async throws {
        let id = "re_sandbox_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await pool.withTransaction { connection in
            // Under the charge's lock: refunds never pass what it charged.
            guard
                let charge = try await connection.query(
                    """
                    SELECT amount_cents, (SELECT coalesce(sum(amount_cents), 0)::int8 FROM sandbox_refunds r
                                          WHERE r.charge_id = c.charge_id) AS refunded
                    FROM sandbox_charges c WHERE charge_id = \(chargeID) FOR UPDATE
                    """
                ).first
            else { throw DomainError(.conflict, "refund_failed", "The processor has no charge \(chargeID).") }
            // The same key is the same refund, as a provider's test mode answers: of the same
            // charge and amount, or refused (a key reused for another refund must not vanish).
            if let known = try await connection.query(
                "SELECT charge_id, amount_cents FROM sandbox_refunds WHERE idempotency_key = \(idempotencyKey)"
            ).first {
                guard try known.decode("charge_id", as: String.self) == chargeID,
                    try known.decode("amount_cents", as: Int.self) == amountCents
                else {
                    throw DomainError(
                        .conflict, "refund_key_reused", "The refund key \(idempotencyKey) was used for another refund.")
                }
                return
            }
            guard try charge.decode("refunded", as: Int.self) + amountCents <= (try charge.decode("amount_cents", as: Int.self)) else {
                throw DomainError(.conflict, "refund_failed", "The refund would pass what \(chargeID) charged.")
            }
            try await connection.query(
                """
                INSERT INTO sandbox_refunds (refund_id, idempotency_key, charge_id, amount_cents)
                VALUES (\(id), \(idempotencyKey), \(chargeID), \(amountCents))
                """)
        }
    }

    public func refundedCents(chargeID: String, idempotencyKey: String?) async throws -> Int {
        try await pool.query(
            """
            SELECT coalesce(sum(amount_cents), 0)::int8 AS refunded FROM sandbox_refunds
            WHERE charge_id = \(chargeID) AND (\(idempotencyKey)::text IS NULL OR idempotency_key = \(idempotencyKey))
            """
        ).single().decode("refunded", as: Int.self)
    }

    public func authorization(id: String) async throws -> Authorization? {
        try await pool.query(
            "SELECT \(unsafeRaw: Authorization.columns) FROM sandbox_authorizations WHERE authorization_id = \(id)"
        ).first.map(Authorization.init(row:))
    }

    public func openAuthorizations(before cutoff: Date) async throws -> [Authorization] {
        try await pool.query(
            """
            SELECT \(unsafeRaw: Authorization.columns) FROM sandbox_authorizations
            WHERE voided_at IS NULL AND captured_charge_id IS NULL AND last_used_at < \(cutoff)
            ORDER BY created_at, authorization_id
            """
        ).map(Authorization.init(row:))
    }
}
