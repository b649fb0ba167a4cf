import Aggregates
import EventStore
import Logging
import Marketplace
import Postgres
import Synchronization

/// What the first attempt of a command decides on.
public enum FirstAttempt<State: Sendable>: Sendable {
    /// The stream as this server knows it, else as read now (see `CommandGateway`).
    case read
    /// Nothing: the id was just made (a fresh UUID), so the stream is taken to be empty without
    /// reading it; were it not, the append would fail on `.noStream` and the command would be
    /// decided again on what is there.
    case newStream
    /// The stream's state and version as the caller just loaded them (to read something else
    /// the command needs from it).
    case loaded(State, version: Int)
}

/// What a handled command wrote, and the stream's state after it.
public struct Handled<State: Sendable, Event: Sendable>: Sendable {
    public var state: State
    public var events: [Event]
    /// nil when the command decided nothing (a no-op, like blocking someone blocked already).
    public var append: AppendResult?
}

/// Loads a stream, folds it, decides, and appends with the version it read. When another
/// writer got there first (`WrongExpectedVersion`), it loads again and decides again, so
/// that every command is decided on the state it is written on: twenty bids at once all
/// land; twenty approvals at once yield one winner, and nineteen `item_not_available`.
///
/// A first attempt decides on a stream's state as this server last knew it (its own appends
/// fold in), without reading the stream: the append expects that version, so a stream that
/// moved on meanwhile fails it, and the command is decided again on what was read. A state
/// from memory never refuses a command or decides nothing on its own: that is decided again
/// on the stream as read, as is a command whose append would not check every stream it took
/// from memory.
public struct CommandGateway: Sendable {
    public let store: EventStore
    public let logger: Logger
    /// Attempts before giving up with `concurrency_conflict`. Every attempt lets at least
    /// one contender through, and the backoff spreads the rest out.
    public var maxAttempts = 25
    /// Folded states by stream: a first attempt decides on one without reading, and a load
    /// reads and decodes only the events after it.
    let states: StreamStates

    public init(store: EventStore, logger: Logger, cachedStreams: Int = 10_000) {
        self.store = store
        self.logger = logger
        self.states = StreamStates(capacity: cachedStreams)
    }

    /// `first`: what the first attempt decides on (later ones read the stream).
    /// `alongside` runs in the transaction that appends the command's events (see `EventStore.append`).
    /// `consequences`: events the decided ones cause on other streams (money they move), given
    /// the state decided on; appended in the same append, expecting any version there (they
    /// break no rule of those streams).
    public func handle<ID, State, Command, Event>(
        _ command: Command, on aggregate: Aggregate<ID, State, Command, Event>, id: ID,
        actor: UserID, metadata: EventMetadata = EventMetadata(), first: FirstAttempt<State> = .read,
        alongside: (@Sendable (inout PostgresSession) throws -> Void)? = nil,
        consequences: ((State, [Event]) throws -> [StreamWrite])? = nil
    ) async throws -> Handled<State, Event> {
        let stream = aggregate.stream(id)
        let request = IdempotentRequest.current
        if let recorded = request?.recorded { return try await replay(recorded, on: aggregate, stream: stream) }
        var metadata = metadata
        metadata.actorID = metadata.actorID ?? actor.description
        metadata.idempotencyKey = metadata.idempotencyKey ?? request?.idempotency.key
        return try await retrying { attempt in
            var read = attempt > 1
            while true {
                let (state, version, remembered) =
                    switch attempt == 1 ? first : .read {
                    case .read: try await load(stream, aggregate, read: read)
                    case .newStream: (aggregate.initial, 0, false)
                    case .loaded(let state, let version): (state, version, false)
                    }
                let events: [Event]
                do { events = try aggregate.decide(command, state, actor) } catch let error as DomainError {
                    if remembered { read = true; continue }
                    // A twin of this request may have committed meanwhile: its answer, not this refusal.
                    if let recorded = try await recordedTwin(of: request) { return try await replay(recorded, on: aggregate, stream: stream) }
                    CommandMetrics.command(command, outcome: error.code)
                    throw error
                }
                if events.isEmpty {
                    if remembered { read = true; continue }
                    if let request, let recorded = try await spendUnchanged(request, response: nil) {
                        return try await replay(recorded, on: aggregate, stream: stream)
                    }
                    CommandMetrics.command(command, outcome: "unchanged")
                    return Handled(state: state, events: [], append: nil)
                }
                let caused = try consequences?(state, events) ?? []
                let outcome = try await store.append(
                    [StreamAppend(stream, expectedVersion: .after(read: version), events: try events.map(aggregate.codec.encode))]
                        + caused.filter { !$0.events.isEmpty }.map { StreamAppend($0.stream, expectedVersion: .any, events: $0.events) },
                    metadata: metadata, idempotency: request?.idempotency, alongside: alongside)
                guard case .appended(let result) = outcome else {
                    return try await replay(try Self.record(of: outcome, request), on: aggregate, stream: stream)
                }
                CommandMetrics.command(command, outcome: "ok")
                Failpoints.hit(.appendAfterCommit)
                let after = events.reduce(state, aggregate.evolve)
                states.store(after, version: version + events.count, of: stream)
                return Handled(state: after, events: events, append: result)
            }
        }
    }

