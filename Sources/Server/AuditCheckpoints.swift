import Crypto
import EventStore
import Logging
import ServiceLifecycle

/// Signs a checkpoint of the log every `interval` while the server runs (`AUDIT_CHECKPOINT_EVERY`),
/// when the log has moved since the last one, and keeps it for auditors.
public struct AuditCheckpointSchedule: Sendable {
    public var signingKey: Curve25519.Signing.PrivateKey
    public var interval: Duration

    public init(signingKey: Curve25519.Signing.PrivateKey, interval: Duration) {
        self.signingKey = signingKey
        self.interval = interval
    }
}

struct AuditCheckpointService: Service {
    let store: EventStore
    let schedule: AuditCheckpointSchedule
    let logger: Logger

    func run() async throws {
        while !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: schedule.interval) }
            } catch {
                return  // shutting down
            }
            do {
                let last = try await store.lastCheckpointPosition()
                let checkpoint = try await store.checkpoint(signingKey: schedule.signingKey)
                guard checkpoint.position != last else { continue }
                try await store.store(checkpoint)
                logger.info("signed an audit checkpoint", metadata: ["position": "\(checkpoint.position)"])
            } catch {
                // A checkpoint missed is taken at the next tick; the server goes on.
                logger.error("cannot sign an audit checkpoint", metadata: ["error": "\(error)"])
            }
        }
    }
}
