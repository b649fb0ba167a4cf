import Crypto
import Foundation
import JSONStream
import Logging
import Metrics
import Postgres
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The append-only log: append with expected versions (one or several streams at once),
/// read a stream or the global log, follow it live, and verify its hash chains.
///
/// Appends are serialized through one locked row (`log_head`), so positions are gapless
/// and in commit order, and group-committed: every append waiting while a batch is in
/// flight goes into the next one, written by one call of `append_batch` in one transaction.
/// `append_batch` checks each append's expected versions before it writes anything of it, and
/// answers a conflict as that append's outcome, so one conflict fails only itself; an append
/// that raises (an event a projection refuses) fails the batch, which is then retried one
/// append at a time, so that only it fails.
public final class EventStore: Sendable {
    public let pool: PostgresPool
    public let logger: Logger
    /// The NOTIFY channel `append_batch` signals after each batch.
    public static let channel = "lender_events"

    private let maxBatchSize: Int
    private let queue = Mutex(Queue())
    /// The highest position this process has acknowledged, and whether the log was found
    /// behind it (see `LogBehind`): from then on every append is refused.
    private let acknowledged = Mutex((head: Int64(0), behind: LogBehind?.none))

    private struct Pending: Sendable {
        var request: String
        var idempotency: Idempotency?
        var response: (@Sendable (AppendResult) throws -> JSONB)?
        var appends: [StreamAppend]
        var metadata: EventMetadata
        var alongside: (@Sendable (inout PostgresSession) throws -> Void)?
        /// Whose data keys sealed its events.
        var sealedFor: Set<String>
        var continuation: CheckedContinuation<AppendOutcome, any Error>
    }

    private struct Queue {
        var pending: [Pending] = []
        var flushers = 0
    }

    /// Flushers at once from this process, each on a connection of its own. One is best
    /// measured: a second batch only waits at the log head's lock, and splitting the waiting
    /// appends in two costs a commit more for the same appends.
    private let maxFlushers: Int

    /// Views written in the appending transaction (see `InlineProjection`).
    public let projections: [any InlineProjection]

    /// Seals personal fields on append and opens them on `readStream` and `events(at:)`.
    /// Inline projections see the fields clear; `read(after:)` gives them as stored.
    public let personalData: PersonalData?

    public init(
        pool: PostgresPool, logger: Logger, projections: [any InlineProjection] = [], personalData: PersonalData? = nil,
        maxBatchSize: Int = 256, maxBatchesInFlight: Int = 1
    ) {
        self.pool = pool
        self.logger = logger
        self.projections = projections
        self.personalData = personalData
        self.maxBatchSize = maxBatchSize
        self.maxFlushers = max(1, min(maxBatchesInFlight, pool.options.size))
    }

    // MARK: Append

    /// Appends events to one or more streams atomically, checking every expected version.
    ///
    /// Throws `WrongExpectedVersion` (nothing written to any stream), `IdempotencyKeyReused`,
    /// or `InvalidAppend`. With an idempotency key, a repeat of the same request writes
    /// nothing and returns `.replayed` with the response `response` made for the first.
    ///
    /// `alongside` runs in the same transaction as the events, after them, so that a write the
    /// log must not be without (or exist without) commits with it or not at all. If it throws,
    /// nothing of this append is written.
    public func append(
        _ appends: [StreamAppend], metadata: EventMetadata = EventMetadata(), idempotency: Idempotency? = nil,
        response: (@Sendable (AppendResult) throws -> JSONB)? = nil,
        alongside: (@Sendable (inout PostgresSession) throws -> Void)? = nil
    ) async throws -> AppendOutcome {
        if let behind = logBehind { throw behind }
        let (stored, sealedFor) = try await personalData?.seal(appends, metadata: metadata) ?? (appends, [])
        let request = try Self.encodeRequest(stored, metadata: metadata, idempotency: idempotency)
        let outcome = try await withCheckedThrowingContinuation { continuation in
            let startFlushing = queue.withLock { queue in
                queue.pending.append(
                    Pending(
                        request: request, idempotency: idempotency, response: response, appends: appends,
                        metadata: metadata, alongside: alongside, sealedFor: sealedFor, continuation: continuation))
                guard queue.flushers < maxFlushers else { return false }
                queue.flushers += 1
                return true
            }
            if startFlushing {
                // Detached: the flusher serves every request's appends, not the task-locals of
                // the one that happened to start it.
                Task.detached { await self.flushUntilEmpty() }
            }
        }
        if case .appended(let result) = outcome { Self.eventsAppended.increment(by: Int64(result.positions.count)) }
        return outcome
    }

