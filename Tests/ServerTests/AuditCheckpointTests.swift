import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Postgres
import Projections
import Server
import ServerTestSupport
import Synchronization
import Testing
import TestSupport

/// A fresh audit signing key in a folder of its own, and the environment that names it; the
/// folder goes when the last test holding it is done (each run left hundreds in /tmp).
final class AuditKey: Sendable {
    let directory: URL
    let key = Curve25519.Signing.PrivateKey()

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("lender-audit-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(key.rawRepresentation.base64EncodedString().utf8).write(to: file("signing-key"))
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    func file(_ name: String) -> URL { directory.appendingPathComponent(name) }
    var environment: [String: String] { ["AUDIT_SIGNING_KEY_FILE": file("signing-key").path] }
}

@Suite("Signed checkpoints of the log")
struct AuditCheckpointTests {
    @Test func aCheckpointVerifiesUntilTheLogIsCutShortAndATamperedOneIsRefused() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            for index in 0..<3 { _ = try await client.postRental(rita.token, title: "Thing \(index)") }
            let database = try await ownerURL(admin)
            let audit = try AuditKey()
            let signed = audit.file("checkpoint.json").path
            let said = try runLender(["audit", "checkpoint", "--out", signed], database: database, environment: audit.environment)
            #expect(said.contains("Signed the log at position"), "\(said)")
            let publicKey = try runLender(["audit", "public-key"], database: nil, environment: audit.environment)
            #expect(publicKey.trimmingCharacters(in: .whitespacesAndNewlines) == audit.key.publicKey.rawRepresentation.base64EncodedString())
            try Data(publicKey.utf8).write(to: audit.file("public-key"))
            let verify = ["audit", "verify", "--checkpoint", signed, "--public-key", audit.file("public-key").path]
            // Without the signing key in the environment: the auditor has the public key only.
            #expect(try runLender(verify, database: database).contains("extends the checkpoint"))

            // The log grows: it still extends the checkpoint.
            _ = try await client.postRental(rita.token, title: "Later")
            #expect(try runLender(verify, database: database).contains("extends the checkpoint"))

