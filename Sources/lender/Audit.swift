import Aggregates
import ArgumentParser
import Crypto
import EventStore
import Foundation
import Logging
import Marketplace
import Payments
import Postgres
import Projections
import UseCases

struct Audit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read the tamper-evident history.", subcommands: [Bids.self, Verify.self, Checkpoint.self, PublicKey.self, Money.self])

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Recompute the hash chains; name the first altered, removed or reordered event (exit 1).",
            discussion: """
                Reads one snapshot of the log, so appends committing meanwhile are never taken for tampering.
                With --checkpoint FILE (from `lender audit checkpoint`), also checks the checkpoint's signature \
                and that the log still reaches its position with the same stream heads: a log cut short or \
                rewritten before it is named. The public key is --public-key FILE, else the one of \
                AUDIT_SIGNING_KEY_FILE.
                """)

        @OptionGroup var database: DatabaseOptions
        @Option(help: "Check one stream only, like item-<id>.") var stream: String?
        @Option(help: "A checkpoint file the log must still extend.") var checkpoint: String?
        @Option(help: "The signer's public key (base64, as `lender audit public-key` prints it).") var publicKey: String?

        func validate() throws {
            if stream != nil, checkpoint != nil { throw ValidationError("--checkpoint covers the whole log, not --stream.") }
            if publicKey != nil, checkpoint == nil { throw ValidationError("--public-key goes with --checkpoint.") }
        }

        func run() async throws {
            let logger = Logs.bootstrap()
            let signed = try checkpoint.map(readCheckpoint)
            let found = try await database.withPool(logger: logger) { pool in
                try await EventStore(pool: pool, logger: logger).verify(
                    stream: stream.map(StreamID.init(rawValue:)), checkpoint: signed)
            }
            guard let found else {
                if let signed {
                    print("The log is intact and extends the checkpoint at position \(signed.position), signed at \(signed.signedAt).")
                } else {
                    print(stream.map { "The stream \($0) is intact." } ?? "The log is intact: every chain and position checks out.")
                }
                return
            }
            print("BROKEN: \(found.kind.rawValue) at position \(found.position)"
                + (found.streamID.map { " (stream \($0), version \(found.streamVersion ?? 0))" } ?? ""))
            print(found.message)
            throw ExitCode(1)
        }

        /// The checkpoint, refused unless the trusted key signed it.
        private func readCheckpoint(_ path: String) throws -> LogCheckpoint {
            guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("Cannot read \(path).") }
            guard let checkpoint = try? JSONDecoder().decode(LogCheckpoint.self, from: data) else {
                throw ValidationError("\(path) is not a checkpoint of `lender audit checkpoint`.")
            }
            let key = try publicKey.map { try LogCheckpoint.publicKey(base64: try AuditKeys.read($0)) }
                ?? AuditKeys.signingKey().publicKey
            guard checkpoint.isSigned(by: key) else {
                print("BROKEN: the checkpoint \(path) is not signed by the key \(key.rawRepresentation.base64EncodedString()):")
                print("its signature does not match its statement (position \(checkpoint.position), signed at \(checkpoint.signedAt)).")
                throw ExitCode(1)
            }
            return checkpoint
        }
    }

    struct Checkpoint: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sign the log's head and every stream's last hash (Ed25519, AUDIT_SIGNING_KEY_FILE); keep and print it.",
            discussion: """
                The checkpoint is printed (or written to --out) as JSON and kept in audit_checkpoints, outside \
                the log, where auditors fetch it (GET /v1/audit/checkpoints). Keep copies where the operator \
                cannot change them: `lender audit verify --checkpoint FILE` then proves the log still extends it.
                """)

        @OptionGroup var database: DatabaseOptions
        @Option(help: "Write the checkpoint to this file instead of standard output.") var out: String?

        func run() async throws {
            let logger = Logs.bootstrap()
            let key = try AuditKeys.signingKey()
            let checkpoint = try await database.withPool(logger: logger) { pool in
                let store = EventStore(pool: pool, logger: logger)
                let checkpoint = try await store.checkpoint(signingKey: key)
                try await store.store(checkpoint)
                return checkpoint
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let json = try encoder.encode(checkpoint) + Data("\n".utf8)
            if let out {
                guard FileManager.default.createFile(atPath: out, contents: json) else {
                    throw CommandFailure("Cannot write \(out).")
                }
                print("Signed the log at position \(checkpoint.position) (\(checkpoint.streams) streams) into \(out).")
            } else {
                FileHandle.standardOutput.write(json)
            }
        }
    }

    struct PublicKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "public-key", abstract: "Print the public key of AUDIT_SIGNING_KEY_FILE, for auditors (base64).")

        func run() throws {
            print(try AuditKeys.signingKey().publicKey.rawRepresentation.base64EncodedString())
        }
    }

    struct Money: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Recompute every balance and loan from the log and check that money adds up; print each imbalance (exit 1).")

        @OptionGroup var database: DatabaseOptions

        @Flag(help: "Do not hold the log's charges against the payment processor's books.")
        var skipProcessor = false

        func run() async throws {
            let logger = Logs.bootstrap()
            let skipProcessor = skipProcessor
            let report = try await database.withPool(size: 2, logger: logger) { pool -> MoneyAudit.Report in
                let processor = try PaymentProcessors.configured(pool: pool)
                let lookup: MoneyAudit.ProcessorLookup = { id in
                    guard let charge = try await processor.charge(id: id) else { return nil }
                    let refunded = try await processor.refundedCents(chargeID: id, idempotencyKey: nil)
                    return (amountCents: charge.amountCents, isRefunded: charge.isRefunded, refundedCents: refunded)
                }
                let open: MoneyAudit.AuthorizationLookup = { id in
                    try await processor.authorization(id: id).map { !$0.isVoided && $0.capturedChargeID == nil }
                }
                let payouts = SandboxPayoutProcessor(pool: pool)
                let transfers: MoneyAudit.TransfersLookup = {
                    try await payouts.transfers().mapValues { (id: $0.id, amountCents: $0.amountCents, sent: $0.status == .sent) }
                }
                return try await MoneyAudit().run(
                    pool: pool, processor: skipProcessor ? nil : lookup, authorizations: skipProcessor ? nil : open,
                    transfers: skipProcessor ? nil : transfers)
            }
            print(
                "Up to position \(report.head): \(report.users) users, \(report.loans) loans, \(report.bookings) paid bookings; "
                    + "charged in \(report.chargedInCents) cents, refunded out \(report.refundedOutCents), "
                    + "balances \(report.balancesCents) (\(report.heldCents) held for bids), escrow \(report.escrowCents) "
                    + "(deposits held \(report.depositsHeldCents), \(report.depositsClaimedCents) of them claimed; frozen by "
                    + "disputes \(report.frozenCents)), deposits released \(report.depositsReleasedCents), "
                    + "lent out \(report.lentOutCents), repaid \(report.repaidCents), fees earned \(report.feesEarnedCents), "
                    + "paid out \(report.paidOutCents) in \(report.payouts) payouts, settled by operators \(report.settledOutCents).")
            if report.unpaidBeforeEpochCents > 0 {
                print(
                    "Before money moved exactly once (migration 0010), repayments that no borrower paid credited "
                        + "\(report.unpaidBeforeEpochCents) cents; they are counted as money made then.")
            }
            guard !report.imbalances.isEmpty else {
                print(
                    "Money adds up: charged in − refunded out − paid out − settled = balances + escrow + lent out + fees earned, and every transfer balances.")
                return
            }
            for imbalance in report.imbalances { print("IMBALANCE \(imbalance)") }
            throw ExitCode(1)
        }
    }

    struct Bids: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print every bid event of an item, from the log, and what operators did to it (the table only).")

        @OptionGroup var database: DatabaseOptions
        @Option(help: "The item's id.") var item: String
        @Flag(help: "Print JSON instead of a table.") var json = false

        func run() async throws {
            guard let itemID = ItemID(item) else { throw ValidationError("--item takes an item id (a UUID).") }
            let logger = Logs.bootstrap()
            let (entries, acts) = try await database.withPool(logger: logger) { pool in
                try await BidHistory.history(of: itemID, in: EventStore(pool: pool, logger: logger))
            }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                encoder.dateEncodingStrategy = .iso8601
                print(String(decoding: try encoder.encode(entries), as: UTF8.self))
                return
            }
            print("position  version  type          bid                                   status     price  hash")
            for entry in entries {
                let columns = [
                    String(entry.position).padding(toLength: 9, withPad: " ", startingAt: 0),
                    String(entry.streamVersion).padding(toLength: 8, withPad: " ", startingAt: 0),
                    entry.type.padding(toLength: 13, withPad: " ", startingAt: 0),
                    entry.bidId.description.padding(toLength: 37, withPad: " ", startingAt: 0),
                    entry.status.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0),
                    (entry.dailyPriceCents.map(String.init) ?? "").padding(toLength: 6, withPad: " ", startingAt: 0),
                    String(entry.hash.prefix(16)),
                ]
                print(columns.joined(separator: " "))
            }
            if entries.isEmpty { print("(no bid events)") }
            guard !acts.isEmpty else { return }
            print("\noperator acts:\nposition  type              operator                              booking                               hash")
            for act in acts {
                let columns = [
                    String(act.position).padding(toLength: 9, withPad: " ", startingAt: 0),
                    act.type.padding(toLength: 17, withPad: " ", startingAt: 0),
                    (act.operatorId ?? "").padding(toLength: 37, withPad: " ", startingAt: 0),
                    (act.bookingId?.description ?? "").padding(toLength: 37, withPad: " ", startingAt: 0),
                    String(act.hash.prefix(16)),
                ]
                print(columns.joined(separator: " "))
            }
        }
    }
}

