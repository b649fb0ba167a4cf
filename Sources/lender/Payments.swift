import ArgumentParser
import Foundation
import Payments
import Postgres

struct PaymentsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payments", abstract: "Hold the payment processor's books against the log.",
        subcommands: [Reconcile.self])

    struct Reconcile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Refund the charges the processor made that the log does not hold (a charge whose append never happened).")

        @OptionGroup var database: DatabaseOptions

        @Flag(help: "List the charges it would refund; refund nothing.")
        var dryRun = false

        @Option(help: "Only charges unused for this many seconds (default 900): a younger one may still be on its way into the log.")
        var olderThan: Int = 900

        func run() async throws {
            guard olderThan >= 0 else { throw ValidationError("--older-than takes a number of seconds, 0 or more.") }
            let logger = Logs.bootstrap()
            try await database.withPool(logger: logger) { pool in
                let processor = try PaymentProcessors.configured(pool: pool)
                // Charges first, then the log: a charge recorded in between is in the log read after.
                // A retry that uses a charge again after this moves it past the cutoff, and the
                // refund below leaves it alone.
                let cutoff = Date().addingTimeInterval(-Double(olderThan))
                let charges = try await processor.unrefundedCharges(before: cutoff)
                let logged = Set(
                    try await pool.query(
                        """
                        SELECT DISTINCT data->>'chargeID' AS charge_id FROM events
                        WHERE type IN ('FundsDeposited', 'CardCharged') AND data ? 'chargeID'
                        """
                    ).map { try $0.decode("charge_id", as: String.self) })
                let orphans = charges.filter { !logged.contains($0.id) }
                for charge in orphans {
                    let verb =
                        if dryRun { "would refund" } else if try await processor.refund(chargeID: charge.id, unusedSince: cutoff) {
                            "refunded"
                        } else { "left alone (a retry used it meanwhile)" }
                    print("\(verb) \(charge.id): \(charge.amountCents) cents, charged \(charge.createdAt), key \(charge.idempotencyKey)")
                }
                print(
                    "\(charges.count) unrefunded charges checked, \(orphans.count) not in the log"
                        + (orphans.isEmpty ? "" : dryRun ? "; none refunded (--dry-run)" : "; refunded"))
            }
        }
    }
}

extension PaymentProcessors {
    /// The processor `PAYMENT_PROCESSOR` names (`sandbox` by default), on `pool`.
    static func configured(pool: PostgresPool) throws -> any PaymentProcessor {
        try named(ProcessInfo.processInfo.environment["PAYMENT_PROCESSOR"] ?? "sandbox", pool: pool)
    }
}
