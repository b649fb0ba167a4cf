import Logging
import Postgres
import Synchronization

extension EventStore {
    /// The global log after `position`, in order, then each new event as it commits.
    ///
    /// Positions are handed out under the log head's lock and become visible in commit
    /// order, so reading `position > last` never skips an event. The follower reads in
    /// pages, and when it has caught up waits for the NOTIFY that each batch sends, with a
    /// poll every `pollInterval` as a safety net (and after every listener reconnection).
    public func follow(after position: Int64, pageSize: Int = 500, pollInterval: Duration = .seconds(1)) -> LogFollower {
        LogFollower(store: self, start: position, pageSize: pageSize, pollInterval: pollInterval)
    }
}

/// Pull-based: it reads a page only when the consumer has taken the last, so a slow
/// consumer holds at most one page in memory.
public struct LogFollower: AsyncSequence, Sendable {
    public typealias Element = RecordedEvent
    let store: EventStore
    let start: Int64
    let pageSize: Int
    let pollInterval: Duration

    public func makeAsyncIterator() -> Iterator {
        Iterator(follower: self)
    }

    public final class Iterator: AsyncIteratorProtocol {
        private let follower: LogFollower
        private let doorbell = Doorbell()
        private let listening: Task<Void, Never>
        private var cursor: Int64
        private var page: [RecordedEvent] = []
        private var index = 0

        init(follower: LogFollower) {
            self.follower = follower
            self.cursor = follower.start
            let doorbell = doorbell
            let listener = PostgresListener(
                configuration: follower.store.pool.configuration, channels: [EventStore.channel],
                logger: follower.store.logger)
            self.listening = Task {
                for await _ in listener.events() { doorbell.ring() }
            }
        }

        deinit { listening.cancel() }

        public func next() async throws -> RecordedEvent? {
            while let step = try await next(idleAfter: nil) {
                if case .event(let event) = step { return event }
            }
            return nil
        }

        /// The next event, or `.idle` once `idleAfter` has passed without one; nil when cancelled.
        public func next(idleAfter: Duration?) async throws -> FollowStep? {
            let clock = ContinuousClock()
            let deadline = idleAfter.map { clock.now + $0 }
            while !Task.isCancelled {
                if index < page.count {
                    defer { index += 1 }
                    cursor = page[index].position
                    return .event(page[index])
                }
                if let deadline, clock.now >= deadline { return .idle }
                page = try await follower.store.read(after: cursor, limit: follower.pageSize)
                index = 0
                if page.isEmpty {
                    let wait = deadline.map { Swift.min(follower.pollInterval, Swift.max(.zero, $0 - clock.now)) } ?? follower.pollInterval
                    await doorbell.wait(timeout: wait)
                }
            }
            return nil
        }
    }

    /// The same events, with `.idle` whenever `interval` passes without one: for a live feed
    /// that must write something now and then to keep its connection, and to learn that its
    /// reader is gone.
    public func heartbeats(every interval: Duration) -> Heartbeats {
        Heartbeats(follower: self, interval: interval)
    }

    public struct Heartbeats: AsyncSequence, Sendable {
        public typealias Element = FollowStep
        let follower: LogFollower
        let interval: Duration

        public func makeAsyncIterator() -> Iterator {
            Iterator(events: follower.makeAsyncIterator(), interval: interval)
        }

        public struct Iterator: AsyncIteratorProtocol {
            let events: LogFollower.Iterator
            let interval: Duration

            public mutating func next() async throws -> FollowStep? {
                try await events.next(idleAfter: interval)
            }
        }
    }
}

/// What following the log yields when it may also say that nothing happened.
public enum FollowStep: Sendable {
    case event(RecordedEvent)
    case idle
}

/// A wake-up that is never lost: a ring with nobody waiting is kept for the next wait.
public final class Doorbell: Sendable {
    public init() {}

    private let state = Mutex<(rung: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    public func ring() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.rung = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns at the next ring, at once if one is pending, or after `timeout`.
    public func wait(timeout: Duration) async {
        let timer = Task { [weak self] in
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            self?.ring()
        }
        defer { timer.cancel() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state in
                if state.rung {
                    state.rung = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
}
