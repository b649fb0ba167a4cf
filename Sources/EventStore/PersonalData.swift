import Crypto
import Foundation
import Postgres

/// A top-level field of an event's body that says something about a person: stored sealed
/// with that person's data key, read back clear while the key lives, and as `redacted`
/// once they are forgotten.
public struct PersonalField: Sendable, Hashable {
    /// Whose data key seals the field.
    public enum Subject: Sendable, Hashable {
        /// The stream's own id (`user-{id}`).
        case stream
        /// The id in another field of the same body (`ownerID`).
        case field(String)
        /// Whoever appended the event (`EventMetadata.actorID`).
        case actor
    }

    public var name: String
    public var subject: Subject
    public var redacted: JSONValue

    public init(_ name: String, of subject: Subject, redacted: JSONValue) {
        self.name = name
        self.subject = subject
        self.redacted = redacted
    }
}

/// A sealed field as the log stores it, in place of its value:
/// `{"$sealed": {"key": subject, "nonce": base64, "ciphertext": base64}}`. The ciphertext
/// (with its tag) is the value's JSON, bound to the event type and the field's name.
enum Envelope {
    static let marker = "$sealed"

    /// A value's JSON text sealed, as the envelope's JSON text.
    static func seal(_ plain: [UInt8], subject: String, key: SymmetricKey, context: String) throws -> String {
        let box = try AES.GCM.seal(plain, using: key, authenticating: Data(context.utf8))
        return "{\"\(marker)\":{\"key\":\(jsonString(subject)),\"nonce\":\"\(Data(box.nonce).base64EncodedString())\","
            + "\"ciphertext\":\"\((box.ciphertext + box.tag).base64EncodedString())\"}}"
    }

    /// The subject whose key sealed `value`, if it is an envelope.
    static func subject(of value: JSONValue) -> String? {
        guard case .string(let subject) = value[marker]?["key"] else { return nil }
        return subject
    }

    static func open(_ value: JSONValue, key: SymmetricKey, context: String) throws -> JSONValue {
        guard case .string(let nonceText) = value[marker]?["nonce"], case .string(let sealedText) = value[marker]?["ciphertext"],
            let nonceBytes = Data(base64Encoded: nonceText), let sealed = Data(base64Encoded: sealedText), sealed.count >= 16
        else { throw PersonalDataError.malformedEnvelope(context) }
        let box = try AES.GCM.SealedBox(
            nonce: try AES.GCM.Nonce(data: nonceBytes), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
        return try JSONDecoder().decode(JSONValue.self, from: try AES.GCM.open(box, using: key, authenticating: Data(context.utf8)))
    }

    /// Cheap test before parsing: does the body hold an envelope at all?
    static func mayHold(_ data: JSONB) -> Bool {
        // On the bytes: `String.contains` goes through NSString here, 12% of a rebuild (`perf`).
        var text = data.text
        return text.withUTF8 { haystack in
            quotedMarker.withUnsafeBufferPointer { needle in
                guard let start = haystack.baseAddress, haystack.count >= needle.count else { return false }
                // Each '$' (rare in a body) where the marker could start one byte before it.
                var from = 1
                while from < haystack.count, let found = memchr(start + from, Int32(UInt8(ascii: "$")), haystack.count - from) {
                    let at = start.distance(to: found.assumingMemoryBound(to: UInt8.self)) - 1
                    if at + needle.count <= haystack.count, memcmp(start + at, needle.baseAddress!, needle.count) == 0 { return true }
                    from = at + 2
                }
                return false
            }
        }
    }

    private static let quotedMarker = Array("\"\(marker)\"".utf8)
}

public enum PersonalDataError: Error, Sendable, Hashable, CustomStringConvertible {
    case malformedEnvelope(String)
    case noSubject(String)
    case unscannable(String)

    public var description: String {
        switch self {
        case .malformedEnvelope(let field): "the sealed field \(field) is malformed"
        case .noSubject(let field): "no person to seal \(field) for"
        case .unscannable(let type): "a \(type) body is not one JSON object with plain keys"
        }
    }
}

/// Which fields of which events are personal, and the keys that seal them: the event store
/// seals on append and opens on read with it.
public struct PersonalData: Sendable {
    public let keys: DataKeys
    /// By event type.
    public let fields: [String: [PersonalField]]

    public init(keys: DataKeys, fields: [String: [PersonalField]]) {
        self.keys = keys
        self.fields = fields
    }