    /// A command over several streams (checkout, repayments, expiry). `decide` loads what it
    /// needs through `reads`, which notes each stream's version, and says what to write; the
    /// writes are appended at once, expecting exactly the versions read (a stream written
    /// `checked: false` expects any). If any stream moved on, it all is decided again; so
    /// may it be once more in the same attempt, after reading what it took from memory:
    /// `decide` must act on nothing but its answer.
    ///
    /// The outcome is what the command answers; with an `Idempotency-Key` it is recorded with
    /// the events, and a repeat gets it back without deciding again.
    public func handleAcross<Outcome: Codable & Sendable>(
        _ command: String, actor: UserID, metadata: EventMetadata = EventMetadata(),
        _ decide: (inout StreamReads) async throws -> (writes: [StreamWrite], outcome: Outcome)
    ) async throws -> (outcome: Outcome, append: AppendResult?) {
        let request = IdempotentRequest.current
        if let replayed = try replayedOutcome(Outcome.self) { return replayed }
        var metadata = metadata
        metadata.actorID = metadata.actorID ?? actor.description
        metadata.idempotencyKey = metadata.idempotencyKey ?? request?.idempotency.key
        return try await retrying { attempt in
            var read = attempt > 1
            while true {
                var reads = StreamReads(gateway: self, read: read)
                let writes: [StreamWrite]
                let outcome: Outcome
                do { (writes, outcome) = try await decide(&reads) } catch let error as DomainError {
                    if !reads.remembered.isEmpty { read = true; continue }
                    if let recorded = try await recordedTwin(of: request) { return try replayAcross(recorded) }
                    CommandMetrics.command(named: command, outcome: error.code)
                    throw error
                }
                // A checked write with no events still expects its stream as read (a rule decided on
                // it holds at the append), as long as some stream is written at all.
                let written = writes.contains { !$0.events.isEmpty }
                let appends = writes.filter { !$0.events.isEmpty || (written && $0.checked) }.map { write in
                    StreamAppend(
                        write.stream,
                        expectedVersion: write.checked ? .after(read: reads.versions[write.stream] ?? 0) : .any,
                        events: write.events)
                }
                // A state from memory is only as good as the append's check of its version.
                let checked = Set(appends.filter { $0.expectedVersion != .any }.map(\.stream))
                if !reads.remembered.isSubset(of: checked) { read = true; continue }
                // Recorded with the key, for a repeat to answer; made only when there is one.
                let response = request == nil ? nil : try JSONB(outcome)
                if appends.isEmpty {
                    if let request, let recorded = try await spendUnchanged(request, response: response) {
                        return try replayAcross(recorded)
                    }
                    CommandMetrics.command(named: command, outcome: "unchanged")
                    return (outcome, nil)
                }
                let appended = try await store.append(
                    appends, metadata: metadata, idempotency: request?.idempotency,
                    response: response.map { response in { @Sendable _ in response } })
                guard case .appended(let result) = appended else {
                    return try replayAcross(try Self.record(of: appended, request))
                }
                CommandMetrics.command(named: command, outcome: "ok")
                Failpoints.hit(.appendAfterCommit)
                // Each stream written as read is known at its new version: the next command on it
                // need not read its own events back.
                for write in writes where !write.events.isEmpty {
                    guard let (state, version) = reads.loaded[write.stream],
                        result.streamVersions[write.stream] == version + write.events.count,
                        let after = write.fold(state)
                    else { continue }
                    states.store(after, version: version + write.events.count, of: write.stream)
                }
                return (outcome, result)
            }
        }
    }

