import ArgumentParser
import Foundation
import Payments
import Postgres
import EventStore
import Marketplace
import Projections
import UseCases

struct PaymentsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payments", abstract: "Hold the payment processor's books against the log.",
        subcommands: [Reconcile.self])

    struct Reconcile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Refund the charges and void the card authorisations the processor made that the log does not hold (their append never happened), and finish the voids and refunds the log decided.")

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
                        WHERE type IN ('FundsDeposited', 'CardCharged', 'RentalPaid') AND data ? 'chargeID'
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
                try await reconcileRentals(processor, pool: pool, cutoff: cutoff)
            }
        }
    }
}

extension PaymentsCommand.Reconcile {
    /// Rentals (SPEC §12.2): authorisations the log holds no open hold for (a bid never
    /// appended, or one whose release's void was lost) are voided; refunds the log decided
    /// are made, by the booking's key, which makes one already made a no-op.
    func reconcileRentals(_ processor: any PaymentProcessor, pool: PostgresPool, cutoff: Date) async throws {
        let authorizations = try await processor.openAuthorizations(before: cutoff)
        let held = Set(
            try await pool.query(
                """
                SELECT p.data->'hold'->>'authorizationID' AS authorization_id FROM events p
                WHERE p.type = 'RentalHoldPlaced' AND p.data->'hold' ? 'authorizationID'
                  AND NOT EXISTS (
                      SELECT 1 FROM events e
                      WHERE e.stream_id = p.stream_id AND e.type IN ('RentalHoldReleased', 'RentalPaid')
                        AND coalesce(e.data->>'bidID', e.data->>'bookingID') = p.data->>'bidID')
                """
            ).map { try $0.decode("authorization_id", as: String.self) })
        let loose = authorizations.filter { !held.contains($0.id) }
        for authorization in loose {
            let verb =
                if dryRun { "would void" } else if try await processor.void(authorizationID: authorization.id, unusedSince: cutoff) {
                    "voided"
                } else { "left alone (a retry used it meanwhile)" }
            print("\(verb) \(authorization.id): \(authorization.amountCents) cents, authorised \(authorization.createdAt)")
        }
        print("\(authorizations.count) open authorisations checked, \(loose.count) not held by the log")
        let refunds = try await pool.query(
            """
            SELECT data->>'bookingID' AS booking_id, data->>'chargeID' AS charge_id, (data->>'amountCents')::int8 AS amount_cents
            FROM events WHERE type = 'RentalRefunded' AND data->>'method' = 'card' AND data ? 'chargeID'
            """)
        var made = 0
        for row in refunds {
            let booking = try row.decode("booking_id", as: String.self)
            let charge = try row.decode("charge_id", as: String.self)
            let amount = try row.decode("amount_cents", as: Int.self)
            let key = "refund:\(booking)"
            guard try await processor.refundedCents(chargeID: charge, idempotencyKey: key) == 0 else { continue }
            made += 1
            if dryRun {
                print("would refund \(amount) cents of \(charge) for booking \(booking)")
            } else {
                try await processor.refund(chargeID: charge, amountCents: amount, idempotencyKey: key)
                print("refunded \(amount) cents of \(charge) for booking \(booking)")
            }
        }
        print("\(refunds.count) card refunds in the log checked, \(made) not yet made at the processor")
    }
}

extension PaymentProcessors {
    /// The processor `PAYMENT_PROCESSOR` names (`sandbox` by default), on `pool`.
    static func configured(pool: PostgresPool) throws -> any PaymentProcessor {
        try named(ProcessInfo.processInfo.environment["PAYMENT_PROCESSOR"] ?? "sandbox", pool: pool)
    }
}

struct PayoutsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payouts", abstract: "Finish the payouts a crash left between their transfer and its record.",
        subcommands: [Reconcile.self])

    struct Reconcile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Transfer each payout still pending (under its own key: the processor answers a transfer it made with the same one) and record it sent or failed.")

        @OptionGroup var database: DatabaseOptions

        @Option(help: "Only payouts pending for this many seconds (default 60): a younger one's request may still be at it.")
        var olderThan: Int = 60

        func run() async throws {
            guard olderThan >= 0 else { throw ValidationError("--older-than takes a number of seconds, 0 or more.") }
            let logger = Logs.bootstrap()
            var configuration = try database.configuration()
            // As the server writes: a role that may append to the log, never rewrite it.
            let role = ProcessInfo.processInfo.environment["DATABASE_ROLE"] ?? "lender_app"
            configuration.role = role.isEmpty ? nil : role
            let olderThan = olderThan
            let done = try await PostgresPool.with(configuration: configuration, options: .init(size: 2), logger: logger) { pool in
                let store = EventStore(
                    pool: pool, logger: logger, projections: lenderProjections,
                    personalData: try DataKeyOptions.personalData(pool: pool))
                let payouts = Payouts(gateway: CommandGateway(store: store, logger: logger), processor: SandboxPayoutProcessor(pool: pool))
                return try await payouts.reconcile(olderThan: olderThan, logger: logger)
            }
            print("payouts: \(done.sent) sent, \(done.failed) failed\(done.errors > 0 ? ", \(done.errors) not finished: see the log" : "")")
        }
    }
}