/// The audit signing key: the file `AUDIT_SIGNING_KEY_FILE` names, else the checkout's
/// `.local/audit-signing-key` (which `scripts/serve` generates).
enum AuditKeys {
    static func signingKey() throws -> Curve25519.Signing.PrivateKey {
        let path = ProcessInfo.processInfo.environment["AUDIT_SIGNING_KEY_FILE"].flatMap { $0.isEmpty ? nil : $0 }
            ?? Checkout.find(".local/audit-signing-key")
        guard let path else {
            throw ValidationError("No audit signing key: set AUDIT_SIGNING_KEY_FILE (scripts/serve generates .local/audit-signing-key).")
        }
        do {
            return try LogCheckpoint.signingKey(base64: try read(path))
        } catch let error as CheckpointError {
            throw ValidationError("AUDIT_SIGNING_KEY_FILE \(path): \(error)")
        }
    }

    static func read(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("Cannot read \(path).") }
        return String(decoding: data, as: UTF8.self)
    }
}

struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage users: roles, identity checks, and forgetting one.",
        subcommands: [
            GrantAuditor.self, RevokeAuditor.self, GrantOperator.self, RevokeOperator.self, VerifyIdentity.self,
            SettleBalance.self, Forget.self,
        ])

    struct SettleBalance: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record that an operator settled a user's whole available balance outside Lender (a balance under the smallest payout, say), so that they may be forgotten.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The user's handle.") var handle: String
        @Option(help: "Who settled it, as the event names them (default: $USER).")
        var by: String = ProcessInfo.processInfo.environment["USER"] ?? "operator"
        @Option(help: "How it was settled (a bank transfer's reference, a cheque, a donation the user asked for).")
        var reason: String

        func run() async throws {
            let settler = "operator:\(by)"
            let reason = reason
            try await withUser(handle, database) { pool, userID in
                let logger = Logger(label: "lender")
                let store = EventStore(
                    pool: pool, logger: logger, projections: lenderProjections,
                    personalData: try DataKeyOptions.personalData(pool: pool))
                let payouts = Payouts(
                    gateway: CommandGateway(store: store, logger: logger), processor: SandboxPayoutProcessor(pool: pool))
                let settled = try await payouts.settle(UserID(userID), by: settler, reason: reason)
                print("\(handle): \(settled) cents settled by \(settler).")
            }
        }
    }

    struct VerifyIdentity: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record that an operator checked who a user is (SPEC §12.3): their payouts may then pass PAYOUT_VERIFY_ABOVE_CENTS in 30 days.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The user's handle.") var handle: String
        @Option(help: "Who checked, as the event names them (default: $USER).")
        var by: String = ProcessInfo.processInfo.environment["USER"] ?? "operator"

        func run() async throws {
            let verifier = "operator:\(by)"
            // `withUser` bootstraps the logging system (once a process).
            try await withUser(handle, database) { pool, userID in
                let logger = Logger(label: "lender")
                let store = EventStore(
                    pool: pool, logger: logger, projections: lenderProjections,
                    personalData: try DataKeyOptions.personalData(pool: pool))
                let handled = try await CommandGateway(store: store, logger: logger).handle(
                    .verifyIdentity(by: verifier), on: .user, id: UserID(userID), actor: .system,
                    metadata: EventMetadata(actorID: verifier))
                print(handled.append == nil ? "\(handle) was verified already." : "\(handle)'s identity is verified, by \(verifier).")
            }
        }
    }

    struct Forget: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Close a user's account and forget them, as DELETE /v1/me does (SPEC §11.3).",
            discussion: """
                Their open items and pending bids are withdrawn, their data key destroyed, their \
                sessions revoked. Money history (amounts, ids) stays; the log still verifies.
                """)
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The user's handle.") var handle: String

        func run() async throws {
            let logger = Logs.bootstrap()
            var configuration = try database.configuration()
            // As the server writes: a role that may append to the log, never rewrite it.
            let role = ProcessInfo.processInfo.environment["DATABASE_ROLE"] ?? "lender_app"
            configuration.role = role.isEmpty ? nil : role
            try await PostgresPool.with(configuration: configuration, options: .init(size: 2), logger: logger) { pool in
                let rows = try await pool.query("SELECT user_id FROM credentials WHERE handle = \(handle)")
                guard let userID = try rows.first?.decode("user_id", as: UUID.self) else {
                    throw CommandFailure("No user has the handle \(handle).")
                }
                let store = EventStore(
                    pool: pool, logger: logger, projections: lenderProjections,
                    personalData: try DataKeyOptions.personalData(pool: pool))
                var accounts = Accounts(pool: pool, gateway: CommandGateway(store: store, logger: logger))
                accounts.processor = try PaymentProcessors.configured(pool: pool)
                do {
                    let position = try await accounts.forget(UserID(userID), today: Day(Date()), metadata: EventMetadata(actorID: "operator"))
                    print("\(handle) is forgotten (position \(position)).")
                } catch let error as DomainError where error == .userNotFound {
                    throw CommandFailure("\(handle) was forgotten already.")
                }
            }
        }
    }

    /// A role granted by an operator, as access control (like credentials): who may read the
    /// whole log, and who may act on reports.
    enum Role: String {
        case auditor, `operator`

        var table: String { rawValue + "s" }

        func grant(_ handle: String, _ database: DatabaseOptions) async throws {
            try await withUser(handle, database) { pool, userID in
                try await pool.query("INSERT INTO \(unsafeRaw: table) (user_id) VALUES (\(userID)) ON CONFLICT DO NOTHING")
                print("\(handle) is an \(rawValue).")
            }
        }

        func revoke(_ handle: String, _ database: DatabaseOptions) async throws {
            try await withUser(handle, database) { pool, userID in
                try await pool.query("DELETE FROM \(unsafeRaw: table) WHERE user_id = \(userID)")
                print("\(handle) is not an \(rawValue).")
            }
        }
    }

    struct GrantAuditor: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Let a user read every bid history and the log.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The user's handle.") var handle: String
        func run() async throws { try await Role.auditor.grant(handle, database) }
    }

    struct RevokeAuditor: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Take a user's auditor role away.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The user's handle.") var handle: String
        func run() async throws { try await Role.auditor.revoke(handle, database) }
    }

    struct GrantOperator: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Let a user act on reports (SPEC §12.5), each act logged as theirs.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The user's handle.") var handle: String
        func run() async throws { try await Role.operator.grant(handle, database) }
    }

    struct RevokeOperator: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Take a user's operator role away.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The user's handle.") var handle: String
        func run() async throws { try await Role.operator.revoke(handle, database) }
    }

    static func withUser(
        _ handle: String, _ database: DatabaseOptions, _ body: (PostgresPool, UUID) async throws -> Void
    ) async throws {
        let logger = Logs.bootstrap()
        try await database.withPool(logger: logger) { pool in
            let rows = try await pool.query("SELECT user_id FROM credentials WHERE handle = \(handle)")
            guard let userID = try rows.first?.decode("user_id", as: UUID.self) else {
                throw CommandFailure("No user has the handle \(handle).")
            }
            try await body(pool, userID)
        }
    }
}
