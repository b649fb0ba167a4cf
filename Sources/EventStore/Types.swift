import Foundation
import Postgres
import Synchronization

/// The name of one event stream, `kind-id` (`item-3f2a...`).
public struct StreamID: RawRepresentable, Hashable, Sendable, Codable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public init(_ kind: String, _ id: some CustomStringConvertible) {
        self.rawValue = "\(kind)-\(String(describing: id).lowercased())"
    }
    public var description: String { rawValue }

    /// The kind of stream: what comes before the first `-` (`item`).
    public var category: String { String(rawValue.prefix { $0 != "-" }) }

    /// Stream names are joined into the hash's canonical text with newlines, so none may hold one.
    var isValid: Bool {
        !rawValue.isEmpty && rawValue.utf8.count <= 200 && !rawValue.contains(where: \.isNewline)
    }
}

/// What the writer believes a stream's version to be.
public enum ExpectedVersion: Sendable, Hashable {
    /// Whatever it is.
    case any
    /// The stream has no events yet.
    case noStream
    /// The stream's last event has exactly this version.
    case exact(Int)
}

/// An event to append: its type name, schema version and JSON body.
public struct NewEvent: Sendable, Hashable {
    public var type: String
    public var schemaVersion: Int
    public var data: JSONB
    /// The typed event `data` was encoded from, when the writer had one: the projections in
    /// the appending transaction read it rather than decode the JSON again.
    public let decoded = DecodedEvent()

    public init(type: String, schemaVersion: Int = 1, data: JSONB) {
        self.type = type
        self.schemaVersion = schemaVersion
        self.data = data
    }
}

/// Events for one stream, with the version the writer read.
public struct StreamAppend: Sendable, Hashable {
    public var stream: StreamID
    public var expectedVersion: ExpectedVersion
    public var events: [NewEvent]

    public init(_ stream: StreamID, expectedVersion: ExpectedVersion, events: [NewEvent]) {
        self.stream = stream
        self.expectedVersion = expectedVersion
        self.events = events
    }
}

/// Who and what caused an append; stored with each of its events.
public struct EventMetadata: Codable, Sendable, Hashable {
    public var actorID: String?
    public var correlationID: String?
    public var causationID: String?
    public var idempotencyKey: String?
    public var requestID: String?

    public init(
        actorID: String? = nil, correlationID: String? = nil, causationID: String? = nil,
        idempotencyKey: String? = nil, requestID: String? = nil
    ) {
        self.actorID = actorID
        self.correlationID = correlationID
        self.causationID = causationID
        self.idempotencyKey = idempotencyKey
        self.requestID = requestID
    }
}

/// An event as stored in the log.
public struct RecordedEvent: Sendable, Hashable {
    public var position: Int64
    public var streamID: StreamID
    public var streamVersion: Int
    public var type: String
    public var schemaVersion: Int
    public var data: JSONB
    public var metadata: JSONB
    public var recordedAt: Date
    public var previousHash: Data
    public var hash: Data

    public func decodeMetadata() throws -> EventMetadata { try metadata.decode(EventMetadata.self) }
}

/// Makes an append safe to retry: the same actor and key with the same request writes once.
public struct Idempotency: Sendable, Hashable {
    public var actor: String
    public var key: String
    /// A digest of the request, so that a reused key with another body is told apart.
    public var requestHash: String

    public init(actor: String, key: String, requestHash: String) {
        self.actor = actor
        self.key = key
        self.requestHash = requestHash
    }
}

/// What a successful append wrote.
public struct AppendResult: Sendable, Hashable {
    /// Every position written, in order.
    public var positions: [Int64]
    /// Each stream's version after the append.
    public var streamVersions: [StreamID: Int]
    /// When the events were recorded (`recorded_at`), for an append just made; nil for one
    /// answered again from an idempotency record.
    public var recordedAt: Date?

    public init(positions: [Int64], streamVersions: [StreamID: Int], recordedAt: Date? = nil) {
        self.positions = positions
        self.streamVersions = streamVersions
        self.recordedAt = recordedAt
    }

    /// The global position of the last event written (0 when nothing was).
    public var lastPosition: Int64 { positions.last ?? 0 }
}

/// How an append ended.
public enum AppendOutcome: Sendable, Hashable {
    case appended(AppendResult)
    /// An earlier append with the same idempotency key and request: nothing was written;
    /// these are its positions and the response recorded for it.
    case replayed(positions: [Int64], response: JSONB?)
}

