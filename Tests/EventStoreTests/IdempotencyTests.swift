import EventStore
import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Idempotent appends")
struct IdempotencyTests {
    struct Answer: Codable, Equatable {
        var itemID: String
        var position: Int64
    }

    func append(_ store: EventStore, key: String, body: String, actor: String = "user-1") async throws -> AppendOutcome {
        try await store.append(
            [StreamAppend(StreamID("item", body), expectedVersion: .any, events: [event("Posted")])],
            metadata: EventMetadata(actorID: actor, idempotencyKey: key),
            idempotency: Idempotency(actor: actor, key: key, requestHash: "sha-of-\(body)"),
            response: { result in try JSONB(Answer(itemID: body, position: result.lastPosition)) })
    }

    func answer(_ outcome: AppendOutcome) throws -> Answer {
        switch outcome {
        case .appended(let result): Answer(itemID: "", position: result.lastPosition)
        case .replayed(_, let response): try #require(response).decode(Answer.self)
        }
    }

    @Test func tenConcurrentAppendsWithOneKeyWriteOnceAndAnswerAlike() async throws {
        try await withStore { store, _ in
            let outcomes = try await withThrowingTaskGroup(of: AppendOutcome.self) { group in
                for _ in 0..<10 {
                    group.addTask { try await append(store, key: "key-1", body: "bike") }
                }
                return try await group.reduce(into: [AppendOutcome]()) { $0.append($1) }
            }
            #expect(try await store.headPosition() == 1)
            let appended = outcomes.filter { if case .appended = $0 { true } else { false } }
            #expect(appended.count == 1)
            // Every repeat returns the first one's recorded response.
            let replays = try outcomes.compactMap { outcome -> Answer? in
                guard case .replayed(let positions, let response) = outcome else { return nil }
                #expect(positions == [1])
                return try #require(response).decode(Answer.self)
            }
            #expect(replays.count == 9)
            #expect(Set(replays.map(\.position)) == [1])
            #expect(Set(replays.map(\.itemID)) == ["bike"])
        }
    }

    @Test func aRepeatAfterCommitReplaysTheStoredResponse() async throws {
        try await withStore { store, _ in
            guard case .appended(let first) = try await append(store, key: "key-1", body: "bike") else {
                Issue.record("the first append should write")
                return
            }
            let again = try await append(store, key: "key-1", body: "bike")
            #expect(try answer(again) == Answer(itemID: "bike", position: first.lastPosition))
            #expect(try await store.headPosition() == 1)
        }
    }

    @Test func theSameKeyWithAnotherRequestIsATypedError() async throws {
        try await withStore { store, _ in
            _ = try await append(store, key: "key-1", body: "bike")
            let error = try await #require(throws: IdempotencyKeyReused.self) {
                try await append(store, key: "key-1", body: "drill")
            }
            #expect(error.key == "key-1")
            #expect(try await store.headPosition() == 1)
        }
    }

    @Test func keysAreScopedToTheirActor() async throws {
        try await withStore { store, _ in
            _ = try await append(store, key: "key-1", body: "bike", actor: "user-1")
            let other = try await append(store, key: "key-1", body: "drill", actor: "user-2")
            guard case .appended = other else {
                Issue.record("another actor's key is another key")
                return
            }
            #expect(try await store.headPosition() == 2)
        }
    }
}
