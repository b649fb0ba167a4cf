import Foundation
import Logging
import Mail
import ServiceLifecycle
import UseCases

/// Fans new notices out to mail and push, sends the outbox's due mail (`SMTP_URL`) and pushes
/// every `interval` while the server serves, and prunes what was sent longer ago than
/// `keepSeconds` (`OUTBOX_KEEP`). Several servers may each run it: a row is claimed by one at
/// a time, and the fan-out is one server's at a time.
public struct MailDelivery: Sendable {
    /// Without one (no `SMTP_URL`), mail waits in the outbox.
    public var mailer: (any Mailer)?
    public var interval: Duration
    public var keepSeconds: Int
    /// The first retry's wait; doubled at each try after it.
    public var retrySeconds: Int

    public init(mailer: (any Mailer)?, interval: Duration = .seconds(1), keepSeconds: Int = 7 * 86_400, retrySeconds: Int = 5) {
        self.mailer = mailer
        self.interval = interval
        self.keepSeconds = keepSeconds
        self.retrySeconds = retrySeconds
    }
}

struct OutboxService: Service {
    let outbox: Outbox
    let notifier: Notifier
    let pusher: any PushSender
    let delivery: MailDelivery
    let logger: Logger

    func run() async throws {
        var rounds = 0
        while !Task.isShuttingDownGracefully {
            do {
                // Until a round finds nothing to do, at once; then every interval.
                while try await notifier.fanOut() > 0, !Task.isShuttingDownGracefully {}
                var round = try await outbox.sendDue(mailer: delivery.mailer, pusher: pusher)
                while round.sent + round.failed > 0, !Task.isShuttingDownGracefully {
                    round = try await outbox.sendDue(mailer: delivery.mailer, pusher: pusher)
                }
                try await outbox.measure()
                rounds += 1
                if rounds % 3600 == 0 { try await outbox.prune(keepingSeconds: delivery.keepSeconds) }
            } catch {
                logger.error("the outbox's round failed", metadata: ["error": "\(error)"])
            }
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: delivery.interval) }
            } catch {
                return
            }
        }
    }
}
