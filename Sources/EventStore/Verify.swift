import Crypto
import Foundation
import Postgres

/// The first place where the log is not what was appended.
public struct ChainBreak: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        /// The event's content does not match its hash, or its link to the previous one.
        case altered
        /// An event that should be here is not.
        case missing
        /// The event stands out of its stream's order.
        case reordered
    }

    public var kind: Kind
    /// Where the break is: the altered or misplaced event, or where the missing one stood.
    public var position: Int64
    public var streamID: StreamID?
    public var streamVersion: Int?
    public var message: String

    public var description: String { "\(kind.rawValue) at position \(position): \(message)" }
}

extension EventStore {
    /// Recomputes the hash chains and checks the log's shape; returns the first break, or
    /// nil when the log is intact. With `stream`, checks that stream only. With `checkpoint`,
    /// also checks that the log still extends it: it reaches the checkpoint's position, and
    /// every stream's head there is the one signed.
    ///
    /// The whole log must have positions 1...head without holes (appends are gapless), each
    /// stream versions 1...n in position order, each event a `previousHash` equal to the hash
    /// of its stream's event before, and a `hash` equal to the one recomputed from its
    /// content. Each stream's recorded head must match its last event.
    ///
    /// Everything is read in one snapshot (REPEATABLE READ), so appends committing meanwhile
    /// are either wholly seen or not at all: never a false alarm.
    public func verify(stream: StreamID? = nil, checkpoint: LogCheckpoint? = nil, pageSize: Int = 5000) async throws
        -> ChainBreak?
    {
        if stream != nil, checkpoint != nil {
            throw CheckpointError("a checkpoint covers the whole log: verify it without a stream")
        }
        return try await pool.withConnection { connection in
            try await connection.withBlockingSession { session in
                try session.withTransaction(.readOnlySnapshot) { session in
                    var walk = ChainWalk(stream: stream, checkpoint: checkpoint)
                    return try walk.run(&session, pageSize: pageSize)
                }
            }
        }
    }

    static let genesisHash = Data(repeating: 0, count: 32)

    /// The columns a hash covers, rendered as append_batch renders them (see the comment on the events table).
    static let canonicalColumns = """
        position, stream_id, stream_version, type, schema_version, data::text AS data_text,
        metadata::text AS metadata_text,
        to_char(recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS recorded_text,
        previous_hash, hash
        """
}

/// An event as its hash sees it.
private struct CanonicalEvent {
    var position: Int64
    var streamID: StreamID
    var streamVersion: Int
    var previousHash: Data
    var hash: Data
    var recomputedHash: Data
    var streamKey: Data { Data(streamID.rawValue.utf8) }

    init(_ row: PostgresRow) throws {
        position = try row.decode(0)
        streamID = StreamID(rawValue: try row.decode(1))
        streamVersion = try row.decode(2)
        previousHash = try row.decode(8)
        hash = try row.decode(9)
        let type: String = try row.decode(3)
        let schemaVersion: Int = try row.decode(4)
        let data: String = try row.decode(5)
        let metadata: String = try row.decode(6)
        let recorded: String = try row.decode(7)
        // The same text as append_batch hashes: fields joined by newlines, after the previous hash.
        let canonical = [
            String(position), streamID.rawValue, String(streamVersion), type, String(schemaVersion), data, metadata,
            recorded,
        ].joined(separator: "\n")
        recomputedHash = Data(SHA256.hash(data: previousHash + Data(canonical.utf8)))
    }

    func `break`(_ kind: ChainBreak.Kind, _ message: String) -> ChainBreak {
        ChainBreak(kind: kind, position: position, streamID: streamID, streamVersion: streamVersion, message: message)
    }
}

/// One verification's walk through the log, page by page, within the caller's snapshot.
private struct ChainWalk {
    let stream: StreamID?
    let checkpoint: LogCheckpoint?
    /// Keyed by the id's bytes, as PostgreSQL tells streams apart (a Swift `String` key would
    /// merge two ids that are canonically equivalent Unicode but different bytes).
    var heads = [Data: (version: Int, hash: Data, position: Int64)]()
    var lastPosition: Int64 = 0
    var lastVersion = 0
    /// The streams' heads as they stood at the checkpoint's position, once the walk passed it.
    var atCheckpoint: (count: Int, digest: String)?

    init(stream: StreamID?, checkpoint: LogCheckpoint?) {
        self.stream = stream
        self.checkpoint = checkpoint
        if checkpoint?.position == 0 { atCheckpoint = LogCheckpoint.digest([]) }
    }

    mutating func run(_ session: inout PostgresSession, pageSize: Int) throws -> ChainBreak? {
        while true {
            let rows: PostgresRows =
                if let stream {
                    try session.query(
                        """
                        SELECT \(unsafeRaw: EventStore.canonicalColumns) FROM events
                        WHERE stream_id = \(stream.rawValue) AND stream_version > \(lastVersion)
                        ORDER BY stream_version LIMIT \(pageSize)
                        """)
                } else {
                    try session.query(
                        """
                        SELECT \(unsafeRaw: EventStore.canonicalColumns) FROM events
                        WHERE position > \(lastPosition)
                        ORDER BY position LIMIT \(pageSize)
                        """)
                }
            if rows.isEmpty { break }
            for row in rows {
                if let found = try check(CanonicalEvent(row), &session) { return found }
            }
        }
        if let found = try checkHeads(&session) { return found }
        return checkCheckpoint()
    }

