import Foundation
import Marketplace
import Payments
import Postgres
import Testing
import TestSupport

/// The sandboxes keep their own books, as a provider's test mode does, and hold the contract
/// the money code relies on: one key moves money once, a reused key with other terms is
/// refused, refunds never pass the charge, a voided hold is never captured.
@Suite("Sandbox processors")
struct SandboxProcessorsTests {
    static func card(_ digits: String = "4242424242424242") throws -> ValidatedCard {
        try CardRules.validate(
            number: digits, expMonth: 12, expYear: 2030, cvv: "123", holderName: "Ada", today: Day(year: 2026, month: 11, day: 29)!)
    }

    /// `body`'s refusal, by its code.
    static func code(_ body: () async throws -> Void) async -> String? {
        do {
            try await body()
            return nil
        } catch let error as DomainError {
            return error.code
        } catch {
            return "\(error)"
        }
    }

    @Test func aFingerprintIsKeyedAndTheSecretLongEnough() throws {
        #expect(throws: PaymentsConfigurationError.self) { try CardFingerprinter(secret: Data(repeating: 1, count: 15)) }
        let one = try CardFingerprinter(secret: Data(repeating: 1, count: 32))
        let other = try CardFingerprinter(secret: Data(repeating: 2, count: 32))
        #expect(one.fingerprint(try Self.card()) == one.fingerprint(try Self.card()))
        #expect(one.fingerprint(try Self.card()) != other.fingerprint(try Self.card()))
        #expect(!one.fingerprint(try Self.card()).contains("4242"))
    }

    @Test func aKeyChargesOnceAndIsRefusedForOtherTerms() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 4) { pool in
                let processor = SandboxPaymentProcessor(pool: pool)
                let token = try await processor.register(try Self.card())
                // Eight retries at once: one charge.
                let charges = try await withThrowingTaskGroup(of: Charge.self) { group in
                    for _ in 0..<8 { group.addTask { try await processor.charge(token: token, amountCents: 1_500, idempotencyKey: "k-1") } }
                    return try await group.reduce(into: [Charge]()) { $0.append($1) }
                }
                #expect(Set(charges.map(\.id)).count == 1)
                let rows = try await pool.query("SELECT count(*)::int AS n FROM sandbox_charges").single()
                #expect(try rows.decode("n", as: Int.self) == 1)
                #expect(await Self.code { _ = try await processor.charge(token: token, amountCents: 1_600, idempotencyKey: "k-1") }
                    == "payment_key_reused")
                let declined = try await processor.register(try Self.card(SandboxPaymentProcessor.declinedNumbers.first!))
                #expect(await Self.code { _ = try await processor.charge(token: declined, amountCents: 100, idempotencyKey: "k-2") }
                    == "card_declined")
                #expect(await Self.code { _ = try await processor.charge(token: "tok_other", amountCents: 100, idempotencyKey: "k-3") }
                    == "card_declined")
            }
        }
    }

    @Test func refundsNeverPassTheChargeAndAKeyIsOneRefund() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let processor = SandboxPaymentProcessor(pool: pool)
                let charge = try await processor.charge(
                    token: try await processor.register(try Self.card()), amountCents: 1_000, idempotencyKey: "c")
                try await processor.refund(chargeID: charge.id, amountCents: 600, idempotencyKey: "r-1")
                // A retry is the same refund.
                try await processor.refund(chargeID: charge.id, amountCents: 600, idempotencyKey: "r-1")
                #expect(try await processor.refundedCents(chargeID: charge.id, idempotencyKey: nil) == 600)
                #expect(await Self.code { try await processor.refund(chargeID: charge.id, amountCents: 500, idempotencyKey: "r-2") }
                    == "refund_failed")
                #expect(await Self.code { try await processor.refund(chargeID: charge.id, amountCents: 100, idempotencyKey: "r-1") }
                    == "refund_key_reused")
                #expect(await Self.code { try await processor.refund(chargeID: "ch_none", amountCents: 1, idempotencyKey: "r-3") }
                    == "refund_failed")
                try await processor.refund(chargeID: charge.id, amountCents: 400, idempotencyKey: "r-4")
                #expect(try await processor.refundedCents(chargeID: charge.id, idempotencyKey: nil) == 1_000)
            }
        }
    }

    @Test func aHoldIsCapturedOnceAndNeverAfterItsVoid() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let processor = SandboxPaymentProcessor(pool: pool)
                let token = try await processor.register(try Self.card())
                let hold = try await processor.authorize(token: token, amountCents: 2_000, idempotencyKey: "a-1")
                let captured = try await processor.capture(authorizationID: hold.id, idempotencyKey: "cap-1")
                #expect(try await processor.capture(authorizationID: hold.id, idempotencyKey: "cap-1") == captured)
                #expect(await Self.code { _ = try await processor.capture(authorizationID: hold.id, idempotencyKey: "cap-2") }
                    == "payment_failed")
                // A captured hold is not voided.
                try await processor.void(authorizationID: hold.id)
                #expect(try await processor.authorization(id: hold.id)?.isVoided == false)

                let voided = try await processor.authorize(token: token, amountCents: 500, idempotencyKey: "a-2")
                try await processor.void(authorizationID: voided.id)
                #expect(await Self.code { _ = try await processor.capture(authorizationID: voided.id, idempotencyKey: "cap-3") }
                    == "payment_failed")

                let blocked = try await processor.register(try Self.card(SandboxPaymentProcessor.captureRefusedNumber))
                let refused = try await processor.authorize(token: blocked, amountCents: 500, idempotencyKey: "a-3")
                #expect(await Self.code { _ = try await processor.capture(authorizationID: refused.id, idempotencyKey: "cap-4") }
                    == "payment_failed")
                let charged = try await pool.query("SELECT count(*)::int AS n FROM sandbox_charges").single()
                #expect(try charged.decode("n", as: Int.self) == 1, "only the first capture charged")
            }
        }
    }

    @Test func aPayoutKeyTransfersOnce() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let processor = SandboxPayoutProcessor(pool: pool)
                #expect(await Self.code { try processor.validate(token: "acct_1") } == "validation_failed")
                let sent = try await processor.transfer(amountCents: 900, to: "ba_test_1", idempotencyKey: "p-1")
                #expect(sent.status == .sent)
                #expect(try await processor.transfer(amountCents: 900, to: "ba_test_1", idempotencyKey: "p-1") == sent)
                #expect(await Self.code { _ = try await processor.transfer(amountCents: 901, to: "ba_test_1", idempotencyKey: "p-1") }
                    == "payout_key_reused")
                let failed = try await processor.transfer(amountCents: 900, to: SandboxPayoutProcessor.failingToken, idempotencyKey: "p-2")
                #expect(failed.status == .failed)
                #expect(try await processor.transfers().count == 2)
            }
        }
    }
}