    /// The appends as they are to be stored, every personal field sealed, and whose keys
    /// sealed them (the append checks, under the log head, that none was forgotten meanwhile).
    /// The body is not decoded: one scan finds its top-level members, and each personal
    /// field's JSON text is sealed as written, the rest left untouched.
    func seal(_ appends: [StreamAppend], metadata: EventMetadata) async throws -> (appends: [StreamAppend], subjects: Set<String>) {
        var sealed = appends
        var subjects = Set<String>()
        for (a, append) in appends.enumerated() {
            for (e, event) in append.events.enumerated() {
                guard let personal = fields[event.type] else { continue }
                // A codec's body always scans: JSONEncoder writes one object with plain keys.
                guard let members = TopLevelFields(event.data.text) else {
                    throw PersonalDataError.unscannable(event.type)
                }
                var replacements = [String: String]()
                for field in personal {
                    guard let value = members.value(field.name), !value.elementsEqual("null".utf8),
                        !value.starts(with: "{\"\(Envelope.marker)\"".utf8)
                    else { continue }
                    guard let subject = Self.subject(field.subject, of: members, in: append.stream, metadata: metadata) else {
                        throw PersonalDataError.noSubject("\(event.type).\(field.name)")
                    }
                    let key = try await keys.sealingKey(for: subject)
                    subjects.insert(subject)
                    replacements[field.name] = try Envelope.seal(
                        Array(value), subject: subject, key: key, context: "\(event.type).\(field.name)")
                }
                if !replacements.isEmpty { sealed[a].events[e].data = JSONB(text: members.replacing(replacements)) }
            }
        }
        return (sealed, subjects)
    }

    static func subject(_ subject: PersonalField.Subject, of members: TopLevelFields, in stream: StreamID, metadata: EventMetadata)
        -> String?
    {
        let found: String? =
            switch subject {
            case .stream: String(stream.rawValue.drop { $0 != "-" }.dropFirst())
            // An id: a JSON string without escapes.
            case .field(let name):
                members.value(name).flatMap { raw in
                    raw.count > 2 && raw.first == UInt8(ascii: "\"") && !raw.contains(UInt8(ascii: "\\"))
                        ? String(decoding: raw.dropFirst().dropLast(), as: UTF8.self) : nil
                }
            case .actor: metadata.actorID
            }
        return found.flatMap { $0.isEmpty ? nil : $0.lowercased() }
    }

    /// Refuses, in the appending transaction and under the log head, an append sealed for
    /// someone forgotten since their key was fetched: every forgetting is an append too, so
    /// it committed before this check (seen here), or is in this batch (its key destroyed
    /// alongside, before this check: the batch is then retried one append at a time), or comes
    /// after this append's events.
    static func checkNotForgotten(_ subjects: Set<String>, in session: inout PostgresSession) throws {
        guard !subjects.isEmpty else { return }
        let rows = try session.query(
            "SELECT subject FROM data_keys WHERE subject = ANY(\(Array(subjects))) AND wrapped IS NULL", prepared: true)
        if let row = rows.first { throw DataKeyError.forgotten(try row.decode("subject")) }
    }

    /// The events with every field whose key lives opened; a forgotten person's stay sealed,
    /// for the codecs to read as redacted.
    public func open(_ events: [RecordedEvent]) async throws -> [RecordedEvent] {
        let subjects = Self.subjects(in: events.map(\.data))
        guard !subjects.isEmpty else { return events }
        let keys = try await keys.openingKeys(for: subjects)
        return try events.map { event in
            var event = event
            event.data = try Self.open(event.data, type: event.type, keys: keys)
            return event
        }
    }

    /// `open` in the caller's session, for projected events (a rebuild).
    public func open(_ events: [ProjectedEvent], in session: inout PostgresSession) throws -> [ProjectedEvent] {
        let subjects = Self.subjects(in: events.map(\.data))
        guard !subjects.isEmpty else { return events }
        let keys = try keys.openingKeys(for: subjects, in: &session)
        return try events.map { event in
            var event = event
            event.data = try Self.open(event.data, type: event.type, keys: keys)
            return event
        }
    }

    static func subjects(in bodies: [JSONB]) -> Set<String> {
        var subjects = Set<String>()
        for data in bodies where Envelope.mayHold(data) {
            guard case .object(let body)? = try? data.decode(JSONValue.self) else { continue }
            for value in body.values { if let subject = Envelope.subject(of: value) { subjects.insert(subject) } }
        }
        return subjects
    }

    static func open(_ data: JSONB, type: String, keys: [String: SymmetricKey]) throws -> JSONB {
        guard Envelope.mayHold(data), case .object(var body) = try data.decode(JSONValue.self) else { return data }
        var changed = false
        for (name, value) in body {
            guard let subject = Envelope.subject(of: value), let key = keys[subject] else { continue }
            body[name] = try Envelope.open(value, key: key, context: "\(type).\(name)")
            changed = true
        }
        return changed ? try JSONB(JSONValue.object(body)) : data
    }
}

extension JSONValue {
    /// Every envelope in a body replaced by its field's `redacted` value (null for a field
    /// not declared personal): how an event reads once its person is forgotten.
    public func redactingSealed(_ fields: [PersonalField]) -> JSONValue {
        guard case .object(var body) = self else { return self }
        for (name, value) in body where Envelope.subject(of: value) != nil {
            body[name] = fields.first { $0.name == name }?.redacted ?? .null
        }
        return .object(body)
    }
}
