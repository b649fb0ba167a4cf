import Foundation
import Logging
import Mail
import ServiceLifecycle
import UseCases

/// Sends the outbox's due mail every `interval` while the server serves (`SMTP_URL`), and
/// prunes what was sent longer ago than `keepSeconds` (`OUTBOX_KEEP`). Several servers may
/// each run it: a row is claimed by one at a time.
public struct MailDelivery: Sendable {
    public var mailer: any Mailer
    public var interval: Duration
    public var keepSeconds: Int
    /// The first retry's wait; doubled at each try after it.
    public var retrySeconds: Int

    public init(mailer: any Mailer, interval: Duration = .seconds(1), keepSeconds: Int = 7 * 86_400, retrySeconds: Int = 5) {
        self.mailer = mailer
        self.interval = interval
        self.keepSeconds = keepSeconds
        self.retrySeconds = retrySeconds
    }
}

struct OutboxService: Service {
    let outbox: Outbox
    let delivery: MailDelivery
    let logger: Logger

    func run() async throws {
        var rounds = 0
        while !Task.isShuttingDownGracefully {
            do {
                // Until a round finds nothing to send, at once; then every interval.
                var round = try await outbox.sendDue(with: delivery.mailer)
                while round.sent + round.failed > 0, !Task.isShuttingDownGracefully {
                    round = try await outbox.sendDue(with: delivery.mailer)
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
