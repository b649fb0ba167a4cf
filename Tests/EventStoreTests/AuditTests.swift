import Crypto
import EventStore
import Foundation
import Postgres
import Synchronization
import Testing
import TestSupport

@Suite("An audit that never cries wolf")
struct AuditTests {
    /// Appends (one stream or two at once) from `writers` tasks until `stop` is set.
    static func write(_ store: EventStore, writers: Int, until stop: Flag) async throws -> Int {
        try await withThrowingTaskGroup(of: Int.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    var count = 0
                    while !stop.isSet {
                        let first = StreamID("item", Int.random(in: 0..<40))
                        let second = StreamID("user", writer)
                        try await store.append(
                            [
                                StreamAppend(first, expectedVersion: .any, events: [event("Posted", ["n": count])]),
                                StreamAppend(second, expectedVersion: .any, events: [event("Moved", ["n": count])]),
                            ].prefix(count % 2 + 1).map { $0 })
                        count += 1
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
    }

    @Test func verifyUnderEightConcurrentWritersSaysIntactTwentyTimesOutOfTwenty() async throws {
        try await withStore(poolSize: 4) { store, _ in
            for n in 0..<300 {
                try await store.append(to: StreamID("item", n % 40), expectedVersion: .any, events: [event("E", ["n": n])])
            }
            let stop = Flag()
            async let written = Self.write(store, writers: 8, until: stop)
            try await Task.sleep(for: .milliseconds(100))
            let before = try await store.headPosition()
            var verdicts = [String]()
            for _ in 0..<20 {
                // Small pages: many reads per verification, each a chance to see appends in flight.
                verdicts.append(try await store.verify(pageSize: 20).map(\.description) ?? "intact")
            }
            let after = try await store.headPosition()
            stop.set()
            _ = try await written
            #expect(after - before > 100, "the log grew while it was verified")
            #expect(verdicts == Array(repeating: "intact", count: 20))
            #expect(try await store.verify() == nil)
        }
    }

    @Test func recordedAtNeverDecreasesAlongPositionsUnderConcurrentStores() async throws {
        try await TestDatabase.withMigrated { configuration in
            // Four stores, as four server processes: each its own flusher and connection, so
            // their transactions start, wait at the head's lock and commit interleaved.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        try await TestDatabase.withPool(configuration, size: 2) { pool in
                            let store = EventStore(pool: pool, logger: TestDatabase.logger)
                            try await withThrowingTaskGroup(of: Void.self) { writers in
                                for writer in 0..<4 {
                                    writers.addTask {
                                        for n in 0..<60 {
                                            try await store.append(
                                                to: StreamID("item", writer), expectedVersion: .any, events: [event("E", ["n": n])])
                                        }
                                    }
                                }
                                try await writers.waitForAll()
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let backwards = try await pool.query(
                    """
                    SELECT count(*) AS n FROM (
                        SELECT recorded_at < lag(recorded_at) OVER (ORDER BY position) AS back FROM events) t
                    WHERE back
                    """
                ).single().decode("n", as: Int.self)
                #expect(backwards == 0, "times that go back along positions")
                let count = try await pool.query("SELECT count(*) AS n FROM events").single().decode("n", as: Int.self)
                #expect(count == 4 * 4 * 60)
                #expect(try await EventStore(pool: pool, logger: TestDatabase.logger).verify() == nil)
            }
        }
    }

    // MARK: Checkpoints

    let key = Curve25519.Signing.PrivateKey()

    @Test func aCheckpointIsSignedAndRefusedWhenAnyFieldOrTheKeyDiffers() async throws {
        try await withStore { store, _ in
            try await IntegrityTests().seed(store)
            let checkpoint = try await store.checkpoint(signingKey: key)
            #expect(checkpoint.position == 10)
            #expect(checkpoint.streams == 3)
            #expect(checkpoint.isSigned(by: key.publicKey))
            #expect(!checkpoint.isSigned(by: Curve25519.Signing.PrivateKey().publicKey), "another key")
            var moved = checkpoint
            moved.position = 12
            #expect(!moved.isSigned(by: key.publicKey), "a position changed after signing")
            var digest = checkpoint
            digest.streamsDigest = String(repeating: "0", count: 64)
            #expect(!digest.isSigned(by: key.publicKey), "a digest changed after signing")
            var signature = checkpoint
            var bytes = try #require(Data(base64Encoded: signature.signature))
            bytes[0] ^= 1
            signature.signature = bytes.base64EncodedString()
            #expect(!signature.isSigned(by: key.publicKey), "a flipped bit in the signature")

            // Kept, and read back as signed.
            try await store.store(checkpoint)
            let kept = try await store.checkpoints(after: 0, limit: 10)
            #expect(kept.map(\.checkpoint) == [checkpoint])
            #expect(try await store.verify(checkpoint: checkpoint) == nil)
        }
    }

    @Test func aLogCutShortAfterACheckpointPassesPlainVerifyButNotTheCheckpoint() async throws {
        try await withStore { store, configuration in
            try await IntegrityTests().seed(store)
            let checkpoint = try await store.checkpoint(signingKey: key)
            try await store.append(to: "item-7", expectedVersion: .any, events: [event()])
            #expect(try await store.verify(checkpoint: checkpoint) == nil, "a log that grew still extends it")

            // The owner, triggers off: the last five events gone, the head and the streams rewound to match.
            try await IntegrityTests().tamper(
                configuration, "DELETE FROM events WHERE position > 6", "UPDATE log_head SET position = 6",
                """
                UPDATE streams s SET version = e.stream_version, last_position = e.position, last_hash = e.hash
                FROM (SELECT DISTINCT ON (stream_id) stream_id, stream_version, position, hash
                      FROM events ORDER BY stream_id, stream_version DESC) e
                WHERE s.stream_id = e.stream_id
                """,
                "DELETE FROM streams WHERE stream_id NOT IN (SELECT stream_id FROM events)")
            #expect(try await store.verify() == nil, "nothing inside the database remembers the head")
            let found = try #require(try await store.verify(checkpoint: checkpoint))
            #expect(found.kind == .missing)
            #expect(found.position == 7)
            #expect(found.message.contains("cut short"), "\(found)")
        }
    }

    @Test func anEventRewrittenMidChainWithEveryLaterHashRecomputedIsCaughtByTheCheckpoint() async throws {
        try await withStore { store, configuration in
            try await IntegrityTests().seed(store)
            let checkpoint = try await store.checkpoint(signingKey: key)
            // Position 4 is item-0's version 2 of 4: rewrite it, then recompute the stream's
            // chain from there on and its head, as append_batch would have.
            try await IntegrityTests().tamper(
                configuration,
                "UPDATE events SET data = '{\"n\": 900}' WHERE position = 4",
                """
                WITH RECURSIVE chain (position, version, previous, hash) AS (
                    SELECT position, stream_version, previous_hash, hash FROM events
                    WHERE stream_id = 'item-0' AND stream_version = 1
                  UNION ALL
                    SELECT e.position, e.stream_version, c.hash, sha256(c.hash || convert_to(
                        e.position::text || E'\\n' || e.stream_id || E'\\n' || e.stream_version::text || E'\\n' || e.type
                        || E'\\n' || e.schema_version::text || E'\\n' || e.data::text || E'\\n' || e.metadata::text || E'\\n'
                        || to_char(e.recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'UTF8'))
                    FROM events e JOIN chain c ON e.stream_id = 'item-0' AND e.stream_version = c.version + 1
                )
                UPDATE events e SET previous_hash = c.previous, hash = c.hash FROM chain c WHERE e.position = c.position
                """,
                "UPDATE streams s SET last_hash = e.hash FROM events e WHERE e.position = s.last_position")
            #expect(try await store.verify() == nil, "the chain itself is consistent again")
            let found = try #require(try await store.verify(checkpoint: checkpoint))
            #expect(found.kind == .altered)
            #expect(found.position == 10, "named at the checkpoint's position: the digest says no more")
            #expect(found.message.contains("rewritten"), "\(found)")
        }
    }

    @Test func aCheckpointOfTheEmptyLogHoldsAsTheLogGrows() async throws {
        try await withStore { store, _ in
            let empty = try await store.checkpoint(signingKey: key)
            #expect(empty.position == 0)
            #expect(empty.streams == 0)
            #expect(try await store.verify(checkpoint: empty) == nil)
            try await store.append(to: "item-1", expectedVersion: .noStream, events: [event()])
            #expect(try await store.verify(checkpoint: empty) == nil)
            await #expect(throws: CheckpointError.self) { try await store.verify(stream: "item-1", checkpoint: empty) }
        }
    }

    @Test func streamIdsThatAreEquivalentUnicodeButOtherBytesAreTwoStreams() async throws {
        try await withStore { store, _ in
            // "café" composed and decomposed: equal as Swift strings, two streams to PostgreSQL.
            try await store.append(to: StreamID(rawValue: "item-caf\u{e9}"), expectedVersion: .noStream, events: [event()])
            try await store.append(to: StreamID(rawValue: "item-cafe\u{301}"), expectedVersion: .noStream, events: [event()])
            #expect(try await store.verify() == nil)
            let checkpoint = try await store.checkpoint(signingKey: key)
            #expect(checkpoint.streams == 2)
            #expect(try await store.verify(checkpoint: checkpoint) == nil)
        }
    }
}

@Suite("Every append in a batch is answered")
struct BatchAnswerTests {
    /// Refuses 13 (so the batch is retried append by append), and kills its own connection on
    /// 7 when it is written alone: the connection dies in the middle of those retries.
    struct KillingProjection: InlineProjection {
        var name: String { "killing" }
        func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
            for event in events {
                let n = try event.data.decode([String: Int].self)["n"] ?? 0
                if n == 13 { throw PostgresError(.server, message: "13 is refused") }
                if n == 7, events.count == 1 { try session.query("SELECT pg_terminate_backend(pg_backend_pid())") }
            }
        }
    }

    @Test func aFlusherWhoseBackendIsKilledMidRetryLeavesNoAppendUnanswered() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 3, acquireTimeout: .seconds(10)) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger, projections: [KillingProjection()])
                let answers = Answers()
                // Hold the log head so that the forty appends queue up into one batch behind a first.
                try await withSuperuser(on: configuration) { admin in
                    try await admin.withTransaction { connection in
                        try await connection.query("SELECT FROM log_head FOR UPDATE")
                        let first = Task { try await store.append(to: "first", expectedVersion: .any, events: [event("E", ["n": 100])]) }
                        try await Task.sleep(for: .milliseconds(200))
                        for n in 0..<40 {
                            Task {
                                let appended = (try? await store.append(
                                    to: StreamID("item", n), expectedVersion: .noStream, events: [event("E", ["n": n])])) != nil
                                answers.record(n, appended)
                            }
                        }
                        try await Task.sleep(for: .milliseconds(300))
                        _ = first
                    }
                }
                // Unstructured tasks, and a deadline: a hung append must fail the test, not hang it.
                let clock = ContinuousClock()
                let deadline = clock.now + .seconds(30)
                while answers.all.count < 40, clock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                }
                let answered = answers.all
                #expect(answered.count == 40, "unanswered: \(Set(0..<40).subtracting(answered.keys).sorted())")
                #expect(answered[13] == false)
                #expect(answered[7] == false, "its connection died under it")
                #expect(answered.filter { !$0.value }.keys.sorted() == [7, 13])
                let logged = try await pool.query("SELECT count(*) AS n FROM events").single().decode("n", as: Int.self)
                #expect(logged == 1 + 38)
            }
        }
    }
}

final class Flag: Sendable {
    private let value = Atomic(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set() { value.store(true, ordering: .relaxed) }
}

/// Which appends were answered, and whether they were appended.
final class Answers: Sendable {
    private let state = Mutex([Int: Bool]())
    var all: [Int: Bool] { state.withLock { $0 } }
    func record(_ n: Int, _ appended: Bool) { state.withLock { $0[n] = appended } }
}
