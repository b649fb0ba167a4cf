import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// `lender audit money`: every balance and every loan's money recomputed from the log alone,
/// in one snapshot, and held against each other, against the views, and against the
/// processor's own books. What it proves is in docs/OPERATIONS.md.
///
/// Money enters only by a card charge (a deposit, a checkout or a repayment paid by card, a
/// rental's captured authorisation) and leaves only as a loan's funds paid out to its borrower,
/// a refund to a card, a payout to a bank account (from when it is asked for), or an
/// operator's settlement outside Lender, so
///
///     charged in − refunded out − paid out − settled = Σ balances (holds included) + Σ escrow
///                                            + Σ loans' funds (less what an expiry refunded) + fees earned
///
/// Each rental booking's escrow is what was paid in less what was refunded, paid out and
/// earned: zero once it ended. Each hold is placed once and ends once (released, or captured
/// by its booking), and none is open on a bid that is no longer pending.
/// and within it each transfer balances: a lender's checkout payments equal the shares they
/// bought, a loan's repayments equal what its borrower paid and what its lenders were credited,
/// an expiry refunds exactly the loan's funds.
public struct MoneyAudit: Sendable {
    /// One thing that does not add up, named by who or what it concerns.
    public struct Imbalance: Sendable, Hashable, CustomStringConvertible {
        public var subject: String
        public var message: String
        public var description: String { "\(subject): \(message)" }
    }

    public struct Report: Sendable {
        public var head: Int64
        public var chargedInCents = 0
        public var balancesCents = 0
        public var lentOutCents = 0
        public var repaidCents = 0
        /// Repayments recorded before money moved exactly once (migration 0010), which no
        /// borrower paid: credits made from nothing then, counted here, not as imbalances.
        public var unpaidBeforeEpochCents = 0
        /// Rentals (SPEC §12.2): refunds to cards, balances held for bids, bookings' escrow, fees.
        public var refundedOutCents = 0
        public var heldCents = 0
        public var escrowCents = 0
        /// Of the escrow (SPEC §12.5): deposits of completed bookings still held (claimed ones
        /// among them), and whatever disputed bookings hold, frozen until an operator resolves.
        public var depositsHeldCents = 0
        public var depositsClaimedCents = 0
        public var frozenCents = 0
        /// Deposits given back when their window closed.
        public var depositsReleasedCents = 0
        public var feesEarnedCents = 0
        /// Payouts (SPEC §12.3): asked for and not failed (sent, or on their way).
        public var paidOutCents = 0
        public var payouts = 0
        /// Balances operators settled outside Lender (`BalanceSettled`).
        public var settledOutCents = 0
        public var bookings = 0
        public var users = 0
        public var loans = 0
        public var imbalances: [Imbalance] = []
    }

    /// What a charge id's amount is at the processor, if it knows it (nil: unknown there, or
    /// no processor to ask).
    public typealias ProcessorLookup = @Sendable (String) async throws -> (amountCents: Int, isRefunded: Bool, refundedCents: Int)?
    /// Whether the processor still holds an authorisation open (neither voided nor captured);
    /// nil when it does not know it.
    public typealias AuthorizationLookup = @Sendable (String) async throws -> Bool?
    /// Every transfer the payout processor holds, by idempotency key: its id, amount, and
    /// whether it was sent.
    public typealias TransfersLookup = @Sendable () async throws -> [String: (id: String, amountCents: Int, sent: Bool)]

    /// How long a released card hold may stay open at the processor before it is an imbalance:
    /// the void follows the release's commit, and reconciliation makes one that was lost.
    public static let voidGraceSeconds: TimeInterval = 300

    public init() {}