    /// Set once an append found the log's head below a position this process acknowledged
    /// before: the database lost commits (an asynchronous standby promoted), and positions
    /// would be handed out twice. Appends stay refused until an operator restarts the server.
    public var logBehind: LogBehind? { acknowledged.withLock { $0.behind } }

    /// Refuses a batch whose first new position is not above every position acknowledged
    /// before it. Inside the batch's transaction it rolls the batch back; on the path without
    /// one (no views, no idempotency, nothing alongside: never the server's) the batch has
    /// committed already and its appends are answered with the error all the same.
    private func checkAhead(_ rows: [BatchRow]) throws {
        guard let first = rows.lazy.filter({ $0.outcome == "appended" }).compactMap(\.positions.first).min() else { return }
        try acknowledged.withLock { acknowledged in
            if let behind = acknowledged.behind { throw behind }
            guard first > acknowledged.head else {
                let behind = LogBehind(head: first - 1, acknowledged: acknowledged.head)
                acknowledged.behind = behind
                throw behind
            }
        }
    }

    private func noteAcknowledged(_ rows: [BatchRow]) {
        guard let last = rows.lazy.filter({ $0.outcome == "appended" }).compactMap(\.positions.last).max() else { return }
        acknowledged.withLock { $0.head = max($0.head, last) }
    }

    /// `lender_events_appended_total`: events acknowledged as appended, by this process. Made
    /// at each use, as every metric here: one made before the process bootstraps its metrics
    /// (a store used before the server is built) would stay a no-op for good.
    static var eventsAppended: Counter { Counter(label: "lender_events_appended_total") }

    /// Appends to one stream and returns what was written; for callers without idempotency.
    @discardableResult
    public func append(
        to stream: StreamID, expectedVersion: ExpectedVersion, events: [NewEvent],
        metadata: EventMetadata = EventMetadata(), alongside: (@Sendable (inout PostgresSession) throws -> Void)? = nil
    ) async throws -> AppendResult {
        switch try await append(
            [StreamAppend(stream, expectedVersion: expectedVersion, events: events)], metadata: metadata, alongside: alongside)
        {
        case .appended(let result): return result
        case .replayed(let positions, _): return AppendResult(positions: positions, streamVersions: [:])
        }
    }

    /// Feeds the queue to the database until it is empty, on one pooled connection whose
    /// thread it keeps meanwhile: a blocking loop with no thread hop between batches.
    private func flushUntilEmpty() async {
        while true {
            do {
                let connectionBroke = try await pool.withConnection { connection in
                    let broke = try await connection.withBlockingSession { [self] session in drain(&session) }
                    // Broken, or a standby now: the pool must not lend it again.
                    if broke { connection.close() }
                    return broke
                }
                if !connectionBroke { return }
                // Its connection is dropped by the pool; go on with a fresh one.
            } catch {
                // No connection to be had: fail what waits now; the next append tries again.
                let failed = queue.withLock { queue in
                    defer {
                        queue.pending = []
                        queue.flushers -= 1
                    }
                    return queue.pending
                }
                logger.error("cannot append: no database connection", metadata: ["error": "\(error)"])
                for pending in failed { pending.continuation.resume(throwing: error) }
                return
            }
        }
    }

