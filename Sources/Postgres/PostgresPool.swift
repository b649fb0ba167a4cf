import Logging
import NIOPosix
import Synchronization

/// A bounded pool of connections with scoped access.
///
/// `withConnection { }` lends a connection for the length of the closure; when all are lent,
/// callers wait in line up to `acquireTimeout`, then get `.poolExhausted`. An idle connection
/// that broke (server restart, `pg_terminate_backend`) is replaced before it is lent, and one
/// that broke while lent is dropped when it comes back, so the pool heals by itself once the
/// database answers again. The pool owns the thread pool that runs every libpq call, one
/// thread per connection.
public final class PostgresPool: Sendable {
    public struct Options: Sendable {
        public var size: Int
        public var acquireTimeout: Duration
        public init(size: Int = 8, acquireTimeout: Duration = .seconds(5)) {
            self.size = max(1, size)
            self.acquireTimeout = acquireTimeout
        }
    }

    /// What the pool is doing right now.
    public struct Usage: Sendable, Equatable {
        public var open: Int
        public var idle: Int
        public var inUse: Int { open - idle }
        public var waiting: Int
    }

    public let configuration: PostgresConfiguration
    public let options: Options
    /// Connections found broken (or dropped as a standby's) so far: a change says the database
    /// may not be the one read from before (a failover), for caches of what was read.
    public var connectionsLost: Int { lost.load(ordering: .relaxed) }
    private let lost = Atomic<Int>(0)
    let threadPool: NIOThreadPool
    let logger: Logger
    private let state = Mutex(State())

    private enum Grant: Sendable {
        case connection(PostgresConnection)
        /// A slot under the size limit, for the waiter to open a connection in.
        case slot
    }

    private struct Waiter {
        var id: UInt64
        var deadline: ContinuousClock.Instant
        var continuation: CheckedContinuation<Grant, any Error>
    }

    private struct State {
        var idle: [PostgresConnection] = []
        /// Connections open or being opened, lent or idle.
        var open = 0
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
        /// A task is expiring the waiters whose time is up (`expireLateWaiters`).
        var isExpiring = false
        var isShutDown = false

        /// An idle connection, else a free slot, else `.wait`.
        mutating func grantNow(size: Int) -> Immediate {
            if isShutDown { return .shutDown }
            if let connection = idle.popLast() { return .granted(.connection(connection)) }
            if open < size {
                open += 1
                return .granted(.slot)
            }
            return .wait
        }
    }

    public init(configuration: PostgresConfiguration, options: Options = Options(), logger: Logger) {
        self.configuration = configuration
        self.options = options
        self.logger = logger
        self.threadPool = NIOThreadPool(numberOfThreads: options.size)
        threadPool.start()
    }