    public func run(
        pool: PostgresPool, processor: ProcessorLookup? = nil, authorizations: AuthorizationLookup? = nil,
        transfers: TransfersLookup? = nil, pageSize: Int = 5000
    ) async throws -> Report {
        var books = Books()
        let (head, names, views) = try await pool.withConnection { connection in
            try await connection.withTransaction { connection in
                try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                books.epoch = try await connection.query("SELECT position FROM money_epoch").first?.decode(0, as: Int64.self) ?? 0
                let head = try await connection.query("SELECT position FROM log_head").single().decode("position", as: Int64.self)
                var after: Int64 = 0
                while after < head {
                    let rows = try await connection.query(
                        """
                        SELECT \(unsafeRaw: EventStore.columns) FROM events
                        WHERE position > \(after) AND position <= \(head)
                          AND (stream_id LIKE 'user-%' OR stream_id LIKE 'loan-%'
                               OR (stream_id LIKE 'item-%' AND type = ANY (\(Books.itemTypes))))
                        ORDER BY position LIMIT \(pageSize)
                        """)
                    guard let last = rows.last else { break }
                    for row in rows { try books.record(try EventStore.recordedEvent(row)) }
                    after = try last.decode("position", as: Int64.self)
                }
                let names = try await connection.query("SELECT user_id, handle, balance_cents, held_cents FROM users_view")
                let loans = try await connection.query("SELECT loan_id, funded_cents, repaid_cents FROM loans_view")
                return (head, names, loans)
            }
        }
        var handles = [UserID: String]()
        var viewBalances = [UserID: Int]()
        var viewHeld = [UserID: Int]()
        for row in names {
            let id = UserID(try row.decode("user_id", as: UUID.self))
            handles[id] = try row.decode("handle", as: String.self)
            viewBalances[id] = try row.decode("balance_cents", as: Int.self)
            viewHeld[id] = try row.decode("held_cents", as: Int.self)
        }
        var viewLoans = [LoanID: (funded: Int, repaid: Int)]()
        for row in views {
            viewLoans[LoanID(try row.decode("loan_id", as: UUID.self))] = (try row.decode("funded_cents"), try row.decode("repaid_cents"))
        }
        var report = books.report(
            head: head, handles: handles, viewBalances: viewBalances, viewHeld: viewHeld, viewLoans: viewLoans)
        if let authorizations {
            let before = Date().addingTimeInterval(-Self.voidGraceSeconds)
            for (authorization, release) in books.releasedCardHolds.sorted(by: { $0.key < $1.key }) where release.at < before {
                guard try await authorizations(authorization) == true else { continue }
                report.imbalances.append(
                    Imbalance(
                        subject: "bid \(release.bid) of \(books.userName(release.user, handles))",
                        message: "its card hold \(authorization) was released in the log but is open at the processor; lender payments reconcile voids it"))
            }
        }
        if let transfers {
            report.imbalances += Self.payoutImbalances(books.payouts, try await transfers(), handles: handles, books: books)
        }
        if let processor {
            // The first release's sandbox kept no books: its charges are not asked about.
            for (chargeID, charge) in books.charges.sorted(by: { $0.key < $1.key }) where charge.position > books.epoch {
                let name = books.userName(charge.user, handles)
                guard let known = try await processor(chargeID) else {
                    report.imbalances.append(Imbalance(subject: name, message: "the processor has no charge \(chargeID)"))
                    continue
                }
                if known.amountCents != charge.amountCents {
                    report.imbalances.append(
                        Imbalance(
                            subject: name,
                            message: "charge \(chargeID) is \(charge.amountCents) cents in the log, \(known.amountCents) at the processor"))
                }
                let refunded = books.refundsByCharge[chargeID] ?? 0
                if known.isRefunded {
                    report.imbalances.append(
                        Imbalance(subject: name, message: "charge \(chargeID) is in the log but was refunded at the processor"))
                } else if known.refundedCents != refunded,
                    try await Self.refundedNow(chargeID, pool: pool) != known.refundedCents
                {
                    // (As the log stands now, past the snapshot: a cancellation committed since,
                    // whose refund the processor has made, is no imbalance.)
                    let pending = refunded > known.refundedCents ? "; lender payments reconcile makes the rest" : ""
                    report.imbalances.append(
                        Imbalance(
                            subject: charge.booking.map { "booking \($0)" } ?? name,
                            message: "charge \(chargeID) is refunded \(refunded) cents in the log, \(known.refundedCents) at the processor\(pending)"))
                }
            }
        }
        return report
    }

