import Crypto
import Foundation
import Marketplace

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

/// Where charges go. Only this sees a card's number, once, when the card is added; charges
/// name the card by the processor's token. A declined charge throws `card_declined` (402).
public protocol PaymentProcessor: Sendable {
    /// Registers a card; the token is what charges name, and what may be kept.
    func register(_ card: ValidatedCard) async throws -> String
    /// Charges `amountCents` to the card; the same idempotency key charges at most once and
    /// answers the same charge id.
    func charge(token: String, amountCents: Int, idempotencyKey: String) async throws -> String
    /// Gives a charge back, when what it paid for could not be recorded.
    func refund(chargeID: String) async throws
}

public enum PaymentProcessors {
    /// A processor chosen by name (`PAYMENT_PROCESSOR`); `sandbox` is the only one built in.
    public static func named(_ name: String) throws -> any PaymentProcessor {
        guard name == "sandbox" else { throw PaymentsConfigurationError.unknownProcessor(name) }
        return SandboxPaymentProcessor()
    }
}

/// A payment provider's test mode (SPEC §4): approves every valid card except the documented
/// decline numbers. Stateless, so any number of servers agree: the decline is in the token,
/// and a charge id is derived from its idempotency key.
public struct SandboxPaymentProcessor: PaymentProcessor {
    /// Always declined: generic decline, insufficient funds, lost card (as in common test modes).
    public static let declinedNumbers: Set<String> = ["4000000000000002", "4000000000009995", "4000000000009987"]

    public init() {}

    public func register(_ card: ValidatedCard) async throws -> String {
        let declines = Self.declinedNumbers.contains(card.digits)
        return "tok_sandbox_\(declines ? "decline_" : "")\(UUID().uuidString.lowercased())"
    }

    public func charge(token: String, amountCents: Int, idempotencyKey: String) async throws -> String {
        guard token.hasPrefix("tok_sandbox_") else {
            throw DomainError(.paymentDeclined, "card_declined", "The payment processor does not know this card.")
        }
        guard !token.hasPrefix("tok_sandbox_decline_") else {
            throw DomainError(.paymentDeclined, "card_declined", "The card was declined.")
        }
        let digest = SHA256.hash(data: Data("\(token)|\(amountCents)|\(idempotencyKey)".utf8))
        return "ch_sandbox_" + digest.prefix(12).map { String(format: "%02x", $0) }.joined()
    }

    public func refund(chargeID: String) async throws {}
}