    /// Writes batches until the queue is empty (true: the connection broke first).
    private func drain(_ session: inout PostgresSession) -> Bool {
        var lastBatchSize = 1
        while true {
            let batch = takeBatch(expecting: lastBatchSize)
            if batch.isEmpty { return false }
            lastBatchSize = batch.count
            if write(batch, &session) { return true }
        }
    }

    /// The next batch: everything queued, once the writers just answered have had a moment
    /// to queue again (while the queue still grows, at most 300 µs), so that they join this
    /// batch instead of waiting for the next. Empty when nothing came: the flusher stops.
    private func takeBatch(expecting expected: Int) -> [Pending] {
        // sched_yield, not a sleep: a sleep's timer slack (50 µs here) outlasts the writers.
        let clock = ContinuousClock()
        let deadline = clock.now + .microseconds(300)
        var waiting = queue.withLock { $0.pending.count }
        var lastGrowth = clock.now
        while waiting < expected, clock.now < deadline {
            sched_yield()
            let now = queue.withLock { $0.pending.count }
            if now > waiting {
                waiting = now
                lastGrowth = clock.now
            } else if now > 0, clock.now - lastGrowth > .microseconds(50) {
                break
            }
        }
        return queue.withLock { queue in
            let batch = Array(queue.pending.prefix(maxBatchSize))
            queue.pending.removeFirst(batch.count)
            if batch.isEmpty { queue.flushers -= 1 }
            return batch
        }
    }

    /// Writes one batch and answers its appends (true: the connection broke).
    private func write(_ batch: [Pending], _ session: inout PostgresSession) -> Bool {
        let requests = JSONB(text: "[" + batch.map(\.request).joined(separator: ",") + "]")
        let needsResponses = batch.contains { $0.idempotency != nil && $0.response != nil }
        let hasAlongside = batch.contains { $0.alongside != nil }
        let sealedFor = batch.reduce(into: Set<String>()) { $0.formUnion($1.sealedFor) }
        // What the projections read before they write, sent with the batch in one round trip:
        // made from every event the batch may append, so a few rows more than its appends
        // need, at most.
        let asked = projections.isEmpty ? [] : InlineProjections.reads(projections, Self.provisional(batch))
        do {
            let rows: [BatchRow]
            var responses = [String: JSONB]()
            if needsResponses || hasAlongside || !projections.isEmpty || !sealedFor.isEmpty {
                // One transaction: the events, the views that follow from them, what must go
                // with them, the responses.
                (rows, responses) = try session.withTransaction { session in
                    let (rows, read) = try Self.runBatch(requests, reading: asked.flatMap { $0 }, &session)
                    try checkAhead(rows)
                    // What must go with the events comes before the views that follow from them:
                    // a claim refused here (a taken handle) is the append's answer.
                    for (pending, row) in zip(batch, rows) where row.outcome == "appended" {
                        try pending.alongside?(&session)
                    }
                    // After them: a forgetting in this very batch destroys its key alongside.
                    try PersonalData.checkNotForgotten(sealedFor, in: &session)
                    try project(batch, rows, read: (asked, read), &session)
                    return (rows, try Self.recordResponses(batch, rows, &session))
                }
            } else {
                // Committed already: a reused position is found, not prevented (the server
                // always has views to write, so it always takes the path above).
                rows = try Self.runBatch(requests, reading: [], &session).rows
                try checkAhead(rows)
            }
            noteAcknowledged(rows)
            for (pending, row) in zip(batch, rows) {
                pending.continuation.resume(with: Result { try Self.outcome(of: pending, row, responses: responses) })
            }
            return false
        } catch where batch.count > 1 && !Self.losesConnection(error) && !(error is LogBehind) {
            // One malformed request (or an event a projection cannot take) fails the whole
            // batch: retry each alone, so that only it fails.
            logger.warning("an append batch failed; retrying its appends one by one", metadata: ["error": "\(error)"])
            for (index, pending) in batch.enumerated() where write([pending], &session) {
                // The connection broke under this one (answered with the error): the appends
                // not yet tried go back to the front of the queue, for the flusher's next
                // connection, so none is left without an answer.
                let untried = batch[(index + 1)...]
                queue.withLock { $0.pending.insert(contentsOf: untried, at: 0) }
                return true
            }
            return false
        } catch {
            logger.error("an append failed", metadata: ["error": "\(error)", "appends": "\(batch.count)"])
            for pending in batch { pending.continuation.resume(throwing: error) }
            return Self.losesConnection(error)
        }
    }