    /// Each payout held against the processor's transfers: one sent in the log is one sent there,
    /// of its amount; one failed in the log was sent nowhere; no transfer is for a payout the
    /// log does not have. A payout still pending after the grace is named for reconciliation.
    static func payoutImbalances(
        _ payouts: [PayoutID: Books.PayoutEntry], _ transfers: [String: (id: String, amountCents: Int, sent: Bool)],
        handles: [UserID: String], books: Books
    ) -> [Imbalance] {
        var imbalances = [Imbalance]()
        let before = Date().addingTimeInterval(-voidGraceSeconds)
        for (id, payout) in payouts.sorted(by: { $0.key.description < $1.key.description }) {
            let subject = "payout \(id) of \(books.userName(payout.user, handles))"
            let transfer = transfers[PayoutKeys.key(id)]
            switch payout.status {
            case .sent:
                guard let transfer, transfer.sent else {
                    imbalances.append(Imbalance(subject: subject, message: "sent in the log, but the processor holds no transfer of it"))
                    continue
                }
                if transfer.amountCents != payout.amount || transfer.id != payout.transferID {
                    imbalances.append(
                        Imbalance(
                            subject: subject,
                            message: "sent in the log as \(payout.transferID ?? "?") of \(payout.amount) cents; the processor holds \(transfer.id) of \(transfer.amountCents)"))
                }
            case .failed:
                if let transfer, transfer.sent {
                    imbalances.append(
                        Imbalance(subject: subject, message: "failed and credited back in the log, but the processor sent \(transfer.id): paid twice"))
                }
            case .pending:
                if payout.at < before {
                    imbalances.append(
                        Imbalance(subject: subject, message: "asked for but neither sent nor failed; lender payouts reconcile finishes it"))
                }
            }
        }
        let known = Set(payouts.keys.map(PayoutKeys.key))
        for (key, transfer) in transfers.sorted(by: { $0.key < $1.key }) where !known.contains(key) {
            imbalances.append(Imbalance(subject: "transfer \(transfer.id)", message: "the processor holds it (\(key)) for no payout in the log"))
        }
        return imbalances
    }

    /// The cents the log refunds of a charge now.
    static func refundedNow(_ chargeID: String, pool: PostgresPool) async throws -> Int {
        try await pool.query(
            """
            SELECT coalesce(sum((data->>'amountCents')::int8), 0)::int8 AS refunded FROM events
            WHERE type = 'RentalRefunded' AND data->>'chargeID' = \(chargeID)
            """
        ).single().decode("refunded", as: Int.self)
    }
}

/// The money, as the log tells it, folded event by event.
struct Books {
    struct PayoutEntry {
        var user: UserID
        var amount: Int
        var status: PayoutStatus
        var transferID: String?
        var at: Date
    }

    struct Account {
        var balance = 0
        var held = 0
        var lowest = 0
        var checkoutPaid = 0
        var sharesBought = 0
    }

    struct Loan {
        var amount = 0
        var funded = 0
        var repaid = 0
        var paidByBorrower = 0
        var credited = 0
        var refundsDue = 0
        var refunded = 0
        var creditsInEvents = 0
        var unpaidBeforeEpoch = 0
    }

    /// A rental bid's hold, from its placing to its end.
    struct Hold {
        var user: UserID
        var amount: Int
        var placed = 1
        var ended = 0
    }

