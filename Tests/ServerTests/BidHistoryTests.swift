import EventStore
import Foundation
import HummingbirdTesting
import Marketplace
import Postgres
import Server
import Testing
import TestSupport
@testable import UseCases
import Aggregates

@Suite("Bid history")
struct BidHistoryTests {
    @Test func ownersAndAuditorsSeeAllBiddersTheirOwnOthersNothing() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let bob = try await client.user("bob")
            let auditor = try await client.user("auditor")
            let stranger = try await client.user("stranger")
            let itemID = try #require(try await client.postRental(owner.token)["id"] as? String)
            let aliceBid = try #require(try await client.bid(itemID, alice.token).body["id"] as? String)
            _ = try await client.bid(itemID, bob.token)
            _ = try await client.send(.post, "/v1/bids/\(aliceBid)/approve", token: owner.token)

            let all = try await client.send(.get, "/v1/items/\(itemID)/bids/history", token: owner.token)
            #expect(all.status == .ok)
            let entries = all.body["data"] as? [[String: Any]] ?? []
            #expect(entries.compactMap { $0["type"] as? String } == ["BidPlaced", "BidPlaced", "BidApproved", "BidRejected"])
            #expect(entries.compactMap { $0["status"] as? String } == ["pending", "pending", "approved", "rejected"])
            let positions = entries.compactMap { $0["position"] as? Int }
            #expect(positions == positions.sorted())
            #expect(entries.first?["actorId"] as? String == alice.id.lowercased())
            #expect(entries[2]["actorId"] as? String == owner.id.lowercased())
            // The hashes are the log's own.
            let logged = try await admin.query("SELECT encode(hash, 'hex') AS hash FROM events WHERE position = \(positions[0])")
                .single().decode("hash", as: String.self)
            #expect(entries.first?["hash"] as? String == logged)
            #expect((entries.first?["previousHash"] as? String)?.count == 64)

            let hers = try await client.send(.get, "/v1/items/\(itemID)/bids/history", token: alice.token)
            let herEntries = hers.body["data"] as? [[String: Any]] ?? []
            #expect(herEntries.count == 2)
            #expect(herEntries.allSatisfy { ($0["bidderId"] as? String) == alice.id.lowercased() })

            let refused = try await client.send(.get, "/v1/items/\(itemID)/bids/history", token: stranger.token)
            #expect(refused.status == .forbidden)
            #expect(try await client.send(.get, "/v1/items/\(itemID)/bids/history", token: auditor.token).status == .forbidden)
            try await admin.query("INSERT INTO auditors (user_id) VALUES (\(UUID(uuidString: auditor.id)!))")
            let audited = try await client.send(.get, "/v1/items/\(itemID)/bids/history", token: auditor.token)
            #expect((audited.body["data"] as? [Any])?.count == 4)
        }
    }

    @Test func theCommandLinePrintsTheSameHistory() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let gateway = CommandGateway(store: EventStore(pool: pool, logger: TestDatabase.logger), logger: TestDatabase.logger)
                let owner = UserID()
                let post = PostRental(title: "Drill", description: "", category: .tools, dailyPriceCents: 700,
                    location: Location(lat: 1, lng: 1, place: "here"))
                _ = try await gateway.handle(.postRental(post), on: .item, id: post.itemID, actor: owner)
                let bid = PlaceBid(dailyPriceCents: 650, from: Day("2026-12-01")!, until: Day("2026-12-02")!)
                _ = try await gateway.handle(.placeBid(bid), on: .item, id: post.itemID, actor: UserID())

                let output = try runLender(["audit", "bids", "--item", post.itemID.description, "--json"], database: configuration)
                let entries = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]] ?? []
                #expect(entries.count == 1)
                #expect(entries.first?["bidId"] as? String == bid.bidID.description)
                #expect(entries.first?["dailyPriceCents"] as? Int == 650)
                let table = try runLender(["audit", "bids", "--item", post.itemID.description], database: configuration)
                #expect(table.contains("BidPlaced"))
                #expect(table.contains(bid.bidID.description))
            }
        }
    }
}

@Suite("lender audit verify")
struct AuditVerifyTests {
    @Test func anIntactLogPassesAndATamperedOneNamesThePosition() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger)
                for index in 0..<5 {
                    try await store.append(
                        to: StreamID("item", index % 2), expectedVersion: .any,
                        events: [NewEvent(type: "T", data: try JSONB(["n": index]))])
                }
                let intact = try runLender(["audit", "verify"], database: configuration)
                #expect(intact.contains("intact"))

                let admin = try TestDatabase.adminConfiguration().database(configuration.database)
                try await TestDatabase.withPool(admin, size: 1) { adminPool in
                    try await adminPool.withTransaction { connection in
                        try await connection.query("SET LOCAL session_replication_role = replica")
                        try await connection.query("UPDATE events SET data = '{\"n\": 99}' WHERE position = 3")
                    }
                }
                let broken = try runLender(["audit", "verify"], database: configuration, expectedStatus: 1)
                #expect(broken.contains("BROKEN: altered at position 3"))
                let stream = try runLender(["audit", "verify", "--stream", "item-1"], database: configuration)
                #expect(stream.contains("intact"))
            }
        }
    }
}

/// Runs the built `lender` executable against `database` and returns what it printed.
func runLender(
    _ arguments: [String], database: PostgresConfiguration?, expectedStatus: Int32 = 0, environment: [String: String] = [:],
    directory: String? = nil
) throws -> String {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let process = Process()
    process.executableURL = root.appendingPathComponent(".build/debug/lender")
    process.arguments = arguments + (database.map { ["--database-url", $0.connectionString] } ?? [])
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    process.environment = ["LOG_LEVEL": "error", "PATH": ProcessInfo.processInfo.environment["PATH"] ?? ""]
        .merging(environment) { $1 }
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == expectedStatus)
    return String(decoding: data, as: UTF8.self)
}

/// `runLender` on a thread of its own, not one of the few the concurrency pool has: for a run
/// that may wait on the test itself (a lock the test holds), which must not stall its tasks.
func runLenderAside(
    _ arguments: [String], database: PostgresConfiguration?, expectedStatus: Int32 = 0, environment: [String: String] = [:],
    directory: String? = nil
) async throws -> String {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(
                with: Result {
                    try runLender(
                        arguments, database: database, expectedStatus: expectedStatus, environment: environment,
                        directory: directory)
                })
        }
    }
}
