import EventStore
import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Append-only and tamper-evident")
struct IntegrityTests {
    @Test func theServerRoleCannotRewriteTheLog() async throws {
        try await withStore { store, _ in
            try await store.append(to: "item-1", expectedVersion: .noStream, events: [event()])
            // Nothing but append_batch may write the log, the stream heads or the log head: not
            // an INSERT around it, not a rewound head, not a forged stream version.
            for statement: PostgresQuery in [
                "UPDATE events SET type = 'Forged'", "DELETE FROM events", "TRUNCATE events",
                """
                INSERT INTO events (position, stream_id, stream_version, type, schema_version, data, metadata,
                                    recorded_at, previous_hash, hash)
                VALUES (2, 'item-9', 1, 'Forged', 1, '{}', '{}', now(), '\\x00', '\\x00')
                """,
                "UPDATE log_head SET position = 0", "DELETE FROM log_head", "INSERT INTO log_head (id, position) VALUES (false, 0)",
                "SELECT FROM log_head FOR UPDATE", "SELECT FROM log_head FOR SHARE",
                "UPDATE streams SET version = 0", "DELETE FROM streams",
                "INSERT INTO streams (stream_id, version, last_position, last_hash) VALUES ('item-9', 1, 2, '\\x00')",
                "TRUNCATE streams", "SELECT FROM streams FOR UPDATE",
            ] {
                let error = try await #require(throws: PostgresError.self) {
                    try await store.pool.withTransaction { connection in
                        try await connection.query("SET LOCAL ROLE lender_app")
                        try await connection.query(statement)
                    }
                }
                #expect(error.sqlState == SQLState.insufficientPrivilege, "\(statement.sql)")
            }
            // It may still read, append, and spend a key on a command that decided nothing.
            try await store.pool.withTransaction { connection in
                try await connection.query("SET LOCAL ROLE lender_app")
                try await connection.query(
                    "SELECT * FROM append_batch(\(JSONB(text: #"[{"streams":[{"streamId":"item-2","expected":"none","events":[{"type":"T","schemaVersion":1,"data":{}}]}],"metadata":{}}]"#)))")
                try await connection.query("SELECT record_unchanged('actor', 'key', 'digest', NULL)")
                try await connection.query("SELECT count(*) FROM events, streams, log_head")
            }
            #expect(try await store.headPosition() == 2)
            #expect(try await store.verify() == nil)
        }
    }

    @Test func triggersRefuseUpdateDeleteAndTruncateEvenToTheOwner() async throws {
        try await withStore { store, _ in
            try await store.append(to: "item-1", expectedVersion: .noStream, events: [event()])
            for statement: PostgresQuery in [
                "UPDATE events SET type = 'Forged'", "DELETE FROM events WHERE position = 1", "TRUNCATE events",
            ] {
                let error = try await #require(throws: PostgresError.self) { try await store.pool.query(statement) }
                #expect(error.sqlState == "LX100", "\(statement.sql)")
                #expect(error.message.contains("append-only"))
            }
            #expect(try await store.read(after: 0).map(\.type) == ["Something"])
        }
    }

    /// Runs statements as the superuser with the append-only triggers off, as an attacker would.
    func tamper(_ configuration: PostgresConfiguration, _ statements: PostgresQuery...) async throws {
        try await withSuperuser(on: configuration) { admin in
            try await admin.withTransaction { connection in
                try await connection.query("SET LOCAL session_replication_role = replica")
                for statement in statements { try await connection.query(statement) }
            }
        }
    }

    /// Ten events over three streams, as the tamper tests' starting point.
    func seed(_ store: EventStore) async throws {
        for index in 0..<10 {
            try await store.append(
                to: StreamID("item", index % 3), expectedVersion: .any, events: [event("E\(index)", ["n": index])])
        }
        #expect(try await store.verify() == nil)
    }

    @Test func alteredDataIsReportedAtItsPosition() async throws {
        try await withStore { store, configuration in
            try await seed(store)
            try await tamper(configuration, "UPDATE events SET data = '{\"n\": 600}' WHERE position = 6")
            let found = try #require(try await store.verify())
            #expect(found.kind == .altered)
            #expect(found.position == 6)
            #expect(try await store.verify(stream: "item-2")?.position == 6)
            #expect(try await store.verify(stream: "item-1") == nil)
        }
    }

    @Test func aDeletedEventIsReportedWhereItStood() async throws {
        try await withStore { store, configuration in
            try await seed(store)
            try await tamper(configuration, "DELETE FROM events WHERE position = 4")
            let found = try #require(try await store.verify())
            #expect(found.kind == .missing)
            #expect(found.position == 4)
            // Within its stream (item-0: positions 1, 4, 7, 10) the hole shows at the next event.
            let inStream = try #require(try await store.verify(stream: "item-0"))
            #expect(inStream.kind == .missing)
            #expect(inStream.position == 7)
        }
    }

    @Test func aDeletedLastEventIsReported() async throws {
        try await withStore { store, configuration in
            try await seed(store)
            try await tamper(configuration, "DELETE FROM events WHERE position = 10")
            let found = try #require(try await store.verify())
            #expect(found.kind == .missing)
            #expect(found.position == 10)
            #expect(try await store.verify(stream: "item-0")?.kind == .missing)
        }
    }

    @Test func twoSwappedEventsAreReportedAtTheFirst() async throws {
        try await withStore { store, configuration in
            try await seed(store)
            // Positions 4 and 7 are versions 2 and 3 of item-0: swap them.
            try await tamper(
                configuration,
                "UPDATE events SET position = -4 WHERE position = 4",
                "UPDATE events SET position = 4 WHERE position = 7",
                "UPDATE events SET position = 7 WHERE position = -4")
            let found = try #require(try await store.verify())
            #expect(found.position == 4)
            #expect(found.kind == .reordered)
        }
    }

    @Test func twoEventsSwappedAcrossStreamsAreReportedAtTheFirst() async throws {
        try await withStore { store, configuration in
            try await seed(store)
            // Positions 5 (item-1) and 6 (item-2) trade their contents, hashes and all.
            try await tamper(
                configuration,
                "UPDATE events SET position = -5 WHERE position = 5",
                "UPDATE events SET position = 5 WHERE position = 6",
                "UPDATE events SET position = 6 WHERE position = -5")
            let found = try #require(try await store.verify())
            #expect(found.position == 5)
            #expect(found.kind == .altered)
        }
    }
}
