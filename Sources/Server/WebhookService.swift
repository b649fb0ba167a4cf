import Logging
import ServiceLifecycle
import UseCases

/// Sends webhooks while the server serves (SPEC §12.6): rounds one after another while they
/// find work, then one every `interval`. Several servers may each run it: an endpoint is
/// claimed by one at a time. Each round's HTTP clients are shut down as the round ends, the
/// last on shutdown, once the post in flight has had its timeout at most.
struct WebhookService: Service {
    let webhooks: Webhooks
    let poster: any WebhookPoster
    let logger: Logger

    func run() async throws {
        while !Task.isShuttingDownGracefully {
            do {
                var round = try await webhooks.sendDue(poster: poster)
                while round.didWork, !Task.isShuttingDownGracefully {
                    round = try await webhooks.sendDue(poster: poster)
                }
            } catch {
                logger.error("the webhooks' round failed", metadata: ["error": "\(error)"])
            }
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: webhooks.settings.interval) }
            } catch {
                return  // shutting down
            }
        }
    }
}