    /// A pool for the length of `body`, shut down however `body` ends.
    @discardableResult
    public static func with<Result>(
        configuration: PostgresConfiguration, options: Options = Options(), logger: Logger,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresPool) async throws -> Result
    ) async throws -> Result {
        let pool = PostgresPool(configuration: configuration, options: options, logger: logger)
        let result: Result
        do {
            result = try await body(pool)
        } catch {
            await pool.shutdown()
            throw error
        }
        await pool.shutdown()
        return result
    }

    public var usage: Usage {
        state.withLock { Usage(open: $0.open, idle: $0.idle.count, waiting: $0.waiters.count) }
    }

    /// Lends a connection to `body` and takes it back when `body` ends.
    @discardableResult
    public func withConnection<Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let connection = try await acquire()
        let result: Result
        do {
            result = try await body(connection)
        } catch {
            // A connection to a server that is a standby now stays one: drop it, so that the
            // next connects to whichever host is the primary.
            if (error as? PostgresError)?.isReadOnlyServer == true { connection.close() }
            release(connection)
            throw error
        }
        release(connection)
        return result
    }

    /// Runs `body` in a transaction on a pooled connection.
    @discardableResult
    public func withTransaction<Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await withConnection { connection in
            try await connection.withTransaction { connection in try await body(connection) }
        }
    }

    /// Runs one statement on a pooled connection.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await withConnection { connection in try await connection.query(query) }
    }

    /// Runs one statement on a pooled connection, prepared there on first use and then only
    /// executed: for the few lookups every request makes. Their SQL text must not vary.
    @discardableResult
    public func query(_ query: PostgresQuery, prepared: Bool) async throws -> PostgresRows {
        try await withConnection { connection in try await connection.query(query, prepared: prepared) }
    }

    /// Runs read statements in one round trip (pipelined) and one snapshot (a REPEATABLE
    /// READ, READ ONLY transaction), so that what they read belongs together: a page made of
    /// several views. Their rows come back in order. With `prepared`, as `query(_:prepared:)`;
    /// with `genericIndexPlans`, as `PostgresSession.snapshot`.
    public func snapshot(
        _ queries: [PostgresQuery], prepared: Bool = false, genericIndexPlans: Bool = false
    ) async throws -> [PostgresRows] {
        try await withConnection { connection in
            try await connection.withBlockingSession { session in
                try session.snapshot(queries, prepared: prepared, genericIndexPlans: genericIndexPlans)
            }
        }
    }

    /// Closes every idle connection and the thread pool; later calls fail with `.shutDown`.
    public func shutdown() async {
        let (idle, waiters) = state.withLock { state in
            state.isShutDown = true
            defer {
                state.idle = []
                state.waiters = []
            }
            state.open -= state.idle.count
            return (state.idle, state.waiters)
        }
        for waiter in waiters {
            waiter.continuation.resume(throwing: PostgresError(.shutDown, message: "the database pool has shut down"))
        }
        for connection in idle { connection.close() }
        try? await threadPool.shutdownGracefully()
    }

    // MARK: Lending

    private func acquire() async throws -> PostgresConnection {
        switch try await grant() {
        case .connection(let connection):
            guard connection.needsReplacing else { return connection }
            logger.debug("replacing a broken idle database connection", metadata: ["pid": "\(connection.backendPID)"])
            lost.add(1, ordering: .relaxed)
            connection.close()
            return try await open()
        case .slot:
            return try await open()
        }
    }

    private func open() async throws -> PostgresConnection {
        do {
            return try await PostgresConnection.connect(configuration, on: threadPool)
        } catch {
            giveBackSlot()
            throw error
        }
    }

    private enum Immediate {
        case granted(Grant)
        case shutDown
        case wait
    }

    private func grant() async throws -> Grant {
        switch state.withLock({ $0.grantNow(size: options.size) }) {
        case .granted(let grant): return grant
        case .shutDown: throw PostgresError(.shutDown, message: "the database pool has shut down")
        case .wait: break
        }

        let id = state.withLock { state in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        let deadline = ContinuousClock.now + options.acquireTimeout
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Grant, any Error>) in
                // Something may have come back since the first look: look again, under the same lock as the enqueue.
                let (immediate, startExpiring): (Immediate, Bool) = state.withLock { state in
                    let immediate = state.grantNow(size: options.size)
                    guard case .wait = immediate else { return (immediate, false) }
                    state.waiters.append(Waiter(id: id, deadline: deadline, continuation: continuation))
                    defer { state.isExpiring = true }
                    return (immediate, !state.isExpiring)
                }
                switch immediate {
                case .granted(let grant): continuation.resume(returning: grant)
                case .shutDown:
                    continuation.resume(throwing: PostgresError(.shutDown, message: "the database pool has shut down"))
                case .wait:
                    if startExpiring {
                        // The pool is held only while it expires, not while the task sleeps.
                        Task { [weak self] in
                            while let next = self?.expireLateWaiters() { try? await Task.sleep(until: next, clock: .continuous) }
                        }
                    }
                }
            }
        } onCancel: {
            self.expire(waiter: id, error: CancellationError())
        }
    }

    /// Fails each waiter whose `acquireTimeout` has passed; answers when to look again, or
    /// nil once none waits. One task does it for all of them: a timer task per wait cost a
    /// busy server 4% of its CPU (`perf`: the task, and the dispatch timers behind
    /// `Task.sleep`).
    private func expireLateWaiters() -> ContinuousClock.Instant? {
        let now = ContinuousClock.now
        let (late, next) = state.withLock { state -> ([Waiter], ContinuousClock.Instant?) in
            // Waiters queue in the order they came, all with the same timeout (to within the
            // moment between reading the clock and taking the lock).
            let lateCount = state.waiters.prefix { $0.deadline <= now }.count
            let late = Array(state.waiters.prefix(lateCount))
            state.waiters.removeFirst(lateCount)
            guard let first = state.waiters.first else {
                state.isExpiring = false
                return (late, nil)
            }
            return (late, first.deadline)
        }
        for waiter in late {
            waiter.continuation.resume(
                throwing: PostgresError(
                    .poolExhausted,
                    message: "database busy: no connection free within \(options.acquireTimeout) (pool size \(options.size))"))
        }
        return next
    }

    private func expire(waiter id: UInt64, error: any Error) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index)
        }
        waiter?.continuation.resume(throwing: error)
    }

    private func release(_ connection: PostgresConnection) {
        if connection.needsReplacing {
            lost.add(1, ordering: .relaxed)
            connection.close()
            giveBackSlot()
            return
        }
        let waiter = state.withLock { state -> Waiter? in
            if state.isShutDown {
                state.open -= 1
                return nil
            }
            if state.waiters.isEmpty {
                state.idle.append(connection)
                return nil
            }
            return state.waiters.removeFirst()
        }
        if let waiter {
            waiter.continuation.resume(returning: .connection(connection))
        } else if state.withLock({ $0.isShutDown }) {
            connection.close()
        }
    }

    /// A connection closed or never opened: its slot goes to the next waiter, or back to the pool.
    private func giveBackSlot() {
        let waiter = state.withLock { state -> Waiter? in
            if state.waiters.isEmpty {
                state.open -= 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        waiter?.continuation.resume(returning: .slot)
    }
}
