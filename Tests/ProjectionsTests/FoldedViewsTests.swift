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
                for (index, user) in users.enumerated() {
                    _ = try await store.append([
                        StreamAppend(
                            .user(user), expectedVersion: .any,
                            events: [
                                try Aggregate.user.codec.encode(
                                    .registered(
                                        UserRegistered(
                                            userID: user, handle: "f\(index)", displayName: "F \(index)", email: "f\(index)@example.org",
                                            country: "NP")))
                            ])
                    ])
                }
                let loan = LoanID()
                _ = try await store.append([
                    StreamAppend(
                        .loan(loan), expectedVersion: .any,
                        events: [
                            try Aggregate.loan.codec.encode(
                                .posted(
                                    LoanPosted(
                                        loanID: loan, borrowerID: users[0], title: "Loom", description: "For weaving", sector: "Arts",
                                        activity: "Weaving", countryCode: "NP", location: Location(lat: 27.7, lng: 85.3, place: "Kathmandu"),
                                        amountCents: 1_000_000, deadline: Day(year: 2027, month: 1, day: 1)!)))
                        ])
                ])
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
}
