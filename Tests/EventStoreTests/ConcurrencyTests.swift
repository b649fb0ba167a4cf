import EventStore
import Foundation
import Postgres
import Synchronization
import Testing
import TestSupport

@Suite("Concurrent writers and followers")
struct ConcurrencyTests {
    @Test func sixteenWritersOverFiftyStreamsLoseAndDuplicateNothing() async throws {
        try await withStore(poolSize: 8) { store, _ in
            let streams = (0..<50).map { StreamID("stream", $0) }
            struct Outcome: Sendable {
                var stream: StreamID
                var positions: [Int64]
                var version: Int
                var tag: String
            }
            let outcomes = try await withThrowingTaskGroup(of: (ok: [Outcome], conflicts: Int).self) { group in
                for writer in 0..<16 {
                    group.addTask {
                        var known = [StreamID: Int]()
                        var ok = [Outcome]()
                        var conflicts = 0
                        for attempt in 0..<300 {
                            let stream = streams.randomElement()!
                            let guess = known[stream] ?? 0
                            let expected: ExpectedVersion =
                                switch Int.random(in: 0..<10) {
                                case 0: .any
                                case 1: guess == 0 ? .noStream : .exact(guess - 1)
                                case 2: .exact(guess + 1)
                                default: guess == 0 ? .noStream : .exact(guess)
                                }
                            let count = Int.random(in: 1...2)
                            let tag = "w\(writer)-a\(attempt)"
                            do {
                                let result = try await store.append(
                                    to: stream, expectedVersion: expected,
                                    events: (0..<count).map { _ in NewEvent(type: "Tagged", data: try! JSONB(["tag": tag])) })
                                known[stream] = result.streamVersions[stream]!
                                ok.append(Outcome(stream: stream, positions: result.positions, version: known[stream]!, tag: tag))
                            } catch let conflict as WrongExpectedVersion {
                                #expect(conflict.stream == stream)
                                #expect(conflict.expected == expected)
                                known[stream] = conflict.actual
                                conflicts += 1
                            }
                        }
                        return (ok, conflicts)
                    }
                }
                return try await group.reduce(into: [(ok: [Outcome], conflicts: Int)]()) { $0.append($1) }
            }
            let succeeded = outcomes.flatMap(\.ok)
            #expect(succeeded.count + outcomes.map(\.conflicts).reduce(0, +) == 16 * 300)
            #expect(outcomes.map(\.conflicts).reduce(0, +) > 0)

            // Every acknowledged event is stored exactly once, where the append said.
            let all = try await store.read(after: 0, limit: 100_000)
            let written = succeeded.flatMap(\.positions)
            #expect(all.count == written.count)
            #expect(Set(written).count == written.count)
            #expect(all.map(\.position) == Array(1...Int64(all.count)))
            let byPosition = Dictionary(uniqueKeysWithValues: all.map { ($0.position, $0) })
            for outcome in succeeded {
                for position in outcome.positions {
                    let stored = try #require(byPosition[position])
                    #expect(stored.streamID == outcome.stream)
                    #expect(try stored.data.decode([String: String].self)["tag"] == outcome.tag)
                }
            }
            // Each stream's versions are 1...n, without holes.
            for stream in streams {
                let versions = all.filter { $0.streamID == stream }.map(\.streamVersion)
                #expect(versions == (0..<versions.count).map { $0 + 1 })
            }
            #expect(try await store.verify() == nil)
        }
    }