            // A checkpoint edited after signing, or checked against another key, is refused.
            var statement = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: signed))) as? [String: Any])
            statement["position"] = (statement["position"] as? Int ?? 0) - 1
            try JSONSerialization.data(withJSONObject: statement).write(to: audit.file("edited.json"))
            let edited = try runLender(
                ["audit", "verify", "--checkpoint", audit.file("edited.json").path, "--public-key", audit.file("public-key").path],
                database: database, expectedStatus: 1)
            #expect(edited.contains("not signed by"), "\(edited)")
            let other = try AuditKey()
            let otherKey = try runLender(["audit", "public-key"], database: nil, environment: other.environment)
            try Data(otherKey.utf8).write(to: other.file("public-key"))
            _ = try runLender(
                ["audit", "verify", "--checkpoint", signed, "--public-key", other.file("public-key").path], database: database,
                expectedStatus: 1)

            // The owner cuts the log back before the checkpoint, triggers off, head and streams rewound.
            let checkpoint = try JSONDecoder().decode(CheckpointFile.self, from: Data(contentsOf: URL(fileURLWithPath: signed)))
            let cut = checkpoint.position - 1
            try await admin.withTransaction { connection in
                try await connection.query("SET LOCAL session_replication_role = replica")
                try await connection.query("DELETE FROM events WHERE position > \(cut)")
                try await connection.query("UPDATE log_head SET position = \(cut)")
                try await connection.query(
                    """
                    UPDATE streams s SET version = e.stream_version, last_position = e.position, last_hash = e.hash
                    FROM (SELECT DISTINCT ON (stream_id) stream_id, stream_version, position, hash
                          FROM events ORDER BY stream_id, stream_version DESC) e
                    WHERE s.stream_id = e.stream_id
                    """)
                try await connection.query("DELETE FROM streams WHERE stream_id NOT IN (SELECT stream_id FROM events)")
            }
            #expect(try runLender(["audit", "verify"], database: database).contains("intact"), "the cut leaves no trace inside")
            let broken = try runLender(verify, database: database, expectedStatus: 1)
            #expect(broken.contains("BROKEN: missing at position \(checkpoint.position)"), "\(broken)")
            #expect(broken.contains("cut short"), "\(broken)")
        }
    }

    struct CheckpointFile: Decodable {
        var position: Int64
    }

    @Test func auditorsFetchTheKeptCheckpointsAndOthersMayNot() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            let auditor = try await client.user("auditor")
            _ = try await client.postRental(rita.token)
            let database = try await ownerURL(admin)
            let audit = try AuditKey()
            for _ in 0..<3 { _ = try runLender(["audit", "checkpoint"], database: database, environment: audit.environment) }

            let refused = try await client.send(.get, "/v1/audit/checkpoints", token: rita.token)
            #expect(refused.status == .forbidden)
            #expect(refused.code == "not_auditor")
            #expect(try await client.send(.get, "/v1/audit/checkpoints").status == .unauthorized)

            _ = try await admin.query("INSERT INTO auditors (user_id) VALUES (\(auditor.id.rawValue))")
            let first = try await client.send(.get, "/v1/audit/checkpoints?limit=2", token: auditor.token)
            #expect(first.status == .ok)
            let page = try first.decode(Page<SignedCheckpoint>.self)
            #expect(page.data.count == 2)
            #expect(page.data.allSatisfy { $0.publicKey == audit.key.publicKey.rawRepresentation.base64EncodedString() })
            #expect(page.data.allSatisfy { !$0.signature.isEmpty })
            let cursor = try #require(page.nextCursor)
            let rest = try await client.send(.get, "/v1/audit/checkpoints?after=\(cursor)", token: auditor.token)
            #expect(try rest.decode(Page<SignedCheckpoint>.self).data.count == 1)
            // The last page says so with an explicit null, not a missing key.
            #expect(rest.json["nextCursor"] is NSNull)

            // What an auditor fetched, byte for byte the JSON it was sent, verifies as a checkpoint file.
            let fetched = try JSONSerialization.data(withJSONObject: try #require((first.json["data"] as? [[String: Any]])?.first))
            try fetched.write(to: audit.file("fetched.json"))
            try Data(audit.key.publicKey.rawRepresentation.base64EncodedString().utf8).write(to: audit.file("public-key"))
            #expect(
                try runLender(
                    ["audit", "verify", "--checkpoint", audit.file("fetched.json").path, "--public-key", audit.file("public-key").path],
                    database: database
                ).contains("extends the checkpoint"))

            for bad in ["after=-1", "after=x", "limit=0", "limit=1001"] {
                let response = try await client.send(.get, "/v1/audit/checkpoints?\(bad)", token: auditor.token)
                #expect(response.status == .unprocessableContent, "\(bad)")
            }
        }
    }

    @Test func theServerSignsACheckpointOnItsScheduleAndRefusesANonsenseOne() async throws {
        try await withServerDatabase { database, admin in
            let audit = try AuditKey()
            let server = try await ServerProcess(
                database: database, environment: audit.environment.merging(["AUDIT_CHECKPOINT_EVERY": "1s"]) { $1 })
            defer { server.kill(SIGTERM) }
            _ = try await server.user("rita")
            let clock = ContinuousClock()
            let started = clock.now
            var kept = 0
            while kept == 0, clock.now - started < .seconds(20) {
                try await Task.sleep(for: .milliseconds(200))
                kept = try await admin.query("SELECT count(*) AS n FROM audit_checkpoints WHERE position > 0").single()
                    .decode("n", as: Int.self)
            }
            #expect(kept >= 1, "no checkpoint signed within 20 s")
            // Not one a second while nothing moves: only when the log has grown.
            try await Task.sleep(for: .seconds(2))
            let quiet = try await admin.query("SELECT count(DISTINCT position) = count(*) AS distinct FROM audit_checkpoints").single()
            #expect(try quiet.decode("distinct", as: Bool.self))

            await #expect(throws: (any Error).self) {
                _ = try await ServerProcess(database: database, environment: audit.environment.merging(["AUDIT_CHECKPOINT_EVERY": "soon"]) { $1 })
            }
        }
    }
}

@Suite("Maintenance that never stops writes")
struct MaintenanceTests {
    /// Runs each of `appends` in a task of its own: what each answered (true: it appended)
    /// before the deadline, nil for one still waiting. A hang fails the test instead of hanging it.
    static func answered(within deadline: Duration, _ appends: [@Sendable () async throws -> Bool]) async -> [Bool?] {
        let box = Box()
        for (index, append) in appends.enumerated() {
            Task { box.set(index, (try? await append()) ?? false) }
        }
        let clock = ContinuousClock()
        let started = clock.now
        while box.count < appends.count, clock.now - started < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        return (0..<appends.count).map { box.get($0) }
    }

    final class Box: Sendable {
        let answers = Mutex([Int: Bool]())
        func set(_ index: Int, _ value: Bool) { answers.withLock { $0[index] = value } }
        func get(_ index: Int) -> Bool? { answers.withLock { $0[index] } }
        var count: Int { answers.withLock { $0.count } }
    }

