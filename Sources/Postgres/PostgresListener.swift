import CLibPQ
import Logging
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// A NOTIFY received on a channel.
public struct PostgresNotification: Sendable, Hashable {
    public var channel: String
    public var payload: String
    /// The server process that sent it.
    public var senderPID: Int32
}

/// LISTENs on channels over a connection of its own, and yields what arrives.
///
/// The stream says `.listening` each time the LISTEN is in place, the first time and after
/// every reconnection. Notifications sent while it was reconnecting are lost, as in
/// PostgreSQL itself, so a follower re-reads what it follows on each `.listening`.
public struct PostgresListener: Sendable {
    public enum Event: Sendable, Hashable {
        case listening
        case notification(PostgresNotification)
    }

    public let configuration: PostgresConfiguration
    public let channels: [String]
    public let logger: Logger
    /// How long one wait on the socket lasts; also how soon cancellation is noticed.
    public var pollInterval: Duration = .milliseconds(250)
    public var reconnectDelay: Duration = .milliseconds(500)

    public init(configuration: PostgresConfiguration, channels: [String], logger: Logger) {
        self.configuration = configuration
        self.channels = channels
        self.logger = logger
    }

    /// Events until the consumer stops iterating; reconnects by itself.
    public func events() -> AsyncStream<Event> {
        AsyncStream(bufferingPolicy: .unbounded) { continuation in
            let task = Task {
                let threadPool = NIOThreadPool(numberOfThreads: 1)
                threadPool.start()
                await listen(on: threadPool, continuation)
                continuation.finish()
                try? await threadPool.shutdownGracefully()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    private func listen(on threadPool: NIOThreadPool, _ continuation: AsyncStream<Event>.Continuation) async {
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(configuration, on: threadPool)
                defer { connection.close() }
                for channel in channels {
                    let quoted = try await connection.quoteIdentifier(channel)
                    try await connection.query("LISTEN \(unsafeRaw: quoted)")
                }
                continuation.yield(.listening)
                let timeout = Int32(pollInterval.components.seconds * 1000 + pollInterval.components.attoseconds / 1_000_000_000_000_000)
                while !Task.isCancelled {
                    for notification in try await connection.waitForNotifications(timeoutMilliseconds: timeout) {
                        continuation.yield(.notification(notification))
                    }
                }
            } catch {
                if Task.isCancelled { return }
                logger.warning("database listener lost its connection; reconnecting", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: reconnectDelay)
            }
        }
    }
}

extension PostgresConnection {
    /// Waits up to `timeoutMilliseconds` on the socket and returns the notifications that came.
    func waitForNotifications(timeoutMilliseconds: Int32) async throws -> [PostgresNotification] {
        try await withHandle { pg in
            var received = Self.drainNotifications(pg)
            guard received.isEmpty else { return received }
            var descriptor = pollfd(fd: PQsocket(pg), events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, timeoutMilliseconds)
            if ready > 0 {
                guard PQconsumeInput(pg) == 1, PQstatus(pg) == CONNECTION_OK else {
                    throw PostgresError(.connection, message: String(cString: PQerrorMessage(pg)).trimmingWhitespace())
                }
                received = Self.drainNotifications(pg)
            } else if ready < 0, errno != EINTR {
                throw PostgresError(.connection, message: "poll failed on the database socket (errno \(errno))")
            }
            return received
        }
    }

    private static func drainNotifications(_ pg: OpaquePointer) -> [PostgresNotification] {
        var received = [PostgresNotification]()
        while let notify = PQnotifies(pg) {
            received.append(
                PostgresNotification(
                    channel: String(cString: notify.pointee.relname),
                    payload: String(cString: notify.pointee.extra),
                    senderPID: notify.pointee.be_pid))
            PQfreemem(notify)
        }
        return received
    }
}
