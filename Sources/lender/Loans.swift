import ArgumentParser
import EventStore
import Foundation
import Marketplace
import Postgres
import Projections
import UseCases

struct Loans: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Operate on loans.", subcommands: [Expire.self])

    struct Expire: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Expire fundraising loans past their deadline and refund every lender.")

        @OptionGroup var database: DatabaseOptions

        @Option(help: "The day to expire as of, YYYY-MM-DD (default: today, UTC): loans whose deadline is before it expire.")
        var asOf: String?

        func run() async throws {
            let logger = Logs.bootstrap()
            let today: Day
            if let asOf {
                guard let day = Day(asOf) else { throw ValidationError("--as-of must be a date as YYYY-MM-DD.") }
                today = day
            } else {
                today = Day(Date())
            }
            let expired = try await database.withGateway(logger: logger) { gateway in
                try await ExpireLoans(gateway: gateway).run(today: today)
            }
            for loan in expired {
                let refunded = loan.refunds.reduce(0) { $0 + $1.amountCents }
                print("expired loan \(loan.loanID): \(refunded) cents refunded to \(loan.refunds.count) lenders (position \(loan.position))")
            }
            print("\(expired.count) loans expired")
        }
    }
}
