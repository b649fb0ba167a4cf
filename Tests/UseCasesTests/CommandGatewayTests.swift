import EventStore
import Foundation
import Marketplace
import Payments
import Postgres
import Projections
import Synchronization
import Testing
import TestSupport
@testable import UseCases
import Aggregates

@Suite("Command gateway")
struct CommandGatewayTests {
    let owner = UserID()
    let here = Location(lat: 27.7, lng: 85.3, place: "Kathmandu")

    func withGateway(_ body: (CommandGateway) async throws -> Void) async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 8, acquireTimeout: .seconds(60)) { pool in
                try await body(CommandGateway(store: EventStore(pool: pool, logger: TestDatabase.logger), logger: TestDatabase.logger))
            }
        }
    }

    /// Two gateways on one database, as two servers would be, and their pool.
    func withTwoGateways(_ body: (CommandGateway, CommandGateway, PostgresPool) async throws -> Void) async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 4) { pool in
                let gateway = { CommandGateway(store: EventStore(pool: pool, logger: TestDatabase.logger), logger: TestDatabase.logger) }
                try await body(gateway(), gateway(), pool)
            }
        }
    }

    func postRental(_ gateway: CommandGateway) async throws -> ItemID {
        let post = PostRental(
            title: "Road bike", description: "Fast", category: .bikes, dailyPriceCents: 1500, location: here)
        _ = try await gateway.handle(.postRental(post, today: rulesDay), on: .item, id: post.itemID, actor: owner)
        return post.itemID
    }

    /// The day approvals are decided on: before every bid's first day.
    let rulesDay = Day("2026-11-01")!

    func placeBid(
        _ gateway: CommandGateway, on item: ItemID, by bidder: UserID, from: String = "2026-12-05", until: String = "2026-12-07"
    ) async throws -> BidID {
        // Held on the balance: the item's rules take it as said (a use case checks the balance).
        let bid = PlaceBid(dailyPriceCents: 1400, from: Day(from)!, until: Day(until)!, payWith: .balance)
        _ = try await gateway.handle(.placeBid(bid, today: rulesDay), on: .item, id: item, actor: bidder)
        return bid.bidID
    }

    @Test func aStreamTakenToBeNewButNotIsDecidedAgainOnWhatIsThere() async throws {
        try await withGateway { gateway in
            let item = try await postRental(gateway)
            let again = PostRental(
                itemID: item, title: "Same id", description: "", category: .tools, dailyPriceCents: 100, location: here)
            let error = try await #require(throws: DomainError.self) {
                try await gateway.handle(.postRental(again, today: rulesDay), on: .item, id: item, actor: owner, first: .newStream)
            }
            #expect(error.code == "item_exists")
            #expect(try await gateway.store.readStream(StreamID("item", item)).count == 1)
        }
    }

    /// After a failover the database may lack commits a kept state was folded from: a lost
    /// connection empties the cache, and a stream found behind what was read is read anew.
    @Test func keptStatesAreDroppedWhenTheDatabaseMayHaveChanged() async throws {
        try await withGateway { gateway in
            let item = try await postRental(gateway)
            let stream = StreamID("item", item)
            let (posted, _) = try await gateway.load(stream, .item)
            #expect(gateway.states.state(of: stream, as: ItemState.self) != nil)
            // Every pooled connection cut, as a primary that went away cuts them.
            let admin = try TestDatabase.adminConfiguration().database(gateway.store.pool.configuration.database)
            try await TestDatabase.withPool(admin, size: 1) { admin in
                try await admin.query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
            }
            try await Task.sleep(for: .milliseconds(200))
            // Any load after it (of another stream here) empties the cache.
            _ = try? await gateway.store.headPosition()
            _ = try await gateway.load(StreamID("item", ItemID()), .item)
            #expect(gateway.store.pool.connectionsLost > 0)
            #expect(gateway.states.state(of: stream, as: ItemState.self) == nil, "emptied once a connection was lost")

            // A kept state ahead of the database (its later events lost): the conflict drops it.
            gateway.states.store(posted, version: 7, of: stream)
            let bid = try await placeBid(gateway, on: item, by: UserID())
            #expect(try await gateway.store.readStream(stream).count == 2, "decided on what is there: \(bid)")
        }
    }

    /// Two servers on one database, each keeping the states it folded: what the other wrote
    /// since fails an append on its version, and is read and folded on top, so nothing is
    /// written on a stale state.
    @Test func aKeptStateIsCaughtUpWithWhatAnotherServerWrote() async throws {
        try await withTwoGateways { first, second, pool in
            let item = try await postRental(first)
            #expect(try await first.load(StreamID("item", item), .item).1 == 1)
            let bid = try await placeBid(second, on: item, by: UserID())
            // The first server kept version 1; the bid is folded on top, and approved after it.
            let approved = try await first.handle(.approveBid(bid, today: rulesDay), on: .item, id: item, actor: owner)
            #expect(approved.append != nil)
            let head = 2 + approved.events.count
            #expect(try await first.load(StreamID("item", item), .item).1 == head)
            // The second server kept version 2: a bid on the days booked now is refused.
            let late = try await #require(throws: DomainError.self) { try await placeBid(second, on: item, by: UserID()) }
            #expect(late.code == "dates_unavailable")
            // And a state kept by neither gateway is folded from the log, the same.
            let fresh = CommandGateway(store: EventStore(pool: pool, logger: TestDatabase.logger), logger: TestDatabase.logger)
            let (state, version) = try await fresh.load(StreamID("item", item), .item)
            #expect(version == head)
            #expect(state == (try await first.load(StreamID("item", item), .item).0))
        }
    }

    /// A first attempt decides on the state this server knows, without reading the stream:
    /// a state kept for one stream at its version is taken as it is (here, planted from
    /// another item, so its bid is approved on a stream that never had it). Only the
    /// append's version check stands between a kept state and the log.
    @Test func aKeptStateIsDecidedOnWithoutReadingTheStream() async throws {
        try await withGateway { gateway in
            let other = try await postRental(gateway)
            let bid = try await placeBid(gateway, on: other, by: UserID())
            let (planted, _) = try await gateway.load(StreamID("item", other), .item)
            let item = try await postRental(gateway)
            gateway.states.forget(StreamID("item", item))
            gateway.states.store(planted, version: 1, of: StreamID("item", item))
            let reads = gateway.states.streamsRead.load(ordering: .relaxed)
            let approved = try await gateway.handle(.approveBid(bid, today: rulesDay), on: .item, id: item, actor: owner)
            #expect(approved.append != nil)
            #expect(gateway.states.streamsRead.load(ordering: .relaxed) == reads, "decided without reading")
            let events = try await gateway.store.readStream(StreamID("item", item))
            #expect(events.map(\.type) == ["RentalPosted", "BidApproved", "BookingConfirmed"])
        }
    }

    /// A kept state never refuses a command, nor decides nothing, on its own: the stream is
    /// read and it is decided again. Here another server withdrew the bid this one still
    /// knows as pending, and unblocked the person this one still knows as blocked.
    @Test func aKeptStateNeverRefusesOrDecidesNothingAlone() async throws {
        try await withTwoGateways { first, second, pool in
            let item = try await postRental(first)
            let bidder = UserID()
            let bid = try await placeBid(second, on: item, by: bidder)
            _ = try await first.handle(.withdrawBid(bid), on: .item, id: item, actor: bidder)
            // The second server knows the bid as pending: one bid a bidder would refuse.
            let again = try await placeBid(second, on: item, by: bidder)
            #expect(try await second.load(StreamID("item", item), .item).0.item?.pendingBids.map(\.id) == [again])

            try await first.store.append(
                to: .user(owner), expectedVersion: .noStream,
                events: [try Aggregate.user.codec.encode(.registered(UserRegistered(
                    userID: owner, handle: "owner", displayName: "Owner", email: "owner@example.org", country: "NP")))])
            let pest = UserID()
            _ = try await second.handle(.block(pest), on: .user, id: owner, actor: owner)
            _ = try await first.handle(.unblock(pest), on: .user, id: owner, actor: owner)
            // The second server knows the pest as blocked already: blocking again would be nothing.
            let blocked = try await second.handle(.block(pest), on: .user, id: owner, actor: owner)
            #expect(blocked.append != nil)
            #expect(blocked.state.blocked == [pest])

            // Across streams too: the second server knows the owner as blocking the pest; a bid
            // decided on it would be refused, and the owner's stream is read instead.
            _ = try await first.handle(.unblock(pest), on: .user, id: owner, actor: owner)
            // On a request: no money is held, the pest needs no balance.
            let request = PostRequest(
                title: "Tent", description: "", category: .sports, neededFrom: Day("2026-12-01")!, neededUntil: Day("2026-12-31")!,
                location: here)
            _ = try await first.handle(.postRequest(request, today: rulesDay), on: .item, id: request.itemID, actor: owner)
            let payments = CardPayments(processor: SandboxPaymentProcessor(pool: pool), limits: PaymentLimits(pool: pool), gateway: second)
            let placed = try await Bidding(gateway: second, payments: payments).place(
                PlaceBid(dailyPriceCents: 1400, from: Day("2026-12-05")!, until: Day("2026-12-07")!, isBlockedByOwner: false),
                on: request.itemID, by: pest, today: rulesDay)
            #expect(placed.append != nil)
            // What it wrote is folded in: the next command on the item starts from there.
            let stream = StreamID("item", request.itemID)
            let kept = try #require(second.states.state(of: stream, as: ItemState.self))
            #expect(kept.1 == placed.append?.streamVersions[stream])
            #expect(kept.0.item?.pendingBids.map(\.id).contains(placed.bid) == true)
        }
    }

    /// A state the caller loaded is decided on first; if the stream moved on since, the
    /// append fails on its version and the command is decided again on what is there.
    @Test func aLoadedStateThatIsStaleIsDecidedAgain() async throws {
        try await withGateway { gateway in
            let item = try await postRental(gateway)
            let stale = try await gateway.load(StreamID("item", item), .item)
            let first = try await placeBid(gateway, on: item, by: UserID())
            let bid = PlaceBid(dailyPriceCents: 1300, from: Day("2026-12-08")!, until: Day("2026-12-09")!, payWith: .balance)
            let handled = try await gateway.handle(
                .placeBid(bid, today: rulesDay), on: .item, id: item, actor: UserID(), first: .loaded(stale.0, version: stale.1))
            #expect(handled.append != nil)
            let (state, version) = try await gateway.load(StreamID("item", item), .item)
            #expect(version == 3)
            #expect(state.item?.bids.map(\.id) == [first, bid.bidID])
        }
    }

    @Test func twentyConcurrentBidsAllLand() async throws {
        try await withGateway { gateway in
            let item = try await postRental(gateway)
            let bids = try await withThrowingTaskGroup(of: BidID.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await placeBid(gateway, on: item, by: UserID()) }
                }
                return try await group.reduce(into: Set<BidID>()) { $0.insert($1) }
            }
            #expect(bids.count == 20)
            let (state, version) = try await gateway.load(StreamID("item", item), .item)
            #expect(version == 21)
            #expect(Set(state.item?.pendingBids.map(\.id) ?? []) == bids)
        }
    }

    /// Twenty bids on one rental, over days that overlap and days apart, all approved at
    /// once, five times over: the bookings confirmed never overlap, and every bid not booked
    /// was rejected `dates_taken` by an overlapping one that was. The item's expected version
    /// makes the rule hold: each approval is decided on the bookings before it.
    @Test(arguments: 0..<5) func twentyConcurrentApprovalsNeverBookADayTwice(round: Int) async throws {
        try await withGateway { gateway in
            let item = try await postRental(gateway)
            var bids = [BidID]()
            for index in 0..<20 {
                // Starts two days apart, three or four days long: neighbours overlap, others not.
                let from = Day("2026-12-01")!.adding(days: index * 2)
                let until = from.adding(days: 2 + (index + round) % 2)
                bids.append(try await placeBid(gateway, on: item, by: UserID(), from: from.description, until: until.description))
            }
            let outcomes = await withTaskGroup(of: Result<BidID, DomainError>.self) { group in
                for bid in bids.shuffled() {
                    group.addTask {
                        // Five rounds at once with the rest of the suite: a pool lent out past
                        // its wait is tried again, as a client does after a 503 `busy`.
                        while true {
                            do {
                                _ = try await gateway.handle(.approveBid(bid, today: rulesDay), on: .item, id: item, actor: owner)
                                return .success(bid)
                            } catch let error as DomainError {
                                return .failure(error)
                            } catch let error as PostgresError where error.kind == .poolExhausted {
                                try? await Task.sleep(for: .milliseconds(10))
                            } catch {
                                Issue.record(error, "neither a booking nor a rule's refusal")
                                return .failure(DomainError(.conflict, "unexpected", "\(error)"))
                            }
                        }
                    }
                }
                return await group.reduce(into: [Result<BidID, DomainError>]()) { $0.append($1) }
            }
            let winners = Set(outcomes.compactMap { try? $0.get() })
            #expect(!winners.isEmpty)
            for case .failure(let error) in outcomes {
                #expect(error.code == "bid_not_pending", "a loser's bid was rejected by the winner over its days")
            }
            let (state, _) = try await gateway.load(StreamID("item", item), .item)
            let rental = try #require(state.item)
            #expect(rental.status == .available)
            #expect(Set(rental.bookings.map(\.id)) == winners)
            for (index, booking) in rental.bookings.enumerated() {
                for other in rental.bookings[(index + 1)...] {
                    #expect(!booking.period.overlaps(other.period), "\(booking.period) and \(other.period)")
                }
            }
            for bid in rental.bids where !winners.contains(bid.id) {
                #expect(bid.status == .rejected)
                #expect(bid.reason == "dates_taken")
                let period = Period(from: bid.from, until: bid.until)
                #expect(rental.bookings.contains { $0.period.overlaps(period) }, "rejected only for a booking over its days")
            }
        }
    }

    @Test func aRefusedCommandWritesNothing() async throws {
        try await withGateway { gateway in
            let item = try await postRental(gateway)
            let head = try await gateway.store.headPosition()
            let error = try await #require(throws: DomainError.self) {
                _ = try await gateway.handle(.complete(today: Day("2026-11-28")!), on: .item, id: item, actor: owner)
            }
            #expect(error.code == "not_a_request")
            let notOwner = try await #require(throws: DomainError.self) {
                _ = try await gateway.handle(.withdraw, on: .item, id: item, actor: UserID())
            }
            #expect(notOwner.code == "not_owner")
            #expect(try await gateway.store.headPosition() == head)
        }
    }

    @Test func aNoOpWritesNothing() async throws {
        try await withGateway { gateway in
            let me = UserID()
            let other = UserID()
            _ = try await gateway.handle(
                .register(userID: me, handle: "ada", displayName: "Ada", email: "ada@example.org", password: "correct horse", country: nil),
                on: .user, id: me, actor: me)
            let first = try await gateway.handle(.block(other), on: .user, id: me, actor: me)
            #expect(first.append != nil)
            let again = try await gateway.handle(.block(other), on: .user, id: me, actor: me)
            #expect(again.append == nil)
            #expect(again.state.blocked == [other])
            #expect(try await gateway.store.headPosition() == 2)
        }
    }

    @Test func eventsAreStoredUnderTheirNamesAndReadBack() async throws {
        try await withGateway { gateway in
            let item = try await postRental(gateway)
            let bidder = UserID()
            let bid = try await placeBid(gateway, on: item, by: bidder)
            let stored = try await gateway.store.readStream(StreamID("item", item))
            #expect(stored.map(\.type) == ["RentalPosted", "BidPlaced"])
            #expect(stored.allSatisfy { $0.schemaVersion == 1 })
            let decoded = try Aggregate.item.codec.decode(stored[1])
            let price = RentalPrice(
                dailyPriceCents: 1400, period: Period(from: Day("2026-12-05")!, until: Day("2026-12-07")!), fees: .standard,
                policy: .flexible)
            #expect(decoded == .bidPlaced(BidPlaced(
                bidID: bid, bidderID: bidder, dailyPriceCents: 1400, from: Day("2026-12-05")!, until: Day("2026-12-07")!,
                price: price, hold: RentalHold(method: .balance, amountCents: 4410))))
            #expect(try await gateway.store.verify() == nil)
        }
    }
}