    @Test func replayVerifyComparesOnASnapshotWhileAnAppendHoldsTheHead() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            for index in 0..<5 { _ = try await client.postRental(rita.token, title: "Thing \(index)") }
            let database = try await ownerURL(admin)
            // An append in flight, as long as it takes: the head locked until the comparison is over.
            let outcome = try await admin.withTransaction { connection in
                try await connection.query("SELECT FROM log_head FOR UPDATE")
                let verify = Task { try await runLenderAside(["replay", "--verify"], database: database) }
                let done = await Self.answered(within: .seconds(60), [{ try await verify.value.contains("no differences") }])
                return done[0]
            }
            #expect(outcome == true, "replay --verify waited for the log head (or found differences)")
        }
    }

    @Test func theSwapLetsAppendsThroughWhileAReaderHoldsALiveView() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            for index in 0..<5 { _ = try await client.postRental(rita.token, title: "Thing \(index)") }
            let database = try await ownerURL(admin)
            let replay = try await admin.withTransaction { connection in
                // A long report reading the market: it holds items_view until it commits.
                try await connection.query("SELECT count(*) FROM items_view")
                let replay = Task { try await runLenderAside(["replay"], database: database) }
                // Once the swap waits for the reader, appends must still go through.
                var waiting = false
                let clock = ContinuousClock()
                let started = clock.now
                while !waiting, clock.now - started < .seconds(60) {
                    try await Task.sleep(for: .milliseconds(20))
                    // pg_stat_activity is read once a transaction unless its snapshot is cleared.
                    try await connection.query("SELECT pg_stat_clear_snapshot()")
                    waiting = try await connection.query(
                        """
                        SELECT count(*) > 0 AS w FROM pg_stat_activity
                        WHERE datname = current_database() AND query LIKE 'LOCK TABLE%' AND wait_event_type = 'Lock'
                        """
                    ).single().decode("w", as: Bool.self)
                }
                #expect(waiting, "the swap never tried to lock the live views")
                let posts: [@Sendable () async throws -> Bool] = (0..<5).map { index in
                    { try await client.postRental(rita.token, title: "During \(index)").title == "During \(index)" }
                }
                let answers = await Self.answered(within: .seconds(20), posts)
                #expect(answers == Array(repeating: true, count: 5), "appends waited for the reader behind the swap")
                return replay
            }
            // The reader is gone: the swap goes through at a later attempt.
            let said = try await replay.value
            #expect(said.contains("Rebuilt"), "\(said)")
            #expect(try runLender(["replay", "--verify"], database: database).contains("no differences"))
            let during = try await admin.query("SELECT count(*) AS n FROM items_view WHERE title LIKE 'During %'").single()
            #expect(try during.decode("n", as: Int.self) == 5)
        }
    }
}

@Suite("The server's login role")
struct ServerLoginRoleTests {
    /// Logged in as a member of lender_app that is not the owner, the server serves as before,
    /// and nothing on its connections (not even RESET ROLE) can rewrite the log or rewind its head.
    @Test func aServerLoggedInAsLenderServerServesAndCannotResetToTheOwner() async throws {
        try await withServerDatabase { database, admin in
            try await admin.query(
                """
                DO $$ BEGIN
                    CREATE ROLE lender_server LOGIN;
                EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
                END $$
                """)
            try await admin.query("GRANT lender_app TO lender_server")
            let login = try PostgresConfiguration(
                "host=\(database.host) port=\(database.port) dbname=\(database.database) user=lender_server")
            let server = try await ServerProcess(database: database, environment: ["SERVER_DATABASE_URL": login.connectionString])
            defer { server.kill(SIGTERM) }
            let rita = try await server.user("rita")
            let posted = try await server.send(
                .post, "/v1/rentals",
                body: API.RentalBody(
                    title: "Bike", category: .bikes, dailyPriceCents: 500, location: API.LocationInput(lat: 27.7, lng: 85.3)),
                token: rita.token)
            #expect(posted.status == .created)
            let sessions = try await admin.query(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND usename = 'lender_server'"
            ).single().decode("n", as: Int.self)
            #expect(sessions > 0, "the server's pool logs in as lender_server")

            try await TestDatabase.withPool(login, size: 1) { pool in
                for statement: PostgresQuery in [
                    "UPDATE log_head SET position = 0", "INSERT INTO events SELECT * FROM events LIMIT 1",
                    "UPDATE streams SET version = 0", "ALTER TABLE events DISABLE TRIGGER USER",
                ] {
                    await #expect(throws: PostgresError.self, "\(statement.sql)") {
                        try await pool.withTransaction { connection in
                            try await connection.query("RESET ROLE")
                            try await connection.query(statement)
                        }
                    }
                }
            }
        }
    }
}
