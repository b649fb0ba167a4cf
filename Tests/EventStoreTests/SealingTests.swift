import Crypto
@testable import EventStore
import Foundation
import Postgres
import Testing
import TestSupport

/// Personal fields in the store itself: sealed on append, opened on a stream's read, as
/// stored on the log's read, and never written for someone forgotten.
@Suite("Sealed fields in the event store")
struct SealingTests {
    static let fields: [String: [PersonalField]] = [
        "Noted": [PersonalField("text", of: .stream, redacted: .string("[removed]"))]
    ]

    func sealing(_ pool: PostgresPool) throws -> EventStore {
        let keys = DataKeys(pool: pool, masters: try MasterKeys([SymmetricKey(size: .bits256)]))
        return EventStore(pool: pool, logger: TestDatabase.logger, personalData: PersonalData(keys: keys, fields: Self.fields))
    }

    func noted(_ text: String) -> NewEvent { NewEvent(type: "Noted", data: try! JSONB(["text": text, "other": "clear"])) }

    @Test func aFieldIsSealedOnAppendOpenedOnReadAndRedactedOnceForgotten() async throws {
        try await withStore { plain, _ in
            let store = try sealing(plain.pool)
            let subject = UUID().uuidString.lowercased()
            let stream = StreamID("note", subject)
            try await store.append(to: stream, expectedVersion: .noStream, events: [noted("my secret")])
            let stored = try await store.read(after: 0).last!.data.text
            #expect(!stored.contains("my secret") && stored.contains("$sealed") && stored.contains("clear"))
            #expect(try await store.readStream(stream).first?.data.decode([String: String].self)["text"] == "my secret")

            try await plain.pool.withConnection { connection in
                try await connection.withBlockingSession { session in try DataKeys.forget(subject, in: &session) }
            }
            // Another store (another server) reads it as removed: no key is left to open it.
            let other = try sealing(plain.pool)
            let read = try await other.readStream(stream).first!
            var codec = EventCodec<String>()
            codec.register(Note.self, as: "Noted", personal: Self.fields["Noted"]!) { $0.text }
            #expect(try codec.decode(read) == "[removed]")
            await #expect(throws: DataKeyError.self) {
                try await other.append(to: stream, expectedVersion: .any, events: [noted("again")])
            }
        }
    }

    struct Note: Codable, Sendable { var text: String }

    /// A forgetting and an append sealed for the same person in one group-committed batch,
    /// the append after it: the append must not be written with the key destroyed beside it.
    @Test func anAppendBatchedAfterAForgettingIsRefused() async throws {
        try await withStore { plain, _ in
            let store = try sealing(plain.pool)
            var refused = 0
            for _ in 0..<40 {
                let subject = UUID().uuidString.lowercased()
                let stream = StreamID("note", subject)
                try await store.append(to: stream, expectedVersion: .any, events: [noted("first")])
                let forgetting = Task {
                    try await store.append(
                        to: StreamID("forget", subject), expectedVersion: .any, events: [event("Forgot")],
                        alongside: { session in try DataKeys.forget(subject, in: &session) })
                }
                let late = Task { try await store.append(to: stream, expectedVersion: .any, events: [noted("late")]) }
                let forgot = try await forgetting.value.lastPosition
                switch await late.result {
                case .success(let result):
                    #expect(result.lastPosition < forgot, "sealed for \(subject) after their key was destroyed")
                case .failure(let error):
                    #expect(error is DataKeyError)
                    refused += 1
                }
            }
            #expect(refused > 0, "the late appends all came first: the race was not run")
        }
    }
}

/// The quick look for a sealed field before a body is parsed, on its bytes.
@Suite("Spotting a sealed field")
struct SealedMarkerTests {
    @Test(
        "a body holds the marker only where it is quoted whole",
        arguments: [
            (#"{"text":{"$sealed":{"key":"user-1"}}}"#, true),
            (#"{"a":"$","b":"$$sealed","text":{"$sealed":{}}}"#, true),
            (#"{"$sealed":1}"#, true),
            (#"{"price":"$5","note":"$seale","x":"sealed"}"#, false),
            (#"{"a":"$sealed "}"#, false),
            (#"{"a":1}"#, false),
            ("", false),
            ("$", false),
            (#""$sealed"#, false),
            (#""$sealed""#, true),
        ])
    func spotted(_ body: String, _ expected: Bool) {
        #expect(Envelope.mayHold(JSONB(text: body)) == expected)
    }
}