    /// The connection broke, or reached a server that is a standby now (a failover).
    private static func losesConnection(_ error: any Error) -> Bool {
        guard let error = error as? PostgresError else { return false }
        return error.isConnectionFailure || error.isReadOnlyServer
    }

    /// Runs every inline projection over the batch's appended events, then moves their checkpoints.
    private func project(
        _ batch: [Pending], _ rows: [BatchRow], read: (asked: [[PostgresQuery]], rows: [PostgresRows]),
        _ session: inout PostgresSession
    ) throws {
        guard !projections.isEmpty else { return }
        var events = [ProjectedEvent]()
        for (pending, row) in zip(batch, rows) where row.outcome == "appended" {
            var positions = row.positions.makeIterator()
            for (append, finalVersion) in zip(pending.appends, row.versions) {
                let firstVersion = finalVersion - append.events.count + 1
                for (offset, event) in append.events.enumerated() {
                    guard let position = positions.next() else {
                        throw PostgresError(.decoding, message: "append_batch returned fewer positions than events")
                    }
                    events.append(
                        ProjectedEvent(
                            position: position, streamID: append.stream, streamVersion: firstVersion + offset,
                            type: event.type, schemaVersion: event.schemaVersion, data: event.data,
                            recordedAt: row.appendedAt ?? Date(), decoded: event.decoded))
                }
            }
        }
        guard let last = events.last?.position else { return }
        // As a rebuild's catch-up applies them, on the connection that holds the log head.
        // The first error is thrown at the end, and the transaction with it.
        try InlineProjections.apply(projections, events, &session, read: read) { session in
            try Self.checkpoint(projections, at: last, in: &session)
        }
    }

    /// Records that `projections` have applied the log up to `position`.
    public static func checkpoint(
        _ projections: [any InlineProjection], at position: Int64, in session: inout PostgresSession
    ) throws {
        try session.query(
            """
            INSERT INTO projection_checkpoints AS c (name, position)
            SELECT name, \(position) FROM unnest(\(projections.map(\.name))) AS name
            ON CONFLICT (name) DO UPDATE SET position = excluded.position
            """, prepared: true)
    }

    /// One row of `append_batch`.
    private struct BatchRow: Sendable {
        var outcome: String
        var positions: [Int64]
        var versions: [Int]
        var conflictStream: String?
        var actual: Int?
        var response: JSONB?
        var appendedAt: Date?
    }

    /// The batch appended, and `reading` run after it in the same round trip: its rows.
    private static func runBatch(
        _ requests: JSONB, reading: [PostgresQuery], _ session: inout PostgresSession
    ) throws -> (rows: [BatchRow], read: [PostgresRows]) {
        let append: PostgresQuery = """
            SELECT request_index, outcome, positions, versions, conflict_stream, actual, response, appended_at
            FROM append_batch(\(requests))
            """
        let answers = reading.isEmpty ? [try session.query(append, prepared: true)] : try session.reads([append] + reading, prepared: true)
        let rows = try answers[0].enumerated().map { index, row in
            guard try row.decode("request_index", as: Int.self) == index else {
                throw PostgresError(.decoding, message: "append_batch answered out of order at row \(index)")
            }
            return BatchRow(
                outcome: try row.decode(1), positions: try row.decode(2, as: [Int64]?.self) ?? [],
                versions: try row.decode(3, as: [Int]?.self) ?? [], conflictStream: try row.decode(4, as: String?.self),
                actual: try row.decode(5, as: Int?.self), response: try row.decode(6, as: JSONB?.self),
                appendedAt: try row.decode(7, as: Date?.self))
        }
        return (rows, Array(answers.dropFirst()))
    }