/// The stream was not at the version the writer expected; nothing was written.
/// The log's head is below a position this process already acknowledged: the database it
/// appends to now lost commits it had (a standby promoted without synchronous commit).
public struct LogBehind: Error, Sendable, Hashable, CustomStringConvertible {
    public var head: Int64
    public var acknowledged: Int64

    public var description: String {
        "the log's head is at \(head), behind position \(acknowledged) this server acknowledged: the database lost commits"
    }
}

public struct WrongExpectedVersion: Error, Sendable, Hashable, CustomStringConvertible {
    public var stream: StreamID
    public var expected: ExpectedVersion
    /// The stream's version when the append was tried; 0 when it has no events.
    public var actual: Int

    public init(stream: StreamID, expected: ExpectedVersion, actual: Int) {
        self.stream = stream
        self.expected = expected
        self.actual = actual
    }

    public var description: String {
        "stream \(stream) is at version \(actual), not \(expected)"
    }
}

/// The idempotency key was used before by the same actor for a different request.
public struct IdempotencyKeyReused: Error, Sendable, Hashable, CustomStringConvertible {
    public var actor: String
    public var key: String
    public var description: String { "idempotency key \(key) was already used for another request" }
}

/// An append was refused as malformed (an empty stream name, no events, ...).
public struct InvalidAppend: Error, Sendable, Hashable, CustomStringConvertible {
    public var reason: String
    public var description: String { "invalid append: \(reason)" }
}

/// An event as a projection sees it: in the transaction that appends it, or when rebuilding.
public struct ProjectedEvent: Sendable, Hashable {
    public var position: Int64
    public var streamID: StreamID
    public var streamVersion: Int
    public var type: String
    public var schemaVersion: Int
    public var data: JSONB
    public var recordedAt: Date
    // No metadata: no view reads who or what asked for an event, and decoding it for every
    // event was 9% of a rebuild's own work (`perf`). The log keeps it (`RecordedEvent`).
    /// The event decoded by the first projection that reads it, for the others: every
    /// projection of a batch decodes the events it reads, and a rebuild spent a third of its
    /// time decoding the same JSON again (`perf`). Not part of an event's equality.
    public let decoded: DecodedEvent

    public init(
        position: Int64, streamID: StreamID, streamVersion: Int, type: String, schemaVersion: Int, data: JSONB,
        recordedAt: Date, decoded: DecodedEvent = DecodedEvent()
    ) {
        self.decoded = decoded
        self.position = position
        self.streamID = streamID
        self.streamVersion = streamVersion
        self.type = type
        self.schemaVersion = schemaVersion
        self.data = data
        self.recordedAt = recordedAt
    }
}

/// A decoded event kept beside its JSON: handed back only for that same JSON, and as the
/// type asked for.
public final class DecodedEvent: Sendable, Hashable {
    private let cached = Mutex<(data: String, value: any Sendable)?>(nil)

    public init() {}

    /// The value decoded from `data` before, as `T`; else `decode()`'s, kept.
    public func value<T: Sendable>(of data: String, as type: T.Type, decode: () throws -> T) rethrows -> T {
        if let (text, value) = cached.withLock({ $0 }), text == data, let value = value as? T { return value }
        let value = try decode()
        cached.withLock { $0 = (data, value) }
        return value
    }

    /// Keeps `value` as what `data` decodes to.
    public func keep(_ value: some Sendable, of data: String) {
        cached.withLock { $0 = (data, value) }
    }

    public static func == (lhs: DecodedEvent, rhs: DecodedEvent) -> Bool { true }
    public func hash(into hasher: inout Hasher) {}
}

