import Aggregates
import EventStore
import Foundation
import Logging
import Marketplace
import Projections
import Synchronization

/// What one run of the jobs did.
public struct JobsReport: Sendable, Hashable {
    /// Items whose stream the run appended to, and what it appended there.
    public var items = 0
    public var bidsExpired = 0
    public var postingsExpired = 0
    public var bookingsCompleted = 0
    public var bookingsReminded = 0
    public var loansExpired = 0
    public var reviewWindowsClosed = 0
    /// Suspensions whose `until` passed, ended (SPEC §12.5).
    public var suspensionsEnded = 0
    /// Words new to the search's spelling list (`SearchWords`).
    public var searchWordsLearned = 0
    /// Images no item, loan or profile shows any more, deleted (once an hour).
    public var photosCollected = 0
    /// Words of the search no listing shows any more, forgotten (once an hour).
    public var searchWordsForgotten = 0
    /// Items whose step failed (logged), due again at the next run.
    public var failures = 0
}

/// The time-driven work (SPEC §12.1): pending bids expire once their first day has begun or a
/// week after they were placed, postings past their window expire, bookings whose last day
/// has passed complete, fundraising loans past their deadline expire, suspensions past their
/// `until` end. Each item is one append
/// with the version it was decided on, so several servers running the jobs at once never do a
/// step twice: the loser decides again on what the winner wrote and finds nothing left to do.
/// They also teach the search the words posted since (SPEC §12.7: a typo forgiven), and,
/// once an hour, delete the photos and forget the words nothing shows any more.
public struct Jobs: Sendable {
    let commands: ItemCommands
    var gateway: CommandGateway { commands.gateway }

    /// Expiring a bid releases its hold; completing a booking pays its owner.
    public init(commands: ItemCommands) { self.commands = commands }

    /// As of `today`, with `now` the instant a bid's week is counted to.
    public func run(today: Day, now: Date) async throws -> JobsReport {
        var report = JobsReport()
        let staleBefore = now.addingTimeInterval(-Double(ItemDecider.bidLifetimeDays) * 86_400)
        let metadata = EventMetadata(actorID: "operator:lender jobs")
        // First, so that a posting back from a suspension is seen by this run's expiry. A
        // rehearsal's later `now` (`--as-of`) never ends a suspension for real.
        report.suspensionsEnded = try await Moderation(commands: commands).endSuspensions(now: min(now, Date()))
        for (itemID, dueBids) in try await DueWork(gateway.store.pool).items(today: today, staleBefore: staleBefore) {
            do {
                let handled = try await commands.handle(
                    .runJobs(today: today, staleBids: dueBids), on: itemID, actor: .system, metadata: metadata)
                guard handled.append != nil else { continue }
                report.items += 1
                for event in handled.events {
                    switch event {
                    case .bidRejected: report.bidsExpired += 1
                    case .expired: report.postingsExpired += 1
                    case .bookingCompleted: report.bookingsCompleted += 1
                    case .bookingReminded: report.bookingsReminded += 1
                    case .reviewWindowClosed: report.reviewWindowsClosed += 1
                    default: break
                    }
                }
            } catch let error as DomainError where error.kind == .conflict {
                gateway.logger.info("job step not done", metadata: ["item": "\(itemID)", "reason": "\(error.code)"])
            } catch {
                // One item's failure is its own: the others, and the loans, are still done; it is
                // due again at the next run.
                gateway.logger.error("job step failed", metadata: ["item": "\(itemID)", "error": "\(error)"])
                report.failures += 1
            }
        }
        report.loansExpired = try await ExpireLoans(gateway: gateway).run(today: today).count
        report.searchWordsLearned = try await SearchWords(gateway.store.pool).learn()
        if Self.hourIsDue() {
            report.photosCollected = try await PhotoLibrary.collectGarbage(gateway.store.pool)
            report.searchWordsForgotten = try await SearchWords(gateway.store.pool).prune()
        }
        return report
    }

    /// When this process last did the hourly work: each reads every view's photos or words.
    static let lastHourly = Mutex<ContinuousClock.Instant?>(nil)

    static func hourIsDue(every: Duration = .seconds(3600)) -> Bool {
        let now = ContinuousClock.now
        return lastHourly.withLock { last in
            guard last.map({ now - $0 >= every }) ?? true else { return false }
            last = now
            return true
        }
    }
}