    private mutating func check(_ event: CanonicalEvent, _ session: inout PostgresSession) throws -> ChainBreak? {
        if stream == nil, event.position != lastPosition + 1 {
            return ChainBreak(
                kind: .missing, position: lastPosition + 1, streamID: nil, streamVersion: nil,
                message: "no event at position \(lastPosition + 1); the next is \(event.position)")
        }
        let head = heads[event.streamKey] ?? (0, EventStore.genesisHash, 0)
        if event.streamVersion > head.version + 1 {
            // The skipped version may stand later in the log (moved), or nowhere (removed).
            let skipped = try session.query(
                """
                SELECT position FROM events
                WHERE stream_id = \(event.streamID.rawValue) AND stream_version = \(head.version + 1)
                """
            ).first.map { try $0.decode("position", as: Int64.self) }
            if let skipped {
                return event.break(
                    .reordered, "stream \(event.streamID) version \(event.streamVersion) stands before version \(head.version + 1) (at \(skipped))")
            }
            return event.break(.missing, "stream \(event.streamID) jumps from version \(head.version) to \(event.streamVersion)")
        }
        if event.streamVersion <= head.version {
            return event.break(.reordered, "stream \(event.streamID) version \(event.streamVersion) comes after version \(head.version)")
        }
        if stream != nil, event.position <= head.position {
            return event.break(.reordered, "position \(event.position) comes after position \(head.position) in its stream")
        }
        if event.previousHash != head.hash {
            return event.break(.altered, "its previous hash is not the hash of version \(head.version)")
        }
        if event.recomputedHash != event.hash {
            return event.break(.altered, "its content does not match its hash")
        }
        heads[event.streamKey] = (event.streamVersion, event.hash, event.position)
        lastPosition = event.position
        lastVersion = event.streamVersion
        if event.position == checkpoint?.position {
            atCheckpoint = LogCheckpoint.digest(
                heads.map { (id: StreamID(rawValue: String(decoding: $0.key, as: UTF8.self)), version: $0.value.version, hash: $0.value.hash) })
        }
        return nil
    }

    /// The recorded heads (log and streams) must match the last events seen: a removed last
    /// event leaves its head pointing past the end.
    private func checkHeads(_ session: inout PostgresSession) throws -> ChainBreak? {
        if stream == nil {
            let head = try session.query("SELECT position FROM log_head").single().decode("position", as: Int64.self)
            if head > lastPosition {
                return ChainBreak(
                    kind: .missing, position: lastPosition + 1, streamID: nil, streamVersion: nil,
                    message: "the log head is at \(head) but the last event is at \(lastPosition)")
            }
        }
        let rows: PostgresRows =
            if let stream {
                try session.query(
                    "SELECT stream_id, version, last_position, last_hash FROM streams WHERE stream_id = \(stream.rawValue)")
            } else {
                try session.query("SELECT stream_id, version, last_position, last_hash FROM streams ORDER BY last_position")
            }
        for row in rows {
            let id = StreamID(rawValue: try row.decode("stream_id"))
            let version = try row.decode("version", as: Int.self)
            let recordedHash = try row.decode("last_hash", as: Data.self)
            let seen = heads[Data(id.rawValue.utf8)]
            if seen?.version != version || seen?.hash != recordedHash {
                return ChainBreak(
                    kind: .missing, position: try row.decode("last_position"), streamID: id, streamVersion: version,
                    message: "stream \(id) should end at version \(version), but its events end at version \(seen?.version ?? 0)")
            }
        }
        return nil
    }

    /// The log must reach the checkpoint's position, with the streams' heads there as signed.
    private func checkCheckpoint() -> ChainBreak? {
        guard let checkpoint else { return nil }
        guard let atCheckpoint else {
            return ChainBreak(
                kind: .missing, position: lastPosition + 1, streamID: nil, streamVersion: nil,
                message: "the checkpoint signed at \(checkpoint.signedAt) says the log reached position \(checkpoint.position), "
                    + "but it ends at \(lastPosition): the log was cut short")
        }
        guard atCheckpoint.count == checkpoint.streams, atCheckpoint.digest == checkpoint.streamsDigest else {
            return ChainBreak(
                kind: .altered, position: checkpoint.position, streamID: nil, streamVersion: nil,
                message: "the log up to position \(checkpoint.position) is not the one signed at \(checkpoint.signedAt) "
                    + "(\(atCheckpoint.count) streams now, \(checkpoint.streams) then, and their heads differ): "
                    + "it was rewritten at or before that position")
        }
        return nil
    }
}