    /// A rental booking's money: paid in, and where it went.
    struct Booking {
        var paid = 0
        var refunded = 0
        var paidOut = 0
        var fees = 0
        /// Completed, or cancelled (then nothing is left).
        var ended = false
        var cancelled = false
        /// Its deposit, left in escrow by completion until released or divided by an operator.
        var deposit = 0
        var depositSettled = false
        var claimed = 0
        var disputed = false
        var escrow: Int { paid - refunded - paidOut - fees }
        /// What it must still hold once ended.
        var owed: Int { cancelled || depositSettled ? 0 : deposit }
    }

    /// The item events that end holds and bookings.
    static let itemTypes = [
        BidWithdrawn.eventType, BidRejected.eventType, BidApproved.eventType, BookingCompleted.eventType,
        BookingCancelled.eventType, BookingConfirmed.eventType, DepositReleased.eventType, DepositClaimed.eventType,
        DisputeOpened.eventType, DisputeResolved.eventType,
    ]

    var accounts = [UserID: Account]()
    var loans = [LoanID: Loan]()
    var holds = [BidID: Hold]()
    var depositsReleased = 0
    /// Bids no longer pending: their holds must have ended.
    var endedBids = Set<BidID>()
    var bookings = [BookingID: Booking]()
    var refundedOut = 0
    var feesEarned = 0
    var refundsByCharge = [String: Int]()
    var payouts = [PayoutID: PayoutEntry]()
    var paidOut = 0
    var settledOut = 0
    var payoutProblems = [(user: UserID, message: String)]()
    /// Card holds the log released: each must be voided at the processor.
    var releasedCardHolds = [String: (bid: BidID, user: UserID, at: Date)]()
    var recordedAt = Date(timeIntervalSince1970: 0)
    var charges = [String: (user: UserID, amountCents: Int, position: Int64, booking: BookingID?)]()
    /// The log's position when migration 0010 ran (see `MoneyAudit.Report.unpaidBeforeEpochCents`).
    var epoch: Int64 = 0
    var position: Int64 = 0
    var duplicateCharges = [(user: UserID, chargeID: String)]()
    /// Repayment payments that name no loan.
    var unattributed = [(user: UserID, amountCents: Int)]()
    var chargedIn = 0

    mutating func record(_ event: RecordedEvent) throws {
        let category = event.streamID.category
        let id = String(event.streamID.rawValue.dropFirst(category.count + 1))
        position = event.position
        recordedAt = event.recordedAt
        if category == Aggregate.user.category, let user = UserID(id) {
            try record(try Aggregate.user.codec.decode(event), of: user)
        } else if category == Aggregate.loan.category, let loan = LoanID(id) {
            record(try Aggregate.loan.codec.decode(event), of: loan)
        } else if category == Aggregate.item.category {
            switch try Aggregate.item.codec.decode(event) {
            case .bidWithdrawn(let withdrawn): endedBids.insert(withdrawn.bidID)
            case .bidRejected(let rejected): endedBids.insert(rejected.bidID)
            case .bidApproved(let approved): endedBids.insert(approved.bidID)
            case .bookingConfirmed(let confirmed):
                if let deposit = confirmed.depositCents { bookings[confirmed.bookingID, default: Booking()].deposit = deposit }
            case .bookingCompleted(let completed): bookings[completed.bookingID]?.ended = true
            case .bookingCancelled(let cancelled):
                bookings[cancelled.bookingID]?.ended = true
                bookings[cancelled.bookingID]?.cancelled = true
            case .depositReleased(let released):
                bookings[released.bookingID]?.depositSettled = true
                depositsReleased += released.amountCents
            case .depositClaimed(let claimed): bookings[claimed.bookingID]?.claimed = claimed.amountCents
            case .disputeOpened(let opened): bookings[opened.bookingID]?.disputed = true
            case .disputeResolved(let resolved):
                bookings[resolved.bookingID]?.depositSettled = true
                bookings[resolved.bookingID]?.disputed = false
                bookings[resolved.bookingID]?.claimed = 0
            default: break
            }
        }
    }

