import Foundation
import HTTPTypes
import Postgres
import ServerTestSupport
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Nothing lost even when the database is (SPEC §12.8): pgBackRest's backups and WAL archive
/// of a cluster of its own, restored to a point in time and checked as an auditor would.
@Suite("Backups and point-in-time restore", .serialized)
struct BackupTests {
    /// A user, a deposit and a rental: what a moment of traffic writes.
    func traffic(_ server: ServerProcess, _ handle: String) async throws -> String {
        let user = try await server.user(handle)
        let card = try await server.send(
            .post, "/v1/me/cards",
            body: API.CardBody(number: "4242424242424242", expMonth: 12, expYear: 2031, cvv: "123", holderName: "Ada"), token: user.token)
        let deposit = try await server.send(
            .post, "/v1/me/deposits",
            body: API.DepositBody(amountCents: 5_000, cardId: UUID(uuidString: try #require(card.json["id"] as? String))!),
            token: user.token)
        #expect(deposit.status == .created, "\(deposit)")
        let posted = try await server.send(
            .post, "/v1/rentals",
            body: API.RentalBody(
                title: "Drill of \(handle)", category: .tools, dailyPriceCents: 1500, location: API.LocationInput(lat: 27.7, lng: 85.3)),
            token: user.token)
        #expect(posted.status == .created, "\(posted)")
        return user.token
    }

    func head(_ pool: PostgresPool) async throws -> Int {
        try await pool.query("SELECT coalesce(max(position), 0)::int8 AS p FROM events").single().decode("p", as: Int.self)
    }

    @Test func aRestoreToAMomentHoldsExactlyTheLogAsItStoodAndServes() async throws {
        try await QuietMachine.shared.run {
            let cluster = try BackedUpCluster()
            let restoredDirectory = "\(cluster.local)/restored"
            defer { cluster.remove(restored: [restoredDirectory]) }
            let owner = try cluster.owner()
            _ = try runLender(["migrate"], database: owner)
            let audit = try AuditKey()
            try await PostgresPool.with(configuration: try cluster.admin(), options: .init(size: 1), logger: TestDatabase.logger) { admin in
                let server = try await ServerProcess(database: owner)
                defer { server.kill(SIGTERM) }
                let ada = try await traffic(server, "ada")
                #expect(try cluster.db(["backup", "full"]).contains("full backup"))
                // A backup's stop time is kept in whole seconds: a restore targets a time after it.
                try await Task.sleep(for: .milliseconds(1100))
                _ = try await traffic(server, "bob")
                let before = audit.file("before.json").path
                _ = try runLender(["audit", "checkpoint", "--out", before], database: owner, environment: audit.environment)
                // T: the log's head as it stands at this instant.
                let moment = try await admin.query("SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00' AS t")
                    .single().decode("t", as: String.self)
                let headAtMoment = try await head(admin)
                try await Task.sleep(for: .milliseconds(50))
                _ = try await traffic(server, "cyd")
                let after = audit.file("after.json").path
                _ = try runLender(["audit", "checkpoint", "--out", after], database: owner, environment: audit.environment)
                #expect(try await head(admin) > headAtMoment)

                // Faults first: a time before the first backup, a clear error.
                let early = try cluster.run(["restore", "--to", "2001-01-01 00:00:00+00", "--into", "\(cluster.local)/early"])
                #expect(early.status != 0 && early.output.contains("no backup ends before"), "\(early.output)")

                let restored = try cluster.restore(to: moment, into: restoredDirectory)
                let restoredAdmin = try PostgresConfiguration(restored.connectionString.replacingOccurrences(of: "//lender@", with: "//postgres@"))
                try await PostgresPool.with(configuration: restoredAdmin, options: .init(size: 1), logger: TestDatabase.logger) { copy in
                    #expect(try await head(copy) == headAtMoment, "exactly what was committed before T")
                    let gaps = try await copy.query(
                        "SELECT count(*)::int8 AS n FROM events WHERE position <> (SELECT count(*) FROM events e WHERE e.position <= events.position)")
                    #expect(try gaps.single().decode("n", as: Int.self) == 0, "positions without a gap")
                }
                let publicKey = audit.file("public-key")
                try Data(try runLender(["audit", "public-key"], database: nil, environment: audit.environment).utf8).write(to: publicKey)
                let verified = try runLender(["audit", "verify", "--checkpoint", before, "--public-key", publicKey.path], database: restored)
                #expect(verified.contains("extends the checkpoint"), "\(verified)")
                let cut = try runLender(
                    ["audit", "verify", "--checkpoint", after, "--public-key", publicKey.path], database: restored, expectedStatus: 1)
                #expect(cut.contains("cut short"), "\(cut)")
                let replayed = try runLender(["replay", "--verify"], database: restored)
                #expect(replayed.contains("no differences"), "\(replayed)")
                let money = try runLender(["audit", "money"], database: restored)
                #expect(money.contains("Money adds up"), "\(money)")
                // A server on the copy serves what it holds: ada's session and balance.
                let copyServer = try await ServerProcess(database: restored)
                defer { copyServer.kill(SIGTERM) }
                let me = try await copyServer.send(.get, "/v1/me", token: ada)
                #expect(me.status == .ok && me.json["balanceCents"] as? Int == 5_000, "\(me)")
                let market = try await copyServer.send(.get, "/v1/market", token: ada).json["data"] as? [[String: Any]] ?? []
                #expect(Set(market.compactMap { $0["title"] as? String }) == ["Drill of ada", "Drill of bob"])
            }
        }
    }

    @Test func aWALSegmentMissingFromTheArchiveIsNamedAndTheRestoreStops() async throws {
        try await QuietMachine.shared.run {
            let cluster = try BackedUpCluster()
            let restoredDirectory = "\(cluster.local)/restored"
            defer { cluster.remove(restored: [restoredDirectory]) }
            let owner = try cluster.owner()
            _ = try runLender(["migrate"], database: owner)
            _ = try cluster.db(["backup", "full"])
            try await Task.sleep(for: .milliseconds(1100))  // past the backup's stop second
            try await PostgresPool.with(configuration: try cluster.admin(), options: .init(size: 1), logger: TestDatabase.logger) { admin in
                let server = try await ServerProcess(database: owner)
                defer { server.kill(SIGTERM) }
                // Writes across several segments, each archived.
                for index in 0..<3 {
                    _ = try await traffic(server, "user\(index)")
                    _ = try await admin.query("SELECT pg_switch_wal()")
                }
                _ = try cluster.db(["backups"])
                let moment = try await admin.query("SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00' AS t")
                    .single().decode("t", as: String.self)
                _ = try await traffic(server, "late")
                // A segment after the backup goes missing from the archive.
                let archive = URL(fileURLWithPath: "\(cluster.local)/pgbackrest/repo/archive/lender")
                let segments = (FileManager.default.enumerator(atPath: archive.path)?.allObjects as? [String] ?? [])
                    .filter { $0.range(of: #"/[0-9A-F]{24}-"#, options: .regularExpression) != nil }.sorted()
                let victim = try #require(segments.dropLast().last, "\(segments)")
                let name = String(victim.split(separator: "/").last!.prefix(24))
                try FileManager.default.removeItem(at: archive.appendingPathComponent(victim))
                let failed = try cluster.run(["restore", "--to", moment, "--into", restoredDirectory])
                #expect(failed.status != 0, "\(failed.output)")
                #expect(failed.output.contains("lacks WAL segment \(name)"), "\(failed.output)")
            }
        }
    }

    @Test func aBackupTakenWhileSixteenWritersAppendRestoresConsistent() async throws {
        try await QuietMachine.shared.run {
            let cluster = try BackedUpCluster()
            let restoredDirectory = "\(cluster.local)/restored"
            defer { cluster.remove(restored: [restoredDirectory]) }
            let owner = try cluster.owner()
            _ = try runLender(["migrate"], database: owner)
            try await PostgresPool.with(configuration: try cluster.admin(), options: .init(size: 1), logger: TestDatabase.logger) { admin in
                let server = try await ServerProcess(database: owner, environment: ["DATABASE_POOL_SIZE": "8"])
                defer { server.kill(SIGTERM) }
                var tokens = [String]()
                for index in 0..<16 { tokens.append(try await server.user("writer\(index)").token) }
                let writing = ManagedAtomicFlag()
                let writers = tokens.map { token in
                    Task {
                        var posted = 0
                        while !writing.isSet {
                            let reply = try await server.send(
                                .post, "/v1/rentals",
                                body: API.RentalBody(
                                    title: "Thing \(posted)", category: .tools, dailyPriceCents: 900,
                                    location: API.LocationInput(lat: 27.7, lng: 85.3)),
                                token: token)
                            if reply.status == .created { posted += 1 }
                            // Steady, not flat out: the suite's other tests share two cores.
                            try await Task.sleep(for: .milliseconds(10))
                        }
                        return posted
                    }
                }
                try await Task.sleep(for: .milliseconds(300))
                #expect(try cluster.db(["backup", "full"]).contains("full backup"))
                try await Task.sleep(for: .milliseconds(1100))
                let moment = try await admin.query("SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00' AS t")
                    .single().decode("t", as: String.self)
                try await Task.sleep(for: .milliseconds(300))
                writing.set()
                var total = 0
                for writer in writers { total += try await writer.value }
                #expect(total > 16, "the writers wrote through the backup")
                let restored = try cluster.restore(to: moment, into: restoredDirectory)
                let restoredAdmin = try PostgresConfiguration(restored.connectionString.replacingOccurrences(of: "//lender@", with: "//postgres@"))
                try await PostgresPool.with(configuration: restoredAdmin, options: .init(size: 1), logger: TestDatabase.logger) { copy in
                    let copied = try await head(copy)
                    let original = try await head(admin)
                    #expect(copied > 16 && copied < original, "a moment inside the writing")
                    // A prefix of the log: the same last event, hash and all.
                    let hash: PostgresQuery = "SELECT encode(hash, 'hex') AS h FROM events WHERE position = \(copied)"
                    let copiedHash = try await copy.query(hash).single().decode("h", as: String.self)
                    let originalHash = try await admin.query(hash).single().decode("h", as: String.self)
                    #expect(copiedHash == originalHash)
                }
                let intact = try runLender(["audit", "verify"], database: restored)
                #expect(intact.contains("intact"), "\(intact)")
                let replayed = try runLender(["replay", "--verify"], database: restored)
                #expect(replayed.contains("no differences"), "\(replayed)")
            }
        }
    }
}

/// A flag the writers read and the test sets.
final class ManagedAtomicFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