    @Test func aFollowerMissesNothingWhenWritersCommitOutOfOrder() async throws {
        try await withStore(poolSize: 8) { store, configuration in
            // Started before any writer, on its own connection.
            let collected = Task {
                var seen = [RecordedEvent]()
                for try await event in store.follow(after: 0, pageSize: 7, pollInterval: .seconds(30)) {
                    seen.append(event)
                    if seen.count == 1 + 8 * 10 { break }
                }
                return seen
            }
            try await Task.sleep(for: .milliseconds(200))
            try await TestDatabase.withPool(configuration, size: 1) { slowPool in
                // The slow writer says when it has taken its position and holds the log head.
                let (positionTaken, signal) = AsyncStream<Void>.makeStream()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        try await slowPool.withTransaction { connection in
                            try await connection.query(
                                """
                                SELECT * FROM append_batch(\(JSONB(text: #"[{"streams":[{"streamId":"slow-1","expected":"none","events":[{"type":"Slow","schemaVersion":1,"data":{}}]}],"metadata":{}}]"#)))
                                """)
                            signal.yield()
                            try await connection.query("SELECT pg_sleep(0.5)")
                        }
                    }
                    for await _ in positionTaken { break }
                    for writer in 0..<8 {
                        group.addTask {
                            for index in 0..<10 {
                                try await store.append(
                                    to: StreamID("fast", "\(writer)-\(index)"), expectedVersion: .noStream, events: [event("Fast")])
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            let seen = try await collected.value
            #expect(seen.count == 81)
            #expect(seen.map(\.position) == Array(1...81))
            #expect(Set(seen.map(\.position)).count == 81)
            // The slow writer took its position first, and kept it.
            #expect(seen.first?.type == "Slow")
        }
    }

    @Test func aFollowerIsWokenByNotifyNotByPolling() async throws {
        try await withStore { store, _ in
            try await store.append(to: "item-1", expectedVersion: .noStream, events: [event("Before")])
            let clock = ContinuousClock()
            let follower = store.follow(after: 0, pollInterval: .seconds(60)).makeAsyncIterator()
            #expect(try await follower.next()?.type == "Before")
            Task {
                try await Task.sleep(for: .milliseconds(300))
                try await store.append(to: "item-1", expectedVersion: .exact(1), events: [event("After")])
            }
            let started = clock.now
            #expect(try await follower.next()?.type == "After")
            #expect(clock.now - started < .seconds(10))
        }
    }
}

/// Writes each event's `n` into `seen`, whose check refuses 13.
struct SeenProjection: InlineProjection {
    var name: String { "seen" }
    func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        for event in events {
            try session.query("INSERT INTO seen (n) SELECT (\(event.data)::jsonb ->> 'n')::int", prepared: true)
        }
    }
}

@Suite("Inline projections in a batch")
struct InlineProjectionBatchTests {
    /// The projections' writes are pipelined: an error among them surfaces at the end of the
    /// batch, which is then retried append by append, so that only the bad one fails.
    @Test func anEventAProjectionRefusesFailsAloneAndTheBatchIsWrittenWithoutIt() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await withSuperuser(on: configuration) { admin in
                try await admin.query("CREATE TABLE seen (n integer PRIMARY KEY CHECK (n <> 13))")
                try await admin.query("GRANT SELECT, INSERT ON seen TO lender_app")
            }
            try await TestDatabase.withPool(configuration, size: 4) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger, projections: [SeenProjection()])
                let failures = try await withThrowingTaskGroup(of: Int?.self) { group in
                    for n in 0..<40 {
                        group.addTask {
                            do {
                                try await store.append(to: StreamID("seen", n), expectedVersion: .noStream, events: [event("Seen", ["n": n])])
                                return nil
                            } catch let error as PostgresError {
                                #expect(error.sqlState == "23514", "\(error)")
                                return n
                            }
                        }
                    }
                    return try await group.reduce(into: [Int]()) { if let n = $1 { $0.append(n) } }
                }
                #expect(failures == [13])
                let seen = try await pool.query("SELECT count(*) AS c FROM seen").single().decode("c", as: Int.self)
                let logged = try await pool.query("SELECT count(*) AS c FROM events").single().decode("c", as: Int.self)
                #expect(seen == 39)
                #expect(logged == 39)
                let checkpoint = try await pool.query("SELECT position FROM projection_checkpoints WHERE name = 'seen'").single()
                #expect(try checkpoint.decode("position", as: Int64.self) == 39)
            }
        }
    }
}