    /// Every event of the batch as the projections will see it if it is appended, but for
    /// where and when (not known before the append): what their `reads` are made from.
    private static func provisional(_ batch: [Pending]) -> [ProjectedEvent] {
        batch.flatMap { pending in
            pending.appends.flatMap { append in
                append.events.map { event in
                    ProjectedEvent(
                        position: 0, streamID: append.stream, streamVersion: 0, type: event.type,
                        schemaVersion: event.schemaVersion, data: event.data, recordedAt: Date(timeIntervalSince1970: 0),
                        decoded: event.decoded)
                }
            }
        }
    }

    private static func result(of pending: Pending, _ row: BatchRow) -> AppendResult {
        AppendResult(
            positions: row.positions,
            streamVersions: Dictionary(uniqueKeysWithValues: zip(pending.appends.map(\.stream), row.versions)),
            recordedAt: row.appendedAt)
    }

    /// Stores the response of each appended request that has an idempotency key, in the
    /// batch's transaction; returns them by key so that in-batch repeats get the same.
    private static func recordResponses(_ batch: [Pending], _ rows: [BatchRow], _ session: inout PostgresSession)
        throws -> [String: JSONB]
    {
        var responses = [String: JSONB]()
        var actors = [String]()
        var keys = [String]()
        var bodies = [String]()
        for (pending, row) in zip(batch, rows) where row.outcome == "appended" {
            guard let idempotency = pending.idempotency, let makeResponse = pending.response else { continue }
            let response = try makeResponse(result(of: pending, row))
            responses[responseKey(idempotency)] = response
            actors.append(idempotency.actor)
            keys.append(idempotency.key)
            bodies.append(response.text)
        }
        if !keys.isEmpty {
            try session.query(
                """
                UPDATE idempotency_keys AS k SET response = r.response::jsonb
                FROM unnest(\(actors), \(keys), \(bodies)) AS r(actor, key, response)
                WHERE k.actor = r.actor AND k.key = r.key
                """, prepared: true)
        }
        return responses
    }

    private static func responseKey(_ idempotency: Idempotency) -> String {
        "\(idempotency.actor)\u{0}\(idempotency.key)"
    }

    private static func outcome(of pending: Pending, _ row: BatchRow, responses: [String: JSONB]) throws -> AppendOutcome {
        switch row.outcome {
        case "appended":
            return .appended(result(of: pending, row))
        case "replayed":
            // A repeat within the same batch finds its twin's key before the response is stored.
            let response = row.response ?? pending.idempotency.flatMap { responses[responseKey($0)] }
            return .replayed(positions: row.positions, response: response)
        case "key_reused":
            let idempotency = pending.idempotency!
            throw IdempotencyKeyReused(actor: idempotency.actor, key: idempotency.key)
        case "wrong_expected_version":
            let stream = StreamID(rawValue: row.conflictStream ?? "")
            let expected = pending.appends.first { $0.stream == stream }?.expectedVersion ?? .any
            throw WrongExpectedVersion(stream: stream, expected: expected, actual: row.actual ?? 0)
        default:
            throw PostgresError(.server, message: "append_batch answered an unknown outcome \(row.outcome)")
        }
    }

