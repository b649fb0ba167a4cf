import Logging
import ServiceLifecycle
import UseCases

/// Tells saved searches of new postings (`SearchAlerts`) every `interval` while the server
/// serves: until a round finds nothing new, at once; then every interval.
struct SearchAlertsService: Service {
    let alerts: SearchAlerts
    let interval: Duration
    let logger: Logger

    func run() async throws {
        while !Task.isShuttingDownGracefully {
            do {
                while try await alerts.run() > 0, !Task.isShuttingDownGracefully {}
            } catch {
                // The batch is read again next time: nothing is lost, and the decider tells once.
                logger.error("telling saved searches failed", metadata: ["error": "\(error)"])
            }
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return
            }
        }
    }
}
