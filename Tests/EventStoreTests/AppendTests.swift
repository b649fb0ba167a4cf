import EventStore
import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Append and read")
struct AppendTests {
    @Test func appendsAndReadsBackOneStream() async throws {
        try await withStore { store, _ in
            let first = try await store.append(to: "item-1", expectedVersion: .noStream, events: [event("A"), event("B")])
            #expect(first.positions == [1, 2])
            #expect(first.streamVersions == ["item-1": 2])
            let second = try await store.append(to: "item-1", expectedVersion: .exact(2), events: [event("C")])
            #expect(second.positions == [3])
            try await store.append(to: "item-2", expectedVersion: .any, events: [event("D")])

            let stream = try await store.readStream("item-1")
            #expect(stream.map(\.type) == ["A", "B", "C"])
            #expect(stream.map(\.streamVersion) == [1, 2, 3])
            #expect(stream.map(\.position) == [1, 2, 3])
            #expect(try await store.readStream("item-1", from: 3).map(\.type) == ["C"])
            #expect(try await store.read(after: 2, limit: 10).map(\.type) == ["C", "D"])
            #expect(try await store.version(of: "item-1") == 3)
            #expect(try await store.version(of: "nobody") == 0)
            #expect(try await store.headPosition() == 4)
            // Each event links to its stream's previous one.
            #expect(stream[0].previousHash == Data(repeating: 0, count: 32))
            #expect(stream[1].previousHash == stream[0].hash)
            #expect(stream[2].previousHash == stream[1].hash)
        }
    }

    @Test func metadataIsStoredWithEachEvent() async throws {
        try await withStore { store, _ in
            let metadata = EventMetadata(
                actorID: "user-7", correlationID: "c-1", causationID: "c-0", idempotencyKey: "k-1", requestID: "r-1")
            try await store.append(to: "item-1", expectedVersion: .noStream, events: [event()], metadata: metadata)
            #expect(try await store.readStream("item-1")[0].decodeMetadata() == metadata)
        }
    }