    /// One request of `append_batch`, as JSON text; validates the append first.
    static func encodeRequest(
        _ appends: [StreamAppend], metadata: EventMetadata, idempotency: Idempotency?
    ) throws -> String {
        // A stream with no events is a check of its expected version, next to the others' events.
        guard appends.contains(where: { !$0.events.isEmpty }) else {
            throw InvalidAppend(reason: "an append needs at least one event")
        }
        guard appends.allSatisfy({ !$0.events.isEmpty || $0.expectedVersion != .any }) else {
            throw InvalidAppend(reason: "a stream with no events is a check, and needs an expected version")
        }
        guard Set(appends.map(\.stream)).count == appends.count else {
            throw InvalidAppend(reason: "a stream appears twice in one append")
        }
        for append in appends {
            guard append.stream.isValid else { throw InvalidAppend(reason: "bad stream name \(append.stream)") }
            if case .exact(let version) = append.expectedVersion, version < 0 {
                throw InvalidAppend(reason: "expected version \(version) is negative")
            }
            for event in append.events {
                guard !event.type.isEmpty, !event.type.contains(where: \.isNewline), event.schemaVersion > 0 else {
                    throw InvalidAppend(reason: "bad event type \(event.type.debugDescription) or schema version")
                }
            }
        }
        var json = "{\"streams\":["
        for (index, append) in appends.enumerated() {
            if index > 0 { json += "," }
            let expected: String =
                switch append.expectedVersion {
                case .any: "\"any\""
                case .noStream: "\"none\""
                case .exact(let version): String(version)
                }
            json += "{\"streamId\":\(jsonString(append.stream.rawValue)),\"expected\":\(expected),\"events\":["
            json += append.events.map { event in
                "{\"type\":\(jsonString(event.type)),\"schemaVersion\":\(event.schemaVersion),\"data\":\(event.data.text)}"
            }.joined(separator: ",")
            json += "]}"
        }
        json += "],\"metadata\":" + metadata.json
        if let idempotency {
            json += ",\"idempotency\":{\"actor\":\(jsonString(idempotency.actor)),\"key\":\(jsonString(idempotency.key))"
            json += ",\"requestHash\":\(jsonString(idempotency.requestHash))}"
        }
        json += "}"
        if containsEscapedNUL(json) {
            throw InvalidAppend(reason: "text with a NUL character (\\u0000) cannot be stored")
        }
        return json
    }

    // MARK: Idempotency keys

    /// What `idempotency.key` already holds for its actor, if anything.
    public func idempotencyRecord(actor: String, key: String) async throws -> IdempotencyRecord? {
        let rows = try await pool.query(
            "SELECT request_hash, positions, response FROM idempotency_keys WHERE actor = \(actor) AND key = \(key)",
            prepared: true)
        return try rows.first.map { row in
            IdempotencyRecord(
                requestHash: try row.decode(0), positions: try row.decode(1, as: [Int64].self),
                response: try row.decode(2, as: JSONB?.self))
        }
    }

    /// Holds a key for a request that appended nothing (a command that decided nothing), so
    /// that the key is spent all the same: answers the record the key holds now, this one or
    /// an earlier request's.
    public func recordUnchanged(_ idempotency: Idempotency, response: JSONB? = nil) async throws -> IdempotencyRecord {
        // Under the log head, shared (see `record_unchanged`, migration 0011).
        try await pool.query(
            """
            SELECT FROM record_unchanged(\(idempotency.actor), \(idempotency.key), \(idempotency.requestHash), \(response))
            """)
        guard let record = try await idempotencyRecord(actor: idempotency.actor, key: idempotency.key) else {
            throw PostgresError(.server, message: "the idempotency key \(idempotency.key) was not kept")
        }
        return record
    }

    /// The events at `positions`, in order, opened.
    public func events(at positions: [Int64]) async throws -> [RecordedEvent] {
        guard !positions.isEmpty else { return [] }
        return try await opened(
            try await pool.query(
                """
                SELECT \(unsafeRaw: Self.columns) FROM events WHERE position = ANY(\(positions)) ORDER BY position
                """
            ).map(Self.recordedEvent))
    }

    private func opened(_ events: [RecordedEvent]) async throws -> [RecordedEvent] {
        guard let personalData else { return events }
        return try await personalData.open(events)
    }

    // MARK: Read

    public static let columns = """
        position, stream_id, stream_version, type, schema_version, data, metadata, recorded_at, previous_hash, hash
        """

