import Foundation
import Marketplace
import Postgres
import Projections
import ServerTestSupport
import Testing
import TestSupport
import Server

#if canImport(Glibc)
import Glibc
#endif

/// A primary with a streaming standby of its own (`scripts/db replica`): reads from the real
/// replica, and a failover in the middle of a write load (SPEC §11.5).
@Suite("A standby: replica reads and failover", .serialized)
struct FailoverTests {
    @Test func readsWithMinPositionNeverMissTheWriteTheyFollow() async throws {
        let pair = try ClusterPair()
        defer { pair.remove() }
        let primary = try pair.failoverOwner()
        _ = try runLender(["migrate"], database: primary)
        let server = try await ServerProcess(
            database: primary, environment: ["READ_DATABASE_URL": try pair.replicaOwner().connectionString])
        let ada = try await server.user("ada")
        var readFrom = [String: Int]()

        /// Posts a rental, then reads `/v1/me/posts` at the position it answered: the rental
        /// must be first, wherever the read went.
        func postThenRead(_ round: Int) async throws {
            let posted = try await server.send(
                .post, "/v1/rentals",
                body: API.RentalBody(
                    title: "Round \(round)", category: .tools, dailyPriceCents: 100, location: API.LocationInput(lat: 1, lng: 2)),
                token: ada.token)
            #expect(posted.status == .created)
            let item = try posted.decode(ItemResource.self)
            let position = try #require(item.position)
            let read = try await server.send(.get, "/v1/me/posts?limit=1", token: ada.token, headers: ["X-Min-Position": "\(position)"])
            #expect(read.status == .ok)
            #expect(try read.decode(Page<ItemResource>.self).data.first?.id == item.id, "round \(round) read \(read)")
            readFrom[read.headers[.init("X-Read-From")!] ?? "none", default: 0] += 1
        }

        // Replay paused: the replica cannot have any of these writes, so every read must go to the primary.
        try await TestDatabase.withPool(try pair.replicaAdmin(), size: 1) { replica in
            try await replica.query("SELECT pg_wal_replay_pause()")
            for round in 0..<50 { try await postThenRead(round) }
            #expect(readFrom == ["primary": 50])
            let stale = try await server.send(.get, "/v1/me/posts?limit=100", token: ada.token)
            #expect(stale.headers[.init("X-Read-From")!] == "replica", "without X-Min-Position: the replica")
            #expect(try stale.decode(Page<ItemResource>.self).data.isEmpty, "the replica has replayed none of them")
            let health = try await server.send(.get, "/health/ready").json
            let replicaHealth = try #require(health["replica"] as? [String: Any])
            #expect(replicaHealth["lagPositions"] as? Int ?? 0 >= 50, "\(health)")
            let metrics = String(decoding: try await server.send(.get, "/metrics").data, as: UTF8.self)
            #expect(metrics.contains("lender_replica_lag_events"))
            try await replica.query("SELECT pg_wal_replay_resume()")
        }
        // Replaying again: reads go to the replica as soon as it has the write.
        readFrom = [:]
        for round in 50..<100 { try await postThenRead(round) }
        #expect(readFrom["replica", default: 0] > 0, "\(readFrom)")
        #expect(readFrom.values.reduce(0, +) == 50)

        // The standby listed first: several hosts mean whichever takes writes, not the first that answers.
        let standbyFirst = try PostgresConfiguration(
            "postgresql://lender@127.0.0.1:\(try pair.replicaPort()),127.0.0.1:\(try pair.primaryPort())/lender")
        try await TestDatabase.withPool(standbyFirst, size: 1) { pool in
            let inRecovery = try await pool.query("SELECT pg_is_in_recovery()").single().decode(0, as: Bool.self)
            #expect(!inRecovery)
        }

        // A position no log has reached yet is read as the head: on the replica once it has it (issue 48).
        var beyond = ""
        for _ in 0..<50 {
            let read = try await server.send(.get, "/v1/market", token: ada.token, headers: ["X-Min-Position": "\(Int64.max)"])
            beyond = read.headers[.init("X-Read-From")!] ?? ""
            if beyond == "replica" { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(beyond == "replica", "X-Min-Position 2^63-1 no longer pins reads to the primary")

        let bad = try await server.send(.get, "/v1/market", token: ada.token, headers: ["X-Min-Position": "-1"])
        #expect(bad.status == .unprocessableContent)
        #expect(bad.code == "validation_failed")

        // The replica gone: reads step around it to the primary, and the server stays ready.
        try pair.db(["replica", "stop", "immediate"])
        let aside = try await server.send(.get, "/v1/me/posts?limit=100", token: ada.token)
        #expect(aside.status == .ok)
        #expect(aside.headers[.init("X-Read-From")!] == "primary")
        #expect(try aside.decode(Page<ItemResource>.self).data.count == 100)
        let clock = ContinuousClock()
        let asked = clock.now
        let ready = try await server.send(.get, "/health/ready")
        #expect(clock.now - asked < .seconds(3), "a silent replica does not hold the probe")
        #expect(ready.status == .ok)
        #expect((ready.json["replica"] as? [String: Any])?["status"] as? String == "unavailable", "\(ready)")
        let scraped = clock.now
        let metrics = String(decoding: try await server.send(.get, "/metrics").data, as: UTF8.self)
        #expect(clock.now - scraped < .seconds(3), "nor the scrape")
        #expect(metrics.contains("lender_replica_up 0"), "\(metrics.split(separator: "\n").filter { $0.contains("replica") })")
    }

    @Test func aFailoverUnderLoadLosesNothingAcknowledgedAndRepeatsNoPosition() async throws {
        let pair = try ClusterPair()
        defer { pair.remove() }
        try pair.db(["sync", "on"])
        let database = try pair.failoverOwner()
        _ = try runLender(["migrate"], database: database)
        let server = try await ServerProcess(database: database)
        let tokens = [
            try await server.user("writer0").token, try await server.user("writer1").token, try await server.user("writer2").token,
        ]
        let auditor = try await server.user("auditor")
        try await TestDatabase.withPool(database, size: 1) { pool in
            try await pool.query("INSERT INTO auditors (user_id) VALUES (\(auditor.id.rawValue))")
        }

        let stop = Counter(0)
        let clock = ContinuousClock()
        let started = clock.now
        // A follower of the log, as an auditor's: pages after the last position it saw, on
        // through the switch; every event it is given, once.
        async let followed = follow(server, token: auditor.token, until: stop)
        async let load = postUntilStopped(server, tokens: tokens, stop: stop)
        // Whatever happens here, the load and the follower are told to stop, so that the
        // test ends (their requests would otherwise run on, cancelled, forever).
        var recovered: Duration?
        do {
            try await Task.sleep(for: .seconds(4))
            try pair.db(["stop", "immediate"])
            let stoppedAt = clock.now
            try await Task.sleep(for: .seconds(1))
            try pair.db(["promote"])
            // Accepting commands again, without a restart.
            while clock.now - stoppedAt < .seconds(15) {
                let probe = try await server.send(
                    .post, "/v1/rentals",
                    body: API.RentalBody(
                        title: "Probe", category: .tools, dailyPriceCents: 100, location: API.LocationInput(lat: 1, lng: 2)),
                    token: tokens[0])
                if probe.status == .created {
                    recovered = clock.now - stoppedAt
                    break
                }
                #expect(probe.status == .serviceUnavailable, "during the switch: 503, never a wrong answer")
                try await Task.sleep(for: .milliseconds(100))
            }
            let remaining = .seconds(10) - (clock.now - started)
            if remaining > .zero { try await Task.sleep(for: remaining) }
        } catch {
            Issue.record(error, "the failover drill")
        }
        #expect(recovered != nil, "commands accepted again within 15 s of the stop")
        stop.add(1)
        let (acknowledged, others) = await load
        var seen = try await followed
        #expect(acknowledged.count > 20, "writes acknowledged before and after: \(acknowledged.count)")
        #expect(others.allSatisfy { $0 == 503 }, "anything but 201 is a 503: \(Set(others))")

        try await TestDatabase.withPool(database, size: 1) { pool in
            let head = try await pool.query("SELECT position FROM log_head").single().decode(0, as: Int64.self)
            let range = try await pool.query("SELECT count(*), min(position), max(position) FROM events").single()
            let (count, lowest, highest) = (try range.decode(0, as: Int64.self), try range.decode(1, as: Int64.self), try range.decode(2, as: Int64.self))
            #expect(count == head && lowest == 1 && highest == head, "positions gap-free and unique across the switch")
            let listed = Set(
                try await pool.query("SELECT item_id::text FROM items_view").map { try $0.decode(0, as: String.self) })
            let logged = Set(
                try await pool.query("SELECT substr(stream_id, 6) FROM events WHERE type = 'RentalPosted'").map {
                    try $0.decode(0, as: String.self)
                })
            let missing = acknowledged.filter { !listed.contains($0) || !logged.contains($0) }
            #expect(missing.isEmpty, "every acknowledged command is in the log and the views: \(missing.count) missing")
            // The follower catches up to the head, then must have seen each position once.
            seen += try await follow(server, token: auditor.token, after: seen.last ?? 0, until: Counter(1))
            #expect(seen == Array(1...head), "the follower saw \(seen.count) events for a head of \(head)")
        }
        #expect(try runLender(["audit", "verify"], database: database).contains("intact"))
        // The old primary is fenced: started again, it would be a second primary.
        #expect(throws: (any Error).self, "scripts/db start refuses the failed-over cluster") { try pair.db(["start"]) }
        print("failover: recovered in \(recovered.map { "\($0)" } ?? "-"), \(acknowledged.count) acknowledged, \(others.count) refused with 503")
    }

    /// SPEC §12.8: pg_auto_failover's monitor promotes the standby by itself when the primary
    /// dies (its keeper and PostgreSQL, SIGKILL); the server follows; nothing acknowledged is
    /// lost; the old primary rejoins as a standby; a second failover goes back.
    @Test func theMonitorPromotesTheStandbyByItselfAndNothingAcknowledgedIsLost() async throws {
        try await QuietMachine.shared.run {
            let cluster = try AutoFailoverCluster()
            defer { cluster.remove() }
            let database = try cluster.owner()
            _ = try runLender(["migrate"], database: database)
            let server = try await ServerProcess(database: database)
            defer { server.kill(SIGTERM) }
            let tokens = [
                try await server.user("writer0").token, try await server.user("writer1").token, try await server.user("writer2").token,
            ]
            let stop = Counter(0)
            async let load = postUntilStopped(server, tokens: tokens, stop: stop)
            var failovers = [Duration]()
            do {
                for _ in 0..<2 {
                    try await Task.sleep(for: .seconds(2))
                    let old = try cluster.primary()
                    try cluster.db(["ha", "crash", old])
                    // Nobody promotes by hand.
                    failovers.append(try await cluster.waitForPrimary(otherThan: old))
                    try await Task.sleep(for: .seconds(2))
                    // The old primary rejoins as a standby by itself once its keeper runs again.
                    try cluster.db(["ha", "rejoin", old])
                }
                // With the monitor down, the nodes keep serving: writes go on (no failover then).
                try cluster.db(["ha", "crash", "monitor"])
                try await Task.sleep(for: .seconds(2))
            } catch {
                Issue.record(error, "the automatic failover drill\n\(cluster.logs())")
            }
            stop.add(1)
            let (acknowledged, others) = await load
            #expect(acknowledged.count > 20, "writes acknowledged before, between and after: \(acknowledged.count)")
            #expect(others.allSatisfy { $0 == 503 }, "anything but 201 is a 503: \(Set(others))")
            let probe = try await server.send(
                .post, "/v1/rentals",
                body: API.RentalBody(title: "After", category: .tools, dailyPriceCents: 100, location: API.LocationInput(lat: 1, lng: 2)),
                token: tokens[0])
            #expect(probe.status == .created, "writes without the monitor: \(probe)")
            try await TestDatabase.withPool(database, size: 1) { pool in
                let head = try await pool.query("SELECT position FROM log_head").single().decode(0, as: Int64.self)
                let range = try await pool.query("SELECT count(*), min(position), max(position) FROM events").single()
                let (count, highest) = (try range.decode(0, as: Int64.self), try range.decode(2, as: Int64.self))
                #expect(count == head && highest == head, "gap-free positions")
                let logged = Set(
                    try await pool.query("SELECT substr(stream_id, 6) FROM events WHERE type = 'RentalPosted'").map {
                        try $0.decode(0, as: String.self)
                    })
                let missing = acknowledged.filter { !logged.contains($0) }
                #expect(missing.isEmpty, "every acknowledged command is in the log: \(missing.count) missing")
            }
            #expect(try runLender(["audit", "verify"], database: database).contains("intact"))
            print("automatic failover: \(failovers) to a new primary, \(acknowledged.count) acknowledged, \(others.count) refused with 503")
        }
    }

    /// The positions an auditor reads from `/v1/events`, page after page, until `stop` says so
    /// and it has caught up; a 503 (the switch) is waited out.
    func follow(_ server: ServerProcess, token: String, after start: Int64 = 0, until stop: Counter) async throws -> [Int64] {
        var seen = [Int64]()
        var after = start
        while !Task.isCancelled {
            let reply = try? await server.send(.get, "/v1/events?after=\(after)&limit=1000", token: token)
            guard let reply, reply.status == .ok else {
                try await Task.sleep(for: .milliseconds(50))
                continue
            }
            let page = reply.json["data"] as? [[String: Any]] ?? []
            let positions = page.compactMap { ($0["position"] as? NSNumber)?.int64Value }
            seen += positions
            after = positions.last ?? after
            if positions.isEmpty {
                if stop.value > 0 { return seen }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        return seen
    }
}

/// A failover without synchronous commit can lose commits a server already acknowledged; the
/// log's head then lies behind positions it handed out. Simulated here by taking the last
/// commit out of the log, as the promoted standby would never have had it.
@Suite("A log behind what was acknowledged")
struct LogBehindTests {
    @Test func appendsAreRefusedAndFollowersTold() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let auditor = try await client.user("auditor")
            try await admin.query("INSERT INTO auditors (user_id) VALUES (\(auditor.id.rawValue))")
            let kept = try await client.postRental(ada.token)
            let lost = try await client.postRental(ada.token)
            let acknowledged = try #require(lost.position)
            let keptAt = try #require(kept.position)
            // The last rental's commit, never replicated: its event, its stream and the head.
            try await admin.withTransaction { connection in
                try await connection.query("SET LOCAL session_replication_role = replica")
                try await connection.query("DELETE FROM events WHERE position > \(keptAt)")
                try await connection.query("DELETE FROM streams WHERE stream_id = \("item-\(lost.id)")")
                try await connection.query("UPDATE log_head SET position = \(keptAt)")
            }

            let refused = try await client.send(
                .post, "/v1/rentals",
                body: API.RentalBody(title: "After", category: .tools, dailyPriceCents: 100, location: API.LocationInput(lat: 1, lng: 2)),
                token: ada.token)
            #expect(refused.status == .serviceUnavailable)
            #expect(refused.code == "log_behind", "\(refused)")
            #expect(try await eventCount(admin) == Int(keptAt), "the refused append wrote nothing at a reused position")
            // Sticky: a later command is refused too, and readiness says why.
            let again = try await client.send(
                .post, "/v1/rentals",
                body: API.RentalBody(title: "Again", category: .tools, dailyPriceCents: 100, location: API.LocationInput(lat: 1, lng: 2)),
                token: ada.token)
            #expect(again.code == "log_behind", "\(again)")
            let ready = try await client.send(.get, "/health/ready")
            #expect(ready.status == .serviceUnavailable)
            #expect(ready.code == "log_behind")
            // An auditor who read the lost position hears that it is gone.
            let follower = try await client.send(.get, "/v1/events?after=\(acknowledged)", token: auditor.token)
            #expect(follower.status == .conflict)
            #expect(follower.code == "log_behind")
            let caughtUp = try await client.send(.get, "/v1/events?after=\(keptAt)", token: auditor.token)
            #expect(caughtUp.status == .ok, "a follower at the head is not behind")
        }
    }
}