    /// A rental's money on a user's stream (SPEC §12.2).
    mutating func recordRental(_ event: UserEvent, of user: UserID, _ account: inout Account) {
        switch event {
        case .rentalHoldPlaced(let placed):
            if let known = holds[placed.bidID] {
                holds[placed.bidID]?.placed = known.placed + 1
            } else {
                holds[placed.bidID] = Hold(user: user, amount: placed.hold.amountCents)
            }
            if placed.hold.method == .balance { account.held += placed.hold.amountCents }
        case .rentalHoldReleased(let released):
            holds[released.bidID, default: Hold(user: user, amount: 0, placed: 0)].ended += 1
            if let authorization = released.hold.authorizationID {
                releasedCardHolds[authorization] = (released.bidID, user, recordedAt)
            }
            if released.hold.method == .balance { account.held -= released.hold.amountCents }
        case .rentalPaid(let paid):
            holds[paid.bookingID, default: Hold(user: user, amount: 0, placed: 0)].ended += 1
            if paid.method == .balance {
                account.balance -= paid.amountCents
                account.held -= paid.amountCents
            } else if let chargeID = paid.chargeID {
                charge(chargeID, paid.amountCents, by: user, booking: paid.bookingID)
            }
            bookings[paid.bookingID, default: Booking()].paid += paid.amountCents
        case .rentalRefunded(let refund):
            if refund.method == .balance {
                account.balance += refund.amountCents
            } else {
                refundedOut += refund.amountCents
                if let chargeID = refund.chargeID { refundsByCharge[chargeID, default: 0] += refund.amountCents }
            }
            bookings[refund.bookingID, default: Booking()].refunded += refund.amountCents
        case .rentalEarned(let earned):
            account.balance += earned.payoutCents
            feesEarned += earned.feesCents
            bookings[earned.bookingID, default: Booking()].paidOut += earned.payoutCents
            bookings[earned.bookingID, default: Booking()].fees += earned.feesCents
        default:
            break
        }
    }

    mutating func record(_ event: UserEvent, of user: UserID) throws {
        var account = accounts[user, default: Account()]
        switch event {
        case .fundsDeposited(let deposit):
            account.balance += deposit.amountCents
            charge(deposit.chargeID, deposit.amountCents, by: user)
        case .balanceDebited(let debit):
            account.balance -= debit.amountCents
            switch debit.reason {
            case .checkout: account.checkoutPaid += debit.amountCents
            case .repayment: paidForRepayment(debit.loanID, debit.amountCents, by: user)
            }
        case .cardCharged(let charged):
            charge(charged.chargeID, charged.amountCents, by: user)
            switch charged.purpose ?? .checkout {
            case .checkout: account.checkoutPaid += charged.amountCents
            case .repayment: paidForRepayment(charged.loanID, charged.amountCents, by: user)
            }
        case .balanceCredited(let credit):
            account.balance += credit.amountCents
            switch credit.reason {
            case .repayment: loans[credit.loanID, default: Loan()].credited += credit.amountCents
            case .refund: loans[credit.loanID, default: Loan()].refunded += credit.amountCents
            }
        case .payoutRequested(let requested):
            account.balance -= requested.amountCents
            paidOut += requested.amountCents
            if payouts[requested.payoutID] != nil { payoutProblems.append((user, "payout \(requested.payoutID) was asked for twice")) }
            payouts[requested.payoutID] = PayoutEntry(
                user: user, amount: requested.amountCents, status: .pending, at: requested.requestedAt)
        case .payoutSent(let sent):
            if payouts[sent.payoutID]?.status != .pending {
                payoutProblems.append((user, "payout \(sent.payoutID) was sent when it was not pending"))
            }
            payouts[sent.payoutID]?.status = .sent
            payouts[sent.payoutID]?.transferID = sent.transferID
        case .payoutFailed(let failed):
            if payouts[failed.payoutID]?.status != .pending || payouts[failed.payoutID]?.amount != failed.amountCents {
                payoutProblems.append((user, "payout \(failed.payoutID) was credited back when it was not pending, or not its amount"))
            }
            account.balance += failed.amountCents
            paidOut -= failed.amountCents
            payouts[failed.payoutID]?.status = .failed
        case .balanceSettled(let settled):
            account.balance -= settled.amountCents
            settledOut += settled.amountCents
        default:
            recordRental(event, of: user, &account)
        }
        account.lowest = min(account.lowest, account.balance)
        accounts[user] = account
    }