    /// Runs one attempt at a command after another while a stream it read moved on before its
    /// append (`WrongExpectedVersion`), each on the state as it then is.
    private func retrying<Result>(_ attempt: (Int) async throws -> Result) async throws -> Result {
        for number in 1...maxAttempts {
            do {
                return try await attempt(number)
            } catch let conflict as WrongExpectedVersion {
                // Behind what was read: the state came from commits the database no longer has
                // (read on a primary that failed over before its standby had them). Read it anew.
                if case .exact(let read) = conflict.expected, conflict.actual < read { states.forget(conflict.stream) }
                CommandMetrics.retries.increment()
                logger.debug("a stream moved on; deciding again", metadata: ["attempt": "\(number)"])
                // Random, growing: contenders who collided should not collide again.
                try await Task.sleep(for: .microseconds(Int.random(in: 0...(250 << min(number, 5)))))
            } catch is IdempotencyKeyReused {
                throw IdempotentRequest.keyReused
            }
        }
        throw DomainError.concurrencyConflict
    }

    /// The stream's state and version, folded from its events.
    public func load<ID, State, Command, Event>(
        _ stream: StreamID, _ aggregate: Aggregate<ID, State, Command, Event>
    ) async throws -> (State, Int) {
        let (state, version, _) = try await load(stream, aggregate, read: true)
        return (state, version)
    }

    /// Without `read`, the state this server knows, when it knows one (`remembered`); else,
    /// or with `read`, the stream's state and version as read now.
    func load<ID, State, Command, Event>(
        _ stream: StreamID, _ aggregate: Aggregate<ID, State, Command, Event>, read: Bool
    ) async throws -> (State, Int, remembered: Bool) {
        // A lost connection may mean a promoted standby that lacks what was read before.
        states.forgetAll(unlessConnectionsLost: store.pool.connectionsLost)
        let cached = states.state(of: stream, as: State.self)
        if !read, let (state, version) = cached { return (state, version, true) }
        var (state, version) = cached ?? (aggregate.initial, 0)
        states.streamsRead.add(1, ordering: .relaxed)
        let known = version
        for recorded in try await store.readStream(stream, from: version + 1) {
            state = aggregate.evolve(state, try aggregate.codec.decode(recorded))
            version = recorded.streamVersion
        }
        if version > known { states.store(state, version: version, of: stream) }
        return (state, version, false)
    }
}

// MARK: Repeats of an idempotent request

extension CommandGateway {
    /// For a use case that must not act again on a repeat (charge a card): the first request's
    /// answer, when the current request repeats one, else nil.
    public func replayed<ID, State, Command, Event>(
        on aggregate: Aggregate<ID, State, Command, Event>, id: ID
    ) async throws -> Handled<State, Event>? {
        guard let recorded = IdempotentRequest.current?.recorded else { return nil }
        return try await replay(recorded, on: aggregate, stream: aggregate.stream(id))
    }

