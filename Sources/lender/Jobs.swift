import ArgumentParser
import EventStore
import Foundation
import Marketplace
import Payments
import Postgres
import Projections
import UseCases

struct JobsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jobs", abstract: "The time-driven work that `lender serve` does every JOBS_EVERY.",
        subcommands: [Run.self])

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Expire bids and postings, complete bookings and expire loans that are due, once.")

        @OptionGroup var database: DatabaseOptions

        @Option(help: "Run as it would be on this day, YYYY-MM-DD, today or later (default: today, UTC): for rehearsals.")
        var asOf: String?

        func run() async throws {
            let logger = Logs.bootstrap()
            let now = Date()
            let today = Day(now)
            var asOfDay = today
            if let asOf {
                guard let day = Day(asOf) else { throw ValidationError("--as-of must be a date as YYYY-MM-DD.") }
                guard today <= day else { throw ValidationError("--as-of must be today or later: what is past is done.") }
                asOfDay = day
            }
            // The instant a bid's week is counted to: now, moved on by as many days.
            let asOfNow = now.addingTimeInterval(Double(asOfDay.ordinal - today.ordinal) * 86_400)
            let (day, instant) = (asOfDay, asOfNow)
            let report = try await database.withGateway(logger: logger) { gateway in
                let processor = try PaymentProcessors.configured(pool: gateway.store.pool)
                return try await Jobs(commands: ItemCommands(gateway: gateway, processor: processor)).run(today: day, now: instant)
            }
            print(
                "jobs as of \(day): \(report.bidsExpired) bids expired, \(report.postingsExpired) postings expired, "
                    + "\(report.bookingsCompleted) bookings completed, \(report.bookingsReminded) bookings reminded, "
                    + "\(report.reviewWindowsClosed) review windows closed, "
                    + "\(report.loansExpired) loans expired, \(report.suspensionsEnded) suspensions ended, "
                    + "\(report.searchWordsLearned) search words learned, "
                    + "\(report.photosCollected) unused photos deleted, \(report.searchWordsForgotten) search words forgotten "
                    + "(\(report.items) items written\(report.failures > 0 ? ", \(report.failures) failed: see the log" : ""))")
        }
    }
}
