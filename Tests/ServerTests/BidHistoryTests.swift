import Aggregates
import EventStore
import Foundation
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import Server
import ServerTestSupport
import Testing
import TestSupport
@testable import UseCases

@Suite("Bid history")
struct BidHistoryTests {
    @Test func ownersAndAuditorsSeeAllBiddersTheirOwnOthersNothing() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let alice = try await client.user("alice")
            let bob = try await client.user("bob")
            let auditor = try await client.user("auditor")
            let stranger = try await client.user("stranger")
            let itemID = try await client.postRental(owner.token).id
            let aliceBid = try await client.bid(itemID, alice.token).decode(BidResource.self).id
            _ = try await client.bid(itemID, bob.token)
            _ = try await client.send(.post, "/v1/bids/\(aliceBid)/approve", token: owner.token)

            let all = try await client.send(.get, "/v1/items/\(itemID)/bids/history", token: owner.token)
            #expect(all.status == .ok)
            let entries = try all.decode(Page<BidHistoryEntry>.self).data
            #expect(entries.map(\.type) == ["BidPlaced", "BidPlaced", "BidApproved", "BidRejected"])
            #expect(entries.map(\.status) == [.pending, .pending, .approved, .rejected])
            let positions = entries.map(\.position)
            #expect(positions == positions.sorted())
            #expect(entries.first?.actorId == alice.id.description)
            #expect(entries[2].actorId == owner.id.description)
            // The hashes are the log's own.
            let logged = try await admin.query("SELECT encode(hash, 'hex') AS hash FROM events WHERE position = \(positions[0])")
                .single().decode("hash", as: String.self)
            #expect(entries.first?.hash == logged)
            #expect(entries.first?.previousHash.count == 64)

            let hers = try await client.send(.get, "/v1/items/\(itemID)/bids/history", token: alice.token)
            let herEntries = try hers.decode(Page<BidHistoryEntry>.self).data
            #expect(herEntries.count == 2)
            #expect(herEntries.allSatisfy { $0.bidderId == alice.id })

            let refused = try await client.send(.get, "/v1/items/\(itemID)/bids/history", token: stranger.token)
            #expect(refused.status == .forbidden)
            #expect(try await client.send(.get, "/v1/items/\(itemID)/bids/history", token: auditor.token).status == .forbidden)
            try await admin.query("INSERT INTO auditors (user_id) VALUES (\(auditor.id.rawValue))")
            let audited = try await client.send(.get, "/v1/items/\(itemID)/bids/history", token: auditor.token)
            #expect(try audited.decode(Page<BidHistoryEntry>.self).data.count == 4)
        }
    }

    @Test func theCommandLinePrintsTheSameHistory() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let gateway = CommandGateway(store: EventStore(pool: pool, logger: TestDatabase.logger), logger: TestDatabase.logger)
                let owner = UserID()
                // The day the commands are decided on: before the bid's first day.
                let today = Day("2026-11-01")!
                let post = PostRental(title: "Drill", description: "", category: .tools, dailyPriceCents: 700,
                    location: Location(lat: 1, lng: 1, place: "here"))
                _ = try await gateway.handle(.postRental(post, today: today), on: .item, id: post.itemID, actor: owner)
                let bid = PlaceBid(dailyPriceCents: 650, from: Day("2026-12-01")!, until: Day("2026-12-02")!, payWith: .balance)
                _ = try await gateway.handle(.placeBid(bid, today: today), on: .item, id: post.itemID, actor: UserID())

                let output = try runLender(["audit", "bids", "--item", post.itemID.description, "--json"], database: configuration)
                let entries = try JSONDecoder.lender().decode([BidHistoryEntry].self, from: Data(output.utf8))
                #expect(entries.count == 1)
                #expect(entries.first?.bidId == bid.bidID)
                #expect(entries.first?.dailyPriceCents == 650)
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