    /// Like `replayed(on:id:)`, for a command across streams: its recorded outcome.
    public func replayedOutcome<Outcome: Decodable>(_ type: Outcome.Type) throws -> (outcome: Outcome, append: AppendResult?)? {
        guard let recorded = IdempotentRequest.current?.recorded else { return nil }
        return try replayAcross(recorded)
    }

    /// The first request's result, rebuilt from the log: the events it appended to a stream of
    /// this aggregate (whichever id this request made up for a new one), and that stream's
    /// state just after them. A first request that decided nothing gets the state as it is.
    func replay<ID, State, Command, Event>(
        _ recorded: IdempotencyRecord, on aggregate: Aggregate<ID, State, Command, Event>, stream: StreamID
    ) async throws -> Handled<State, Event> {
        IdempotentRequest.current?.markReplayed()
        let own = try await store.events(at: recorded.positions).filter { aggregate.owns($0.streamID) }
        guard let last = own.last else {
            let (state, _) = try await load(stream, aggregate)
            return Handled(state: state, events: [], append: nil)
        }
        var state = aggregate.initial
        for event in try await store.readStream(last.streamID) where event.streamVersion <= last.streamVersion {
            state = aggregate.evolve(state, try aggregate.codec.decode(event))
        }
        return Handled(
            state: state, events: try own.map(aggregate.codec.decode),
            append: AppendResult(positions: recorded.positions, streamVersions: [last.streamID: last.streamVersion]))
    }

    func replayAcross<Outcome: Decodable>(_ recorded: IdempotencyRecord) throws -> (outcome: Outcome, append: AppendResult?) {
        IdempotentRequest.current?.markReplayed()
        guard let response = recorded.response else {
            throw PostgresError(.decoding, message: "the idempotency key holds no recorded outcome to answer again")
        }
        let append = recorded.positions.isEmpty ? nil : AppendResult(positions: recorded.positions, streamVersions: [:])
        return (try response.decode(Outcome.self), append)
    }

    /// What the request's key holds now, when a twin of it (the same key and request, sent
    /// again before it was answered) committed first; nil when the key is unspent or holds
    /// another request.
    func recordedTwin(of request: IdempotentRequest?) async throws -> IdempotencyRecord? {
        guard let request else { return nil }
        let recorded = try await store.idempotencyRecord(actor: request.idempotency.actor, key: request.idempotency.key)
        return recorded?.requestHash == request.idempotency.requestHash ? recorded : nil
    }

    /// Spends the key of a request whose command decided nothing. Nil when it is spent on
    /// this request; else what a twin recorded first, to answer again.
    func spendUnchanged(_ request: IdempotentRequest, response: JSONB?) async throws -> IdempotencyRecord? {
        let recorded = try await store.recordUnchanged(request.idempotency, response: response)
        guard recorded.requestHash == request.idempotency.requestHash else { throw IdempotentRequest.keyReused }
        return recorded.positions.isEmpty ? nil : recorded
    }

    /// The record an append answered `.replayed` with.
    static func record(of outcome: AppendOutcome, _ request: IdempotentRequest?) throws -> IdempotencyRecord {
        guard case .replayed(let positions, let response) = outcome, let request else {
            throw PostgresError(.decoding, message: "an append without an idempotency key was answered as a repeat")
        }
        return IdempotencyRecord(requestHash: request.idempotency.requestHash, positions: positions, response: response)
    }
}

/// Streams' folded states at a version, kept in memory. A state at a version never changes
/// (the log is append-only), so one kept here is as good as folding the stream again: a load
/// reads the stream only after that version, and decodes only what is new; a command's first
/// attempt decides on it without reading, and its append checks the version. Other servers'
/// appends are those new events. At capacity it starts again empty.
final class StreamStates: Sendable {
    private let capacity: Int
    private let entries = Mutex<[StreamID: (state: any Sendable, version: Int)]>([:])
    private let lostSeen = Mutex(0)
    /// How many loads read their stream rather than take a state from here.
    let streamsRead = Atomic(0)

    init(capacity: Int) { self.capacity = capacity }

