import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres
import Testing
import TestSupport

@testable import Projections

/// The users' and loans' views are folds: an append reads its rows, folds its events into
/// them and writes back what they hold (a balance, not a change to it). Appends that commit
/// at once, on flushers of their own, must each read what the one before wrote.
@Suite("Views folded by the appends")
struct FoldedViewsTests {
    @Test func concurrentAppendsToTheSameRowsLoseNoDepositAndNoShare() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 4) { pool in
                // Four flushers: four batches in flight at once, each in its own transaction.
                let store = EventStore(pool: pool, logger: TestDatabase.logger, projections: lenderProjections, maxBatchesInFlight: 4)
                let users = (0..<3).map { _ in UserID() }
                for (index, user) in users.enumerated() { try await register(user, "f\(index)", store) }
                let loan = LoanID()
                try await post(loan, by: users[0], store)
                let appends = 120
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 1...appends {
                        group.addTask {
                            let lender = users[index % 3]
                            _ = try await store.append([
                                StreamAppend(
                                    .user(lender), expectedVersion: .any,
                                    events: [
                                        try Aggregate.user.codec.encode(
                                            .fundsDeposited(FundsDeposited(amountCents: index, cardID: CardID(), chargeID: "ch_\(index)")))
                                    ]),
                                StreamAppend(
                                    .loan(loan), expectedVersion: .any,
                                    events: [
                                        try Aggregate.loan.codec.encode(
                                            .sharePurchased(LoanSharePurchased(lenderID: lender, amountCents: index)))
                                    ]),
                            ])
                        }
                    }
                    try await group.waitForAll()
                }
                let expected = (0..<3).map { user in (1...appends).filter { $0 % 3 == user }.reduce(0, +) }
                for (index, user) in users.enumerated() {
                    let balance = try await pool.query("SELECT balance_cents FROM users_view WHERE user_id = \(user.rawValue)").single()
                    #expect(try balance.decode(0, as: Int.self) == expected[index], "f\(index)'s deposits")
                    let share = try await pool.query(
                        "SELECT amount_cents FROM loan_shares_view WHERE loan_id = \(loan.rawValue) AND lender_id = \(user.rawValue)"
                    ).single()
                    #expect(try share.decode(0, as: Int.self) == expected[index], "f\(index)'s share")
                }
                let funded = try await pool.query(
                    "SELECT funded_cents, lender_count FROM loans_view WHERE loan_id = \(loan.rawValue)").single()
                #expect(try funded.decode(0, as: Int.self) == (1...appends).reduce(0, +))
                #expect(try funded.decode(1, as: Int.self) == 3)
                let fundraising = try await pool.query("SELECT fundraising_loans FROM country_loans_view WHERE country_code = 'NP'")
                    .single()
                #expect(try fundraising.decode(0, as: Int.self) == 1)
            }
        }
    }

    /// A batch's reads are made from every append it may commit; an append refused for its
    /// version then drops out of what is applied, and each read must still be taken for what
    /// it is: a refused publication's (empty) reviews are not a loan's lenders.
    @Test func aRefusedAppendInTheBatchLeavesTheOthersNoticesWhole() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger, projections: lenderProjections)
                let (borrower, lender, loan) = (UserID(), UserID(), LoanID())
                for (user, handle) in [(borrower, "borrower"), (lender, "lender")] { try await register(user, handle, store) }
                try await post(loan, by: borrower, store)
                _ = try await store.append([
                    StreamAppend(
                        .loan(loan), expectedVersion: .any,
                        events: [try Aggregate.loan.codec.encode(.sharePurchased(LoanSharePurchased(lenderID: lender, amountCents: 2_500)))])
                ])
                // Publications refused for their version, beside news of the loan, all at once:
                // the group commit puts some of each in one batch.
                let rounds = 40
                let refused = try await withThrowingTaskGroup(of: Bool.self) { group in
                    for _ in 0..<rounds {
                        group.addTask {
                            do {
                                _ = try await store.append([
                                    StreamAppend(
                                        .item(ItemID()), expectedVersion: .exact(7),
                                        events: [try Aggregate.item.codec.encode(.reviewsPublished(ReviewsPublished(bookingID: BidID())))])
                                ])
                                return false
                            } catch {
                                return true
                            }
                        }
                        group.addTask {
                            _ = try await store.append([
                                StreamAppend(.loan(loan), expectedVersion: .any, events: [try Aggregate.loan.codec.encode(.repaid(LoanRepaid()))])
                            ])
                            return false
                        }
                    }
                    return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
                #expect(refused == rounds)
                let told = try await pool.query(
                    "SELECT count(*)::int AS n FROM feed_view WHERE user_id = \(lender.rawValue) AND kind = 'loan_repaid'"
                ).single()
                #expect(try told.decode("n", as: Int.self) == rounds, "each repayment told to the lender")
            }
        }
    }

    /// One open report a person a subject (`reports_view_open_once`), as the log orders them: a
    /// filing while the first is open is refused even when its append also resolves the first
    /// after it (the write-back's update then insert would have let it in); resolved first, it
    /// goes in.
    @Test func aSecondReportFiledBeforeTheFirstIsResolvedIsRefused() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger, projections: lenderProjections)
                let (reporter, subject) = (UserID(), UUID())
                let (first, second) = (ReportID(), ReportID())
                func filing(_ id: ReportID) throws -> StreamAppend {
                    StreamAppend(
                        .report(id), expectedVersion: .any,
                        events: [
                            try Aggregate.report.codec.encode(
                                .filed(ReportFiled(reportID: id, reporterID: reporter, subjectType: .item, subjectID: subject, reason: .scam, text: nil)))
                        ])
                }
                let resolution = StreamAppend(
                    .report(first), expectedVersion: .any,
                    events: [try Aggregate.report.codec.encode(.resolved(ReportResolved(operatorID: UserID(), action: .none, reason: "Fine")))])
                _ = try await store.append([try filing(first)])
                let refused = await #expect(throws: PostgresError.self) { try await store.append([try filing(second), resolution]) }
                #expect(refused?.isUniqueViolation == true && refused?.constraint == "reports_view_open_once", "\(String(describing: refused))")
                let open = { try await pool.query("SELECT report_id FROM reports_view WHERE status = 'open'").map { try $0.decode(0, as: ReportID.self) } }
                #expect(try await open() == [first], "nothing of the refused append written")
                _ = try await store.append([resolution, try filing(second)])
                #expect(try await open() == [second])
            }
        }
    }

    func register(_ user: UserID, _ handle: String, _ store: EventStore) async throws {
        _ = try await store.append([
            StreamAppend(
                .user(user), expectedVersion: .any,
                events: [
                    try Aggregate.user.codec.encode(
                        .registered(
                            UserRegistered(userID: user, handle: handle, displayName: handle, email: "\(handle)@example.org", country: "NP")))
                ])
        ])
    }

    func post(_ loan: LoanID, by borrower: UserID, _ store: EventStore) async throws {
        _ = try await store.append([
            StreamAppend(
                .loan(loan), expectedVersion: .any,
                events: [
                    try Aggregate.loan.codec.encode(
                        .posted(
                            LoanPosted(
                                loanID: loan, borrowerID: borrower, title: "Loom", description: "For weaving", sector: "Arts",
                                activity: "Weaving", countryCode: "NP", location: Location(lat: 27.7, lng: 85.3, place: "Kathmandu"),
                                amountCents: 1_000_000, deadline: Day(year: 2027, month: 1, day: 1)!)))
                ])
        ])
    }
}
