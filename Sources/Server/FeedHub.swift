import EventStore
import Foundation
import Logging
import Marketplace
import Postgres
import Projections
import Synchronization

/// The live feeds of one server process: one LISTEN connection and one reader of
/// `feed_view` for every client, each new notice handed to the streams of its user.
///
/// It runs only while someone listens: the first subscriber starts it, the last one to
/// leave stops it (and closes its connection). A client too slow to take 1,000 notices is
/// let go; it reconnects with `Last-Event-ID` and reads the rest from the view.
final class FeedHub: Sendable {
    enum Step: Sendable {
        case notice(Notice)
        case heartbeat
    }

    struct Subscription: Sendable {
        let steps: AsyncStream<Step>
        let cancel: @Sendable () -> Void
    }

    private struct Subscriber {
        let user: UserID
        let continuation: AsyncStream<Step>.Continuation
    }

    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var nextID: UInt64 = 0
        var task: Task<Void, Never>?
    }

    let views: ConversationsView
    let configuration: PostgresConfiguration
    let logger: Logger
    let heartbeat: Duration
    let pollInterval: Duration
    static let bufferLimit = 1000
    private let state = Mutex(State())

    init(pool: PostgresPool, logger: Logger, heartbeat: Duration, pollInterval: Duration = .seconds(1)) {
        self.views = ConversationsView(pool)
        self.configuration = pool.configuration
        self.logger = logger
        self.heartbeat = heartbeat
        self.pollInterval = pollInterval
    }

    /// Every notice for `user` from now on, and a heartbeat whenever `heartbeat` passes.
    func subscribe(_ user: UserID) async throws -> Subscription {
        let (steps, continuation) = AsyncStream.makeStream(
            of: Step.self, bufferingPolicy: .bufferingOldest(Self.bufferLimit))
        // Where a reader that starts now begins: the caller reads what came before from the view.
        let start = try await views.lastNoticePosition()
        let id = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = Subscriber(user: user, continuation: continuation)
            if state.task == nil { state.task = Task { await self.run(from: start) } }
            return id
        }
        continuation.onTermination = { [weak self] _ in self?.remove(id) }
        return Subscription(steps: steps, cancel: { continuation.finish() })
    }

    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    private func remove(_ id: UInt64) {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.subscribers[id] = nil
            guard state.subscribers.isEmpty else { return nil }
            defer { state.task = nil }
            return state.task
        }
        task?.cancel()
    }

    /// Reads new notices whenever the log rings (and every `pollInterval`, in case a ring was
    /// lost while the listener reconnected), in position order, and hands each to its user.
    private func run(from start: Int64) async {
        let doorbell = Doorbell()
        let listener = PostgresListener(configuration: configuration, channels: [EventStore.channel], logger: logger)
        let listening = Task {
            for await _ in listener.events() { doorbell.ring() }
        }
        defer { listening.cancel() }
        let clock = ContinuousClock()
        // After every user's notices at `start`: no user id is above this one.
        var cursor = (position: start, user: UUID(uuidString: "ffffffff-ffff-ffff-ffff-ffffffffffff")!)
        var lastBeat = clock.now
        while !Task.isCancelled {
            do {
                while true {
                    let notices = try await views.notices(after: cursor, limit: 500)
                    for (user, notice) in notices { deliver(.notice(notice), to: user) }
                    if let (user, notice) = notices.last { cursor = (notice.position, user.rawValue) }
                    if notices.count < 500 { break }
                }
            } catch {
                logger.warning("the live feeds could not read new notices; trying again", metadata: ["error": "\(error)"])
            }
            if clock.now - lastBeat >= heartbeat {
                deliver(.heartbeat, to: nil)
                lastBeat = clock.now
            }
            // Cancelled (the last subscriber left): wake at once, and close the listener.
            await withTaskCancellationHandler {
                await doorbell.wait(timeout: min(pollInterval, max(.milliseconds(10), heartbeat - (clock.now - lastBeat))))
            } onCancel: {
                doorbell.ring()
            }
        }
    }

    /// To `user`'s streams, or to every stream without one.
    private func deliver(_ step: Step, to user: UserID?) {
        let tooSlow = state.withLock { state in
            state.subscribers.values.filter { subscriber in
                guard user == nil || subscriber.user == user else { return false }
                if case .dropped = subscriber.continuation.yield(step) { return true }
                return false
            }
        }
        // Outside the lock: finishing a stream runs its `onTermination`, which takes it.
        for subscriber in tooSlow { subscriber.continuation.finish() }
    }
}