    func state<State: Sendable>(of stream: StreamID, as type: State.Type) -> (State, Int)? {
        guard capacity > 0, let entry = entries.withLock({ $0[stream] }), let state = entry.state as? State else { return nil }
        return (state, entry.version)
    }

    /// Empties the cache when `connectionsLost` moved since the last call.
    func forgetAll(unlessConnectionsLost connectionsLost: Int) {
        guard lostSeen.withLock({ seen in defer { seen = connectionsLost }; return seen != connectionsLost }) else { return }
        entries.withLock { $0.removeAll() }
    }

    func forget(_ stream: StreamID) {
        _ = entries.withLock { $0.removeValue(forKey: stream) }
    }

    func store(_ state: some Sendable, version: Int, of stream: StreamID) {
        guard capacity > 0 else { return }
        entries.withLock { entries in
            // Never go back: a slower request may store an older version after a newer one.
            if let known = entries[stream], known.version >= version { return }
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[stream] = (state, version)
        }
    }
}

/// The streams a multi-stream command read, and the version of each.
public struct StreamReads: Sendable {
    let gateway: CommandGateway
    /// Whether every stream is read, rather than taken as this server last knew it.
    let read: Bool
    public private(set) var versions: [StreamID: Int] = [:]
    /// Streams taken from memory, not read: the append must check each one's version.
    private(set) var remembered: Set<StreamID> = []
    /// Each stream's state as loaded, for its written events to fold into after the append.
    private(set) var loaded: [StreamID: (state: any Sendable, version: Int)] = [:]

    init(gateway: CommandGateway, read: Bool = true) {
        self.gateway = gateway
        self.read = read
    }

    public mutating func load<ID, State, Command, Event>(
        _ aggregate: Aggregate<ID, State, Command, Event>, id: ID
    ) async throws -> State {
        let stream = aggregate.stream(id)
        // Loaded twice, it is the same state: another task may have moved it on meanwhile.
        if let (state, _) = loaded[stream], let state = state as? State { return state }
        let (state, version, remembered) = try await gateway.load(stream, aggregate, read: read)
        versions[stream] = version
        loaded[stream] = (state, version)
        if remembered { self.remembered.insert(stream) }
        return state
    }
}

/// Events for one stream of a multi-stream command.
public struct StreamWrite: Sendable {
    public var stream: StreamID
    public var events: [NewEvent]
    /// Whether the append expects the version read; false for writes that cannot break a rule
    /// of their stream (a credit to a lender's balance), so they need not have been read.
    public var checked: Bool
    /// The stream's state after these events, given its state before them.
    let fold: @Sendable (any Sendable) -> (any Sendable)?

    public init<ID, State, Command, Event>(
        _ events: [Event], to aggregate: Aggregate<ID, State, Command, Event>, id: ID,
        checked: Bool = true
    ) throws {
        self.stream = aggregate.stream(id)
        self.events = try events.map(aggregate.codec.encode)
        self.checked = checked
        fold = { state in (state as? State).map { events.reduce($0, aggregate.evolve) } }
    }
}

extension ExpectedVersion {
    /// What an append expects of a stream read at `version` (0: it had no events).
    static func after(read version: Int) -> ExpectedVersion { version == 0 ? .noStream : .exact(version) }
}

extension StreamWrite {
    /// A loan's events, and each lender's credit of them (a repayment's part, an expiry's
    /// refund) on the lender's own stream, unchecked: a credit breaks no rule there.
    static func settlement(_ events: [LoanEvent], loanID: LoanID) throws -> (writes: [StreamWrite], credits: [(lender: UserID, credit: BalanceCredited)]) {
        let credits = LoanDecider.credits(for: events, loanID: loanID)
        let writes =
            try [StreamWrite(events, to: .loan, id: loanID)]
            + credits.map { try StreamWrite([.balanceCredited($0.credit)], to: .user, id: $0.lender, checked: false) }
        return (writes, credits)
    }
}