    @Test func aStaleExpectedVersionIsATypedErrorNamingTheStream() async throws {
        try await withStore { store, _ in
            try await store.append(to: "item-1", expectedVersion: .noStream, events: [event(), event()])
            let stale = try await #require(throws: WrongExpectedVersion.self) {
                try await store.append(to: "item-1", expectedVersion: .exact(1), events: [event()])
            }
            #expect(stale == WrongExpectedVersion(stream: "item-1", expected: .exact(1), actual: 2))
            let exists = try await #require(throws: WrongExpectedVersion.self) {
                try await store.append(to: "item-1", expectedVersion: .noStream, events: [event()])
            }
            #expect(exists.actual == 2)
            let missing = try await #require(throws: WrongExpectedVersion.self) {
                try await store.append(to: "item-9", expectedVersion: .exact(0 + 3), events: [event()])
            }
            #expect(missing.actual == 0)
            #expect(try await store.headPosition() == 2)
        }
    }

    @Test func aMultiStreamAppendWithOneStaleVersionWritesNothingAnywhere() async throws {
        try await withStore { store, _ in
            try await store.append(to: "cart-1", expectedVersion: .noStream, events: [event()])
            try await store.append(to: "loan-1", expectedVersion: .noStream, events: [event()])
            try await store.append(to: "loan-2", expectedVersion: .noStream, events: [event()])

            let error = try await #require(throws: WrongExpectedVersion.self) {
                try await store.append([
                    StreamAppend("cart-1", expectedVersion: .exact(1), events: [event("CheckedOut")]),
                    StreamAppend("loan-1", expectedVersion: .exact(1), events: [event("SharePurchased")]),
                    StreamAppend("loan-2", expectedVersion: .exact(0), events: [event("SharePurchased")]),
                    StreamAppend("user-1", expectedVersion: .noStream, events: [event("Debited")]),
                ])
            }
            #expect(error.stream == "loan-2")
            #expect(try await store.headPosition() == 3)
            #expect(try await store.readStream("cart-1").count == 1)
            #expect(try await store.readStream("loan-1").count == 1)
            #expect(try await store.readStream("user-1").isEmpty)

            // The same append with the right versions writes to all four, atomically.
            let outcome = try await store.append([
                StreamAppend("cart-1", expectedVersion: .exact(1), events: [event("CheckedOut")]),
                StreamAppend("loan-1", expectedVersion: .exact(1), events: [event("SharePurchased")]),
                StreamAppend("loan-2", expectedVersion: .exact(1), events: [event("SharePurchased")]),
                StreamAppend("user-1", expectedVersion: .noStream, events: [event("Debited")]),
            ])
            guard case .appended(let result) = outcome else {
                Issue.record("expected an append, got \(outcome)")
                return
            }
            #expect(result.positions == [4, 5, 6, 7])
            #expect(result.streamVersions == ["cart-1": 2, "loan-1": 2, "loan-2": 2, "user-1": 1])
            #expect(try await store.verify() == nil)
        }
    }

    @Test func malformedAppendsAreRefusedBeforeTheDatabase() async throws {
        try await withStore { store, _ in
            await #expect(throws: InvalidAppend.self) {
                try await store.append(to: "item-1", expectedVersion: .any, events: [])
            }
            await #expect(throws: InvalidAppend.self) {
                try await store.append(to: "item\n1", expectedVersion: .any, events: [event()])
            }
            await #expect(throws: InvalidAppend.self) {
                try await store.append(to: "item-1", expectedVersion: .any, events: [NewEvent(type: "T", data: try JSONB(["text": "nul\u{0}"]))])
            }
            await #expect(throws: InvalidAppend.self) {
                try await store.append([
                    StreamAppend("item-1", expectedVersion: .any, events: [event()]),
                    StreamAppend("item-1", expectedVersion: .any, events: [event()]),
                ])
            }
            // A backslash before "u0000" is no NUL.
            try await store.append(to: "item-1", expectedVersion: .any, events: [NewEvent(type: "T", data: try JSONB(["text": "\\u0000"]))])
            #expect(try await store.readStream("item-1").count == 1)
        }
    }

    @Test func whatGoesAlongsideCommitsWithTheEventsOrNeither() async throws {
        try await withStore { store, _ in
            try await store.pool.query("CREATE TABLE claims (name text PRIMARY KEY)")
            try await store.append(to: "user-1", expectedVersion: .noStream, events: [event()]) { session in
                try session.query("INSERT INTO claims VALUES ('ada')")
            }
            // The second claim of the same name fails, and takes its events with it; the
            // others in the same batch still land.
            let results = await withTaskGroup(of: Bool.self) { group in
                for index in 2...6 {
                    group.addTask {
                        let name = index == 4 ? "ada" : "user-\(index)"
                        return (try? await store.append(
                            to: StreamID("user", index), expectedVersion: .noStream, events: [event()]
                        ) { session in try session.query("INSERT INTO claims VALUES (\(name))") }) != nil
                    }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(results.filter { $0 }.count == 4)
            #expect(try await store.readStream("user-4").isEmpty)
            let claims = try await store.pool.query("SELECT count(*) AS n FROM claims").single().decode("n", as: Int.self)
            #expect(claims == 5)
            #expect(try await store.headPosition() == 5)
            #expect(try await store.verify() == nil)
        }
    }

    @Test func aPoisonedAppendInABatchFailsAloneAndTheOthersLand() async throws {
        try await withStore { store, _ in
            // Invalid JSON slips past the typed API only through JSONB(text:); it must not sink its batch.
            let results = await withTaskGroup(of: Bool.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        let data = index == 7 ? JSONB(text: "{not json") : try! JSONB(["i": index])
                        return (try? await store.append(
                            to: StreamID("item", index), expectedVersion: .noStream,
                            events: [NewEvent(type: "T", data: data)])) != nil
                    }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(results.filter { $0 }.count == 19)
            let head = try await store.headPosition()
            let intact = try await store.verify()
            #expect(head == 19)
            #expect(intact == nil)
        }
    }
}

@Suite("A stream only checked")
struct CheckedStreamTests {
    @Test func aStreamWithNoEventsIsACheckOfItsVersionAndKeepsItsHead() async throws {
        try await withStore { store, _ in
            try await store.append(to: "user-1", expectedVersion: .noStream, events: [event("Registered")])
            // Decided on user-1 at version 1: written while it still is.
            _ = try await store.append([
                StreamAppend("item-1", expectedVersion: .noStream, events: [event("BidPlaced")]),
                StreamAppend("user-1", expectedVersion: .exact(1), events: []),
            ])
            try await store.append(to: "user-1", expectedVersion: .exact(1), events: [event("Blocked")])
            // Decided on version 1, but user-1 moved on: nothing of it is written.
            let error = await #expect(throws: WrongExpectedVersion.self) {
                try await store.append([
                    StreamAppend("item-1", expectedVersion: .exact(1), events: [event("BidPlaced")]),
                    StreamAppend("user-1", expectedVersion: .exact(1), events: []),
                ])
            }
            #expect(error?.stream == "user-1")
            #expect(try await store.version(of: "item-1") == 1)
            #expect(try await store.version(of: "user-1") == 2)
            await #expect(throws: InvalidAppend.self) {
                try await store.append([StreamAppend("user-1", expectedVersion: .exact(2), events: [])])
            }
            await #expect(throws: InvalidAppend.self) {
                try await store.append([
                    StreamAppend("item-1", expectedVersion: .exact(1), events: [event()]),
                    StreamAppend("user-1", expectedVersion: .any, events: []),
                ])
            }
        }
    }

    /// In one batch, a check of a stream after another request appended to it leaves that
    /// stream's head where its last event is.
    @Test func aCheckInTheSameBatchAsAnAppendLeavesTheHeadRight() async throws {
        try await withStore(poolSize: 4) { store, _ in
            try await store.append(to: "user-1", expectedVersion: .noStream, events: [event("Registered")])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<20 {
                    group.addTask {
                        if n % 2 == 0 {
                            try await store.append(to: "user-1", expectedVersion: .any, events: [event("Moved", ["n": n])])
                        } else {
                            _ = try? await store.append([
                                StreamAppend(StreamID("item", n), expectedVersion: .noStream, events: [event("E", ["n": n])]),
                                StreamAppend("user-1", expectedVersion: .exact(1), events: []),
                            ])
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await store.verify() == nil)
        }
    }
}