    /// A borrower's payment of a repayment, to the loan it names.
    mutating func paidForRepayment(_ loanID: LoanID?, _ amount: Int, by user: UserID) {
        guard let loanID else {
            unattributed.append((user, amount))
            return
        }
        loans[loanID, default: Loan()].paidByBorrower += amount
    }

    mutating func charge(_ chargeID: String, _ amount: Int, by user: UserID, booking: BookingID? = nil) {
        chargedIn += amount
        if charges[chargeID] != nil { duplicateCharges.append((user, chargeID)) }
        charges[chargeID] = (user, amount, position, booking)
    }

    mutating func record(_ event: LoanEvent, of loanID: LoanID) {
        var loan = loans[loanID, default: Loan()]
        switch event {
        case .posted(let posted):
            loan.amount = posted.amountCents
        case .sharePurchased(let purchase):
            loan.funded += purchase.amountCents
            accounts[purchase.lenderID, default: Account()].sharesBought += purchase.amountCents
        case .repaymentRecorded(let recorded):
            loan.repaid += recorded.amountCents
            if position <= epoch { loan.unpaidBeforeEpoch += recorded.amountCents }
            loan.creditsInEvents += recorded.credits.reduce(0) { $0 + $1.amountCents }
        case .expired(let expired):
            loan.refundsDue += expired.refunds.reduce(0) { $0 + $1.amountCents }
        case .takenDown(let takenDown):
            loan.refundsDue += takenDown.refunds.reduce(0) { $0 + $1.amountCents }
        case .funded, .repaid, .photoAdded, .photoRemoved, .suspended, .reinstated:
            break
        }
        loans[loanID] = loan
    }

    func userName(_ user: UserID, _ handles: [UserID: String]) -> String {
        "user \(user)" + (handles[user].map { " (\($0))" } ?? "")
    }

