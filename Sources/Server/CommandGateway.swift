import EventStore
import Logging
import Marketplace
import Postgres
import Projections

/// One kind of stream, as the gateway handles it: how to name it, fold it, and decide on it.
public struct Aggregate<State: Sendable, Command: Sendable, Event: Sendable>: Sendable {
    public var category: String
    public var initial: State
    public var evolve: @Sendable (State, Event) -> State
    public var decide: @Sendable (Command, State, UserID) throws -> [Event]
    public var codec: DomainCodec<Event>
}

extension Aggregate where State == UserState, Command == UserCommand, Event == UserEvent {
    /// The actor is the stream's own user: `decide` needs no other.
    public static let user = Aggregate(
        category: "user", initial: UserDecider.initial, evolve: UserDecider.evolve,
        decide: { command, state, _ in try UserDecider.decide(command, state) }, codec: .user)
}

extension Aggregate where State == ItemState, Command == ItemCommand, Event == ItemEvent {
    public static let item = Aggregate(
        category: "item", initial: ItemDecider.initial, evolve: ItemDecider.evolve,
        decide: { command, state, actor in try ItemDecider.decide(command, state, actor: actor) }, codec: .item)
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
public struct CommandGateway: Sendable {
    public let store: EventStore
    public let logger: Logger
    /// Attempts before giving up with `concurrency_conflict`. Every attempt lets at least
    /// one contender through, and the backoff spreads the rest out.
    public var maxAttempts = 25

    public init(store: EventStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// `alongside` runs in the transaction that appends the command's events (see `EventStore.append`).
    public func handle<State, Command, Event>(
        _ command: Command, on aggregate: Aggregate<State, Command, Event>, id: some CustomStringConvertible,
        actor: UserID, metadata: EventMetadata = EventMetadata(),
        alongside: (@Sendable (inout PostgresSession) throws -> Void)? = nil
    ) async throws -> Handled<State, Event> {
        let stream = StreamID(aggregate.category, id)
        var metadata = metadata
        metadata.actorID = metadata.actorID ?? actor.description
        for attempt in 1...maxAttempts {
            let (state, version) = try await load(stream, aggregate)
            let events = try aggregate.decide(command, state, actor)
            if events.isEmpty { return Handled(state: state, events: [], append: nil) }
            do {
                let result = try await store.append(
                    to: stream, expectedVersion: version == 0 ? .noStream : .exact(version),
                    events: try events.map(aggregate.codec.encode), metadata: metadata, alongside: alongside)
                return Handled(state: events.reduce(state, aggregate.evolve), events: events, append: result)
            } catch is WrongExpectedVersion {
                logger.debug("stream moved on; deciding again", metadata: ["stream": "\(stream)", "attempt": "\(attempt)"])
                // Random, growing: contenders who collided should not collide again.
                try await Task.sleep(for: .microseconds(Int.random(in: 0...(250 << min(attempt, 5)))))
            }
        }
        throw DomainError(.conflict, "concurrency_conflict", "Too many concurrent changes; try again.")
    }

    /// The stream's state and version, folded from its events.
    public func load<State, Command, Event>(
        _ stream: StreamID, _ aggregate: Aggregate<State, Command, Event>
    ) async throws -> (State, Int) {
        var state = aggregate.initial
        var version = 0
        for recorded in try await store.readStream(stream) {
            state = aggregate.evolve(state, try aggregate.codec.codec.decode(recorded))
            version = recorded.streamVersion
        }
        return (state, version)
    }
}