    /// A stream's events from `version` on, in order, opened.
    public func readStream(_ stream: StreamID, from version: Int = 1) async throws -> [RecordedEvent] {
        try await opened(try await pool.query(
            """
            SELECT \(unsafeRaw: Self.columns) FROM events
            WHERE stream_id = \(stream.rawValue) AND stream_version >= \(version)
            ORDER BY stream_version
            """, prepared: true
        ).map(Self.recordedEvent))
    }

    /// Up to `limit` events of the whole log after `position`, in order, as stored: personal
    /// fields sealed (what auditors receive).
    public func read(after position: Int64, limit: Int = 1000) async throws -> [RecordedEvent] {
        try await pool.query(
            """
            SELECT \(unsafeRaw: Self.columns) FROM events
            WHERE position > \(position)
            ORDER BY position
            LIMIT \(limit)
            """
        ).map(Self.recordedEvent)
    }

    /// The stream's version: its last event's, 0 when it has none.
    public func version(of stream: StreamID) async throws -> Int {
        let rows = try await pool.query("SELECT version FROM streams WHERE stream_id = \(stream.rawValue)")
        return try rows.first?.decode("version", as: Int.self) ?? 0
    }

    /// The position of the last event in the log, 0 when it is empty.
    public func headPosition() async throws -> Int64 {
        try await pool.query("SELECT position FROM log_head").single().decode("position", as: Int64.self)
    }

    /// The columns a projection reads (`projectedEvent`): not the metadata or the hashes,
    /// whose text PostgreSQL writes and the rebuilder reads back for every event.
    public static let projectedColumns = "position, stream_id, stream_version, type, schema_version, data, recorded_at"

    public static func projectedEvent(_ row: PostgresRow) throws -> ProjectedEvent {
        ProjectedEvent(
            position: try row.decode(0), streamID: StreamID(rawValue: try row.decode(1)), streamVersion: try row.decode(2),
            type: try row.decode(3), schemaVersion: try row.decode(4), data: try row.decode(5), recordedAt: try row.decode(6))
    }

    public static func recordedEvent(_ row: PostgresRow) throws -> RecordedEvent {
        RecordedEvent(
            position: try row.decode(0), streamID: StreamID(rawValue: try row.decode(1)), streamVersion: try row.decode(2),
            type: try row.decode(3), schemaVersion: try row.decode(4), data: try row.decode(5), metadata: try row.decode(6),
            recordedAt: try row.decode(7), previousHash: try row.decode(8), hash: try row.decode(9))
    }
}

/// A JSON string literal, escaped as RFC 8259 requires.
func jsonString(_ text: String) -> String {
    // Byte runs copied whole, escaped as the answers are (JSONStream), where appending scalar
    // by scalar was 1.5% of a command's CPU.
    var text = text
    var bytes: [UInt8] = []
    bytes.reserveCapacity(text.utf8.count + 2)
    text.withUTF8 { JSONSink.appendEscaped($0, to: &bytes) }
    return String(decoding: bytes, as: UTF8.self)
}

/// True when JSON text holds the escape `\u0000`, which jsonb refuses.
func containsEscapedNUL(_ json: String) -> Bool {
    let bytes = Array(json.utf8)
    var index = 0
    while index + 5 < bytes.count {
        if bytes[index] == UInt8(ascii: "\\") {
            if bytes[index + 1] == UInt8(ascii: "u"), bytes[index + 2...index + 5].elementsEqual("0000".utf8) {
                return true
            }
            index += 2  // skip the escaped character, so `\\u0000` is not taken for NUL
        } else {
            index += 1
        }
    }
    return false
}

extension EventMetadata {
    /// The same JSON as `JSONEncoder` gives, written by hand: it is made for every append.
    var json: String {
        let fields: [(String, String?)] = [
            ("actorID", actorID), ("correlationID", correlationID), ("causationID", causationID),
            ("idempotencyKey", idempotencyKey), ("requestID", requestID),
        ]
        return "{" + fields.compactMap { name, value in value.map { "\"\(name)\":\(jsonString($0))" } }
            .joined(separator: ",") + "}"
    }
}
