import Foundation
import JSONStream
import Postgres

/// A typed event body: its stable type name and the schema version it is written at.
public protocol EventPayload: Codable, Sendable {
    static var eventType: String { get }
    /// Raise it when the shape changes, and register an upcaster from the version before.
    static var schemaVersion: Int { get }
}

extension EventPayload {
    public static var schemaVersion: Int { 1 }
}

/// Rewrites a stored body of schema version `from` into the shape of version `from + 1`.
public struct Upcaster: Sendable {
    public var from: Int
    public var transform: @Sendable (JSONValue) throws -> JSONValue

    public init(from: Int, _ transform: @escaping @Sendable (JSONValue) throws -> JSONValue) {
        self.from = from
        self.transform = transform
    }
}

/// Maps typed events to (type name, schema version, JSON) and back. Old shapes are upcast
/// step by step to today's before they are decoded, so stored events stay readable forever.
public struct EventCodec<Event: Sendable>: Sendable {
    private struct Entry: Sendable {
        var schemaVersion: Int
        var upcasters: [Int: Upcaster]
        var personal: [PersonalField]
        var decode: @Sendable ([UInt8]) throws -> Event
    }

    private struct Name: Sendable {
        var type: String
        var schemaVersion: Int
    }

    private var entries: [String: Entry] = [:]
    /// The name each registered payload type is stored under.
    private var names: [ObjectIdentifier: Name] = [:]

    public init() {}

    /// Registers `payload` under the type name `type`, written at `schemaVersion`; `wrap`
    /// makes the codec's event from it.
    /// `personal`: the fields the event store seals with a person's data key.
    public mutating func register<Payload: Codable & Sendable>(
        _ payload: Payload.Type, as type: String, schemaVersion: Int = 1, upcasters: [Upcaster] = [],
        personal: [PersonalField] = [], wrap: @escaping @Sendable (Payload) -> Event
    ) {
        precondition(entries[type] == nil, "event type \(type) registered twice")
        entries[type] = Entry(
            schemaVersion: schemaVersion,
            upcasters: Dictionary(uniqueKeysWithValues: upcasters.map { ($0.from, $0) }), personal: personal,
            decode: { bytes in wrap(try JSONStream.decode(Payload.self, from: bytes)) })
        names[ObjectIdentifier(payload)] = Name(type: type, schemaVersion: schemaVersion)
    }

    /// Registers `payload` under its own type name and schema version.
    public mutating func register<Payload: EventPayload>(
        _ payload: Payload.Type, upcasters: [Upcaster] = [], personal: [PersonalField] = [],
        wrap: @escaping @Sendable (Payload) -> Event
    ) {
        register(
            payload, as: Payload.eventType, schemaVersion: Payload.schemaVersion, upcasters: upcasters, personal: personal,
            wrap: wrap)
    }

    /// Every event type this codec reads (what a webhook may subscribe to).
    public var types: Set<String> { Set(entries.keys) }

    /// The personal fields of each event type that has any.
    public var personalFields: [String: [PersonalField]] {
        entries.compactMapValues { $0.personal.isEmpty ? nil : $0.personal }
    }

    /// Refuses a payload this codec would not read back: an event is never stored that no
    /// reader of its stream knows.
    public func encode(_ payload: some Encodable & Sendable) throws -> NewEvent {
        guard let name = names[ObjectIdentifier(type(of: payload))] else {
            throw EventDecodingError.unknownType("\(type(of: payload))")
        }
        // The value JSONEncoder() would write, without its tree of boxes (5% of a command's CPU).
        let body = try JSONStream.encode(payload, style: .foundationDefaults)
        return NewEvent(type: name.type, schemaVersion: name.schemaVersion, data: JSONB(text: String(decoding: body, as: UTF8.self)))
    }

    public func decode(_ event: RecordedEvent) throws -> Event {
        try decode(type: event.type, schemaVersion: event.schemaVersion, data: event.data)
    }

    public func decode(type: String, schemaVersion: Int, data: JSONB) throws -> Event {
        guard let entry = entries[type] else { throw EventDecodingError.unknownType(type) }
        guard schemaVersion <= entry.schemaVersion else {
            throw EventDecodingError.newerThanKnown(type: type, stored: schemaVersion, known: entry.schemaVersion)
        }
        // A field still sealed here belongs to someone forgotten: it reads as redacted.
        let sealed = Envelope.mayHold(data)
        if schemaVersion == entry.schemaVersion, !sealed {
            return try entry.decode(Array(data.text.utf8))
        }
        var value = try data.decode(JSONValue.self)
        if sealed { value = value.redactingSealed(entry.personal) }
        for version in schemaVersion..<entry.schemaVersion {
            guard let upcaster = entry.upcasters[version] else {
                throw EventDecodingError.noUpcaster(type: type, from: version)
            }
            value = try upcaster.transform(value)
        }
        return try entry.decode(Array(try JSONEncoder().encode(value)))
    }
}

public enum EventDecodingError: Error, Hashable, CustomStringConvertible {
    case unknownType(String)
    case newerThanKnown(type: String, stored: Int, known: Int)
    case noUpcaster(type: String, from: Int)

    public var description: String {
        switch self {
        case .unknownType(let type): "unknown event type \(type)"
        case .newerThanKnown(let type, let stored, let known):
            "\(type) was stored at schema version \(stored), newer than this server's \(known)"
        case .noUpcaster(let type, let from): "no upcaster for \(type) from schema version \(from)"
        }
    }
}