    func report(
        head: Int64, handles: [UserID: String], viewBalances: [UserID: Int], viewHeld: [UserID: Int],
        viewLoans: [LoanID: (funded: Int, repaid: Int)]
    ) -> MoneyAudit.Report {
        var report = MoneyAudit.Report(head: head)
        var problems = [MoneyAudit.Imbalance]()
        func problem(_ subject: String, _ message: String) { problems.append(.init(subject: subject, message: message)) }

        for (user, account) in accounts.sorted(by: { $0.key.description < $1.key.description }) {
            let name = userName(user, handles)
            if account.lowest < 0 { problem(name, "the balance fell to \(account.lowest) cents") }
            if account.checkoutPaid != account.sharesBought {
                problem(name, "paid \(account.checkoutPaid) cents at checkouts for \(account.sharesBought) cents of loan shares")
            }
            if let view = viewBalances[user], view != account.balance {
                problem(name, "the balance is \(account.balance) cents from the log, \(view) cents in users_view")
            }
            if account.held < 0 || account.held > max(account.balance, 0) {
                problem(name, "holds \(account.held) cents of a balance of \(account.balance)")
            }
            if let view = viewHeld[user], view != account.held {
                problem(name, "holds \(account.held) cents from the log, \(view) cents in users_view")
            }
            report.balancesCents += account.balance
            report.heldCents += account.held
        }
        for (user, chargeID) in duplicateCharges { problem(userName(user, handles), "the charge \(chargeID) is recorded twice") }
        for (user, message) in payoutProblems { problem(userName(user, handles), message) }
        for (user, amount) in unattributed {
            problem(userName(user, handles), "paid \(amount) cents for a repayment of no loan")
        }
        for (loanID, loan) in loans.sorted(by: { $0.key.description < $1.key.description }) {
            let name = "loan \(loanID)"
            if loan.funded > loan.amount { problem(name, "funded \(loan.funded) cents of \(loan.amount)") }
            if loan.creditsInEvents != loan.repaid {
                problem(name, "repayments of \(loan.repaid) cents were split into \(loan.creditsInEvents) cents of credits")
            }
            if loan.credited != loan.repaid {
                problem(name, "repaid \(loan.repaid) cents, but the lenders were credited \(loan.credited) cents")
            }
            if loan.paidByBorrower + loan.unpaidBeforeEpoch != loan.repaid {
                problem(name, "repaid \(loan.repaid) cents, but the borrower paid \(loan.paidByBorrower) cents")
            }
            if loan.refunded != loan.refundsDue { problem(name, "an expiry owed \(loan.refundsDue) cents, credited \(loan.refunded)") }
            if let view = viewLoans[loanID], view != (loan.funded, loan.repaid) {
                problem(
                    name,
                    "funded \(loan.funded) and repaid \(loan.repaid) cents from the log, \(view.funded) and \(view.repaid) in loans_view")
            }
            report.lentOutCents += loan.funded - loan.refunded
            report.repaidCents += loan.repaid
            report.unpaidBeforeEpochCents += loan.unpaidBeforeEpoch
        }
        for (bidID, hold) in holds.sorted(by: { $0.key.description < $1.key.description }) {
            let name = "bid \(bidID) of \(userName(hold.user, handles))"
            if hold.placed != 1 { problem(name, "its hold was placed \(hold.placed) times") }
            if hold.ended > 1 { problem(name, "its hold was released or captured \(hold.ended) times") }
            if hold.ended == 0 && endedBids.contains(bidID) { problem(name, "the bid ended but its hold of \(hold.amount) cents did not") }
        }
        for (bookingID, booking) in bookings.sorted(by: { $0.key.description < $1.key.description }) {
            let name = "booking \(bookingID)"
            if booking.escrow < 0 { problem(name, "paid out \(-booking.escrow) cents more than was paid in") }
            if booking.ended && booking.escrow != booking.owed {
                problem(name, "it ended with \(booking.escrow) cents in escrow, not the \(booking.owed) its deposit leaves")
            }
            report.escrowCents += booking.escrow
            if booking.disputed {
                report.frozenCents += booking.escrow
            } else if booking.ended {
                report.depositsHeldCents += booking.escrow
                report.depositsClaimedCents += booking.claimed
            }
        }
        report.chargedInCents = chargedIn
        report.refundedOutCents = refundedOut
        report.feesEarnedCents = feesEarned
        report.depositsReleasedCents = depositsReleased
        report.paidOutCents = paidOut
        report.settledOutCents = settledOut
        report.payouts = payouts.count
        report.bookings = bookings.count
        let held = report.balancesCents + report.escrowCents + report.lentOutCents + report.feesEarnedCents
        if chargedIn - refundedOut - paidOut - settledOut + report.unpaidBeforeEpochCents != held {
            problem(
                "the marketplace",
                "charged in \(chargedIn) cents, refunded \(refundedOut), paid out \(paidOut) and settled \(settledOut), but balances hold "
                    + "\(report.balancesCents), escrow \(report.escrowCents), loans \(report.lentOutCents) and fees \(report.feesEarnedCents)")
        }
        report.users = accounts.count
        report.loans = loans.count
        report.imbalances = problems
        return report
    }
}