/// A view kept in step with the log inside the very transaction that appends: a view
/// never lacks an acknowledged event, and never holds one that was not committed.
public protocol InlineProjection: Sendable {
    /// Names the projection's checkpoint.
    var name: String { get }
    /// Applies a batch's events, in position order, on the appending transaction's connection.
    func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws
    /// The rows of its views a batch's `apply(_:read:_:)` starts from (its rows by key, say):
    /// read in the appending transaction before any projection writes the batch, every
    /// projection's in one round trip (`InlineProjections.apply`). None unless a projection
    /// says otherwise.
    func reads(_ events: [ProjectedEvent]) -> [PostgresQuery]
    /// `apply`, given the rows `reads` asked for, in its order.
    func apply(_ events: [ProjectedEvent], read: [PostgresRows], _ session: inout PostgresSession) throws
    /// Applies a batch to views being rebuilt from the log from its first event, where what
    /// is cheaper made once over all the rows may be left to `finishRebuild`, and what the
    /// projection reads of earlier batches may be kept in `memory` rather than read back from
    /// its tables. `apply` unless a projection says otherwise.
    func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws
    /// After a rebuild's last batch: what `rebuild` left undone (in the views, or in
    /// `memory`), so that the views read as if every event had been applied. Nothing unless a
    /// projection says otherwise.
    func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws
}

extension InlineProjection {
    public func reads(_ events: [ProjectedEvent]) -> [PostgresQuery] { [] }
    public func apply(_ events: [ProjectedEvent], read: [PostgresRows], _ session: inout PostgresSession) throws {
        try apply(events, &session)
    }
    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try apply(events, &session)
    }
    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {}
}

/// A projection whose batches start from rows of its views (`reads`) and its writes made
/// from them (`apply(_:read:_:)`): applied alone, outside a pipeline, it reads them itself.
public protocol ReadingProjection: InlineProjection {}

extension ReadingProjection {
    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        try apply(events, read: session.reads(reads(events), prepared: true), &session)
    }
}

/// Inline projections applied to a batch, the one way the appends and a rebuild's catch-up
/// both take.
public enum InlineProjections {
    /// What each of `projections` reads before it applies `events`: one list each, in order.
    public static func reads(_ projections: [any InlineProjection], _ events: [ProjectedEvent]) -> [[PostgresQuery]] {
        projections.map { $0.reads(events) }
    }

    /// `events` applied by each of `projections` in order, then `then`, in the caller's
    /// transaction: first every projection's `reads`, in one round trip (or `read`: their rows,
    /// read already, for reads made from these events or more); then their writes pipelined,
    /// back to back, not one round trip each. The first error is thrown at the end.
    public static func apply(
        _ projections: [any InlineProjection], _ events: [ProjectedEvent], _ session: inout PostgresSession,
        read: (asked: [[PostgresQuery]], rows: [PostgresRows])? = nil, then: (inout PostgresSession) throws -> Void = { _ in }
    ) throws {
        let asked = read?.asked ?? reads(projections, events)
        var rows = try (read?.rows ?? session.reads(asked.flatMap { $0 }, prepared: true))[...]
        try session.pipelined { session in
            for (projection, reads) in zip(projections, asked) {
                try projection.apply(events, read: Array(rows.prefix(reads.count)), &session)
                rows = rows.dropFirst(reads.count)
            }
            try then(&session)
        }
    }
}

/// What projections keep from one batch of a rebuild to the next: one value per key, made at
/// its first use, for as long as the rebuild lasts. A rebuild's batches are made one after
/// another, so its lock is never waited for.
public final class RebuildMemory: Sendable {
    private let values = Mutex<[String: any Sendable]>([:])

    public init() {}

    /// `body` with the value kept under `key` (`initial` the first time), changed in place.
    /// A body that throws leaves what it had changed: a build that fails a batch is abandoned,
    /// never retried with the same memory.
    public func with<Value: Sendable, Result>(
        _ key: String, initial: @autoclosure () -> Value, _ body: (inout Value) throws -> Result
    ) rethrows -> Result {
        try values.withLock { values in
            // Taken out while it changes, so the dictionary holds no second reference to copy.
            var value: Value
            if let kept = values.removeValue(forKey: key) {
                guard let typed = kept as? Value else { preconditionFailure("\(key) is kept as \(type(of: kept)), not \(Value.self)") }
                value = typed
            } else {
                value = initial()
            }
            defer { values[key] = value }
            return try body(&value)
        }
    }
}

/// What an idempotency key holds: the request it was first used for, where that request's
/// events are in the log (none, for a command that decided nothing), and the response
/// recorded with them, if the writer gave one.
public struct IdempotencyRecord: Sendable, Hashable {
    public var requestHash: String
    public var positions: [Int64]
    public var response: JSONB?

    public init(requestHash: String, positions: [Int64], response: JSONB?) {
        self.requestHash = requestHash
        self.positions = positions
        self.response = response
    }
}
