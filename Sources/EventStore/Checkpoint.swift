import Crypto
import Foundation
import Postgres

/// A signed statement of how far the log reached: its head position, and every stream's last
/// hash at that position folded into one digest, at a time, signed with Ed25519.
///
/// What it proves, to whoever keeps a copy: the log at `position` was exactly this, so a log
/// later cut short before `position`, or with any event up to it rewritten (even with every
/// hash recomputed), no longer matches. What it does not prove: anything after `position`,
/// or that the log was honest before the first checkpoint anyone kept; and nothing at all
/// against whoever holds the signing key.
public struct LogCheckpoint: Codable, Sendable, Hashable {
    public static let format = "lender-checkpoint-v1"

    public var format: String
    /// The log's head: the last position the checkpoint covers.
    public var position: Int64
    /// How many streams have events at or before `position`.
    public var streams: Int
    /// SHA-256, hex, of every stream's `id`, `version` and hex `last hash` at `position`, each
    /// followed by a newline, the streams in the byte order of their ids.
    public var streamsDigest: String
    /// When it was signed (RFC 3339, UTC), as the signed text has it.
    public var signedAt: String
    /// The signer's Ed25519 public key, base64 of its 32 bytes.
    public var publicKey: String
    /// Ed25519 over `signedText`, base64.
    public var signature: String

    /// The text the signature covers: the format, position, stream count, digest and time, one a line.
    public var signedText: String {
        [format, String(position), String(streams), streamsDigest, signedAt].joined(separator: "\n")
    }

    public init(position: Int64, streams: Int, streamsDigest: String, signedAt: Date, key: Curve25519.Signing.PrivateKey) throws {
        self.format = Self.format
        self.position = position
        self.streams = streams
        self.streamsDigest = streamsDigest
        self.signedAt = Self.timeFormatter.string(from: signedAt)
        self.publicKey = key.publicKey.rawRepresentation.base64EncodedString()
        self.signature = ""
        self.signature = try key.signature(for: Data(signedText.utf8)).base64EncodedString()
    }

    /// Whether `key` signed exactly this statement.
    public func isSigned(by key: Curve25519.Signing.PublicKey) -> Bool {
        guard format == Self.format, let signature = Data(base64Encoded: signature) else { return false }
        return key.isValidSignature(signature, for: Data(signedText.utf8))
    }

    /// The digest of stream heads, as `streamsDigest` defines it.
    static func digest(_ heads: some Sequence<(id: StreamID, version: Int, hash: Data)>) -> (count: Int, digest: String) {
        var hasher = SHA256()
        var count = 0
        for head in heads.sorted(by: { $0.id.rawValue.utf8.lexicographicallyPrecedes($1.id.rawValue.utf8) }) {
            hasher.update(data: Data("\(head.id.rawValue)\n\(head.version)\n\(head.hash.hexString)\n".utf8))
            count += 1
        }
        return (count, Data(hasher.finalize()).hexString)
    }

    /// RFC 3339 with milliseconds: made fresh, as the formatter is not Sendable.
    static var timeFormatter: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }

    /// A signing key from the text of `AUDIT_SIGNING_KEY_FILE`: base64 of 32 random bytes.
    public static func signingKey(base64 text: String) throws -> Curve25519.Signing.PrivateKey {
        guard let raw = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)), raw.count == 32 else {
            throw CheckpointError("an audit signing key is base64 of 32 bytes (head -c 32 /dev/urandom | base64)")
        }
        return try Curve25519.Signing.PrivateKey(rawRepresentation: raw)
    }

    /// A public key as `lender audit public-key` prints it: base64 of its 32 bytes.
    public static func publicKey(base64 text: String) throws -> Curve25519.Signing.PublicKey {
        guard let raw = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)), raw.count == 32 else {
            throw CheckpointError("a public key is base64 of 32 bytes, as `lender audit public-key` prints it")
        }
        return try Curve25519.Signing.PublicKey(rawRepresentation: raw)
    }
}

public struct CheckpointError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

extension EventStore {
    /// Signs the log as it stands: the head and every stream's head, read in one snapshot.
    public func checkpoint(signingKey: Curve25519.Signing.PrivateKey) async throws -> LogCheckpoint {
        let (position, streams) = try await pool.withConnection { connection in
            try await connection.withBlockingSession { session in
                try session.withTransaction(.readOnlySnapshot) { session in
                    let position = try session.query("SELECT position FROM log_head").single().decode(0, as: Int64.self)
                    // Sign only heads that their events bear out: a `streams` table out of step
                    // with the log would be signed, and later read as a rewrite.
                    let astray = try session.query(
                        """
                        SELECT s.stream_id FROM streams s LEFT JOIN events e ON e.position = s.last_position
                        WHERE e.stream_id IS DISTINCT FROM s.stream_id OR e.stream_version IS DISTINCT FROM s.version
                           OR e.hash IS DISTINCT FROM s.last_hash
                        LIMIT 1
                        """)
                    if let stream = try astray.first?.decode(0, as: String.self) {
                        throw CheckpointError("the head of stream \(stream) does not match its last event: run `lender audit verify`")
                    }
                    let streams = try session.query("SELECT stream_id, version, last_hash FROM streams").map { row in
                        (id: StreamID(rawValue: try row.decode(0)), version: try row.decode(1, as: Int.self),
                         hash: try row.decode(2, as: Data.self))
                    }
                    return (position, streams)
                }
            }
        }
        let (count, digest) = LogCheckpoint.digest(streams)
        return try LogCheckpoint(position: position, streams: count, streamsDigest: digest, signedAt: Date(), key: signingKey)
    }

    /// Keeps a checkpoint where auditors can fetch it (`audit_checkpoints`, outside the log).
    public func store(_ checkpoint: LogCheckpoint) async throws {
        let signedAt = LogCheckpoint.timeFormatter.date(from: checkpoint.signedAt) ?? Date()
        try await pool.query(
            """
            INSERT INTO audit_checkpoints (position, signed_at, statement)
            VALUES (\(checkpoint.position), \(signedAt), \(try JSONB(checkpoint)))
            """)
    }

    /// The kept checkpoints after `id`, oldest first, with their ids.
    public func checkpoints(after id: Int64, limit: Int) async throws -> [(id: Int64, checkpoint: LogCheckpoint)] {
        try await pool.query(
            "SELECT id, statement FROM audit_checkpoints WHERE id > \(id) ORDER BY id LIMIT \(limit)"
        ).map { row in
            (try row.decode(0, as: Int64.self), try row.decode(1, as: JSONB.self).decode(LogCheckpoint.self))
        }
    }

    /// The last kept checkpoint, if any (the desk verifies it).
    public func lastCheckpoint() async throws -> LogCheckpoint? {
        try await pool.query("SELECT statement FROM audit_checkpoints ORDER BY id DESC LIMIT 1").first.map {
            try $0.decode(0, as: JSONB.self).decode(LogCheckpoint.self)
        }
    }

    /// The position of the last kept checkpoint, if any.
    public func lastCheckpointPosition() async throws -> Int64? {
        try await pool.query("SELECT max(position) AS p FROM audit_checkpoints").single().decode(0, as: Int64?.self)
    }
}
