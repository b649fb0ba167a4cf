import Foundation
import Logging
import Marketplace
import ServiceLifecycle
import UseCases

/// Runs the jobs (`Jobs`) every `interval` while the server serves (`JOBS_EVERY`). Several
/// servers may each run them: every step is an append with expected versions.
struct JobsService: Service {
    let jobs: Jobs
    let interval: Duration
    let logger: Logger

    func run() async throws {
        while !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return  // shutting down
            }
            do {
                let now = Date()
                let report = try await jobs.run(today: Day(now), now: now)
                if report.items > 0 || report.loansExpired > 0 || report.suspensionsEnded > 0 || report.photosCollected > 0
                    || report.failures > 0
                {
                    logger.info(
                        "ran the jobs",
                        metadata: [
                            "items": "\(report.items)", "bids_expired": "\(report.bidsExpired)",
                            "postings_expired": "\(report.postingsExpired)", "bookings_completed": "\(report.bookingsCompleted)",
                            "loans_expired": "\(report.loansExpired)", "suspensions_ended": "\(report.suspensionsEnded)",
                            "photos_collected": "\(report.photosCollected)",
                            "failures": "\(report.failures)",
                        ])
                }
            } catch {
                // What was not done is due at the next run; the server goes on.
                logger.error("the jobs failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
