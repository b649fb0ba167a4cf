import ArgumentParser
import Aggregates
import EventStore
import Foundation
import Logging
import Marketplace
import Postgres
import Projections
import Synchronization

/// Loads a generated marketplace history, then rebuilds every view from it and times that.
struct ReplayBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Load N events of a generated marketplace history (if the log is empty), then time a full rebuild of the views.")

    @Option(name: .customLong("database-url"), help: "A fresh, migrated database, as its owner.") var databaseURL: String
    @Option var events = 1_000_000

    static let floorSchema = "bench_floor"

    func run() async throws {
        var logger = Logger(label: "lender-bench")
        logger.logLevel = .warning
        let configuration = try PostgresConfiguration(databaseURL)
        let figures = try await PostgresPool.with(configuration: configuration, options: .init(size: 3), logger: logger) { pool in
            let store = EventStore(pool: pool, logger: logger)
            let clock = ContinuousClock()
            if try await store.headPosition() == 0 {
                let loading = clock.now
                var history = History()
                while history.count < events {
                    let appends = history.nextRound()
                    _ = try await store.append(appends)
                }
                FileHandle.standardError.write(
                    Data("loaded \(history.count) events in \((clock.now - loading).milliseconds / 1000) s\n".utf8))
                // Settled as a log of any age is, before the build is timed: freshly written rows
                // are hinted and vacuumed by their first readers (and by autovacuum, which a
                // million inserts wake), and the COPY baseline reads them after the build.
                _ = try await pool.query("VACUUM (ANALYZE) events")
            }
            let head = try await store.headPosition()
            let rebuilder = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: logger)
            let schema = "bench_replay"
            try await rebuilder.dropSchema(schema)
            try await rebuilder.createSchema(schema)
            let started = clock.now
            let built = try await rebuilder.build(schema, after: 0)
            let seconds = (clock.now - started).milliseconds / 1000
            var figures = ReplayFigures(events: built, seconds: seconds, throughput: Double(built) / seconds, head: head)
            try await maintenance(pool, configuration, logger, rebuilt: schema, builtTo: built, into: &figures)
            // The tables a build starts from (keys and lookups, no other index), left empty for
            // scripts/bench's floor: the views' final rows written into them by COPY.
            try await rebuilder.dropSchema(Self.floorSchema)
            try await rebuilder.createSchema(Self.floorSchema)
            figures.floorSchema = Self.floorSchema
            return figures
        }
        try printFigures(figures)
    }

    /// Maintenance while writers append: the swap of the rebuilt views (appends blocked at
    /// most how long), a quiet spell for comparison, then `replay --verify` (a fresh rebuild
    /// and its comparison with the live views) and the appends' latency meanwhile.
    func maintenance(
        _ pool: PostgresPool, _ configuration: PostgresConfiguration, _ logger: Logger, rebuilt schema: String,
        builtTo built: Int64, into figures: inout ReplayFigures
    ) async throws {
        let rebuilder = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: logger)
        let streams = try await pool.query("SELECT stream_id FROM streams WHERE stream_id LIKE 'user-%' LIMIT 256")
            .map { StreamID(rawValue: try $0.decode(0)) }
        try await PostgresPool.with(configuration: configuration, options: .init(size: 4), logger: logger) { writersPool in
            let store = EventStore(pool: writersPool, logger: logger, projections: ViewGroup.all.flatMap(\.projections))
            let swap = try await AppendProbe.during(store, streams) { try await rebuilder.swapIn(schema, builtTo: built) }
            figures.swapSeconds = swap.seconds
            figures.appendBlockedDuringSwapMs = swap.latencies.last ?? 0
            figures.appendP99DuringSwapMs = swap.latencies.percentile(0.99)
            figures.appendsPerSecondDuringSwap = Double(swap.latencies.count) / swap.seconds

            let quiet = try await AppendProbe.during(store, streams) { try await Task.sleep(for: .seconds(5)) }
            figures.appendP50QuietMs = quiet.latencies.percentile(0.50)
            figures.appendP99QuietMs = quiet.latencies.percentile(0.99)
            figures.appendsPerSecondQuiet = Double(quiet.latencies.count) / quiet.seconds

            let verifying = "bench_verify"
            try await rebuilder.dropSchema(verifying)
            try await rebuilder.createSchema(verifying)
            let verify = try await AppendProbe.during(store, streams) {
                let built = try await rebuilder.build(verifying, after: 0)
                return try await rebuilder.compare(verifying, builtTo: built).differences.count
            }
            try await rebuilder.dropSchema(verifying)
            figures.verifySeconds = verify.seconds
            figures.verifyDifferences = verify.result
            figures.appendP50DuringVerifyMs = verify.latencies.percentile(0.50)
            figures.appendP90DuringVerifyMs = verify.latencies.percentile(0.90)
            figures.appendP99DuringVerifyMs = verify.latencies.percentile(0.99)
            figures.appendsPerSecondDuringVerify = Double(verify.latencies.count) / verify.seconds
        }
    }
}

/// Writers appending one small event at a time (a profile update, through the inline views)
/// while `body` runs: each append's latency, sorted, and how long `body` took.
enum AppendProbe {
    static func during<T: Sendable>(
        _ store: EventStore, _ streams: [StreamID], writers: Int = 4, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> (result: T, latencies: [Double], seconds: Double) {
        let event = try Aggregate.user.codec.encode(.profileUpdated(ProfileUpdated(defaultShareCents: 5000)))
        let running = Running()
        let clock = ContinuousClock()
        return try await withThrowingTaskGroup(of: [Double].self) { group in
            for writer in 0..<writers {
                group.addTask {
                    var latencies = [Double]()
                    var index = writer
                    while running.isOn {
                        let begin = clock.now
                        try await store.append(to: streams[index % streams.count], expectedVersion: .any, events: [event])
                        latencies.append((clock.now - begin).milliseconds)
                        index += writers
                    }
                    return latencies
                }
            }
            let started = clock.now
            let result: T
            do {
                result = try await body()
            } catch {
                running.stop()
                throw error
            }
            let seconds = (clock.now - started).milliseconds / 1000
            running.stop()
            let latencies = try await group.reduce(into: [Double]()) { $0 += $1 }.sorted()
            return (result, latencies, seconds)
        }
    }

    final class Running: Sendable {
        private let on = Atomic(true)
        var isOn: Bool { on.load(ordering: .relaxed) }
        func stop() { on.store(false, ordering: .relaxed) }
    }
}

struct ReplayFigures: Codable {
    var events: Int64
    var seconds: Double
    var throughput: Double
    var head: Int64
    var swapSeconds = 0.0
    /// The longest an append waited while the rebuilt views were swapped in.
    var appendBlockedDuringSwapMs = 0.0
    var appendP99DuringSwapMs = 0.0
    var appendsPerSecondDuringSwap = 0.0
    var appendP50QuietMs = 0.0
    var appendP99QuietMs = 0.0
    var appendsPerSecondQuiet = 0.0
    var verifySeconds = 0.0
    var verifyDifferences = 0
    var appendP50DuringVerifyMs = 0.0
    var appendP90DuringVerifyMs = 0.0
    var appendP99DuringVerifyMs = 0.0
    var appendsPerSecondDuringVerify = 0.0
    /// Empty copies of the views as a build starts them, for the floor scripts/bench measures.
    var floorSchema = ""
}

/// A plausible marketplace, round by round: new users with cards and deposits, rentals and
/// requests with bids, approvals, completions and relistings, loans filled by carts and
/// checkouts, and repayments. Each round is one append of many streams.
struct History {
    var count = 0
    var round = 0
    var users: [UserID] = []

    static let places = [
        Location(lat: 27.7172, lng: 85.3240, place: "Kathmandu"), Location(lat: 28.2096, lng: 83.9856, place: "Pokhara"),
        Location(lat: -1.2921, lng: 36.8219, place: "Nairobi"), Location(lat: 51.5072, lng: -0.1276, place: "London"),
    ]

    mutating func nextRound() -> [StreamAppend] {
        round += 1
        var appends = [StreamAppend]()
        var index = [StreamID: Int]()
        // One entry per stream: a stream may appear once in an append.
        func add(_ stream: StreamID, _ events: [NewEvent]) {
            if let at = index[stream] { appends[at].events += events } else {
                index[stream] = appends.count
                appends.append(StreamAppend(stream, expectedVersion: .any, events: events))
            }
            count += events.count
        }
        // 20 users a round: registered, a profile, a card and a deposit.
        var fresh = [UserID]()
        for index in 0..<20 {
            let user = UserID()
            fresh.append(user)
            let handle = "u\(round)_\(index)"
            let card = CardOnFile(
                cardID: CardID(), network: .visa, last4: "4242", expMonth: 12, expYear: 2030,
                fingerprint: String(repeating: "ab", count: 32), processorToken: "tok_sandbox_\(handle)")
            add(
                .user(user),
                try! [
                    .registered(UserRegistered(userID: user, handle: handle, displayName: "User \(handle)", email: "\(handle)@example.org", country: "NP")),
                    .profileUpdated(ProfileUpdated(defaultShareCents: 5000)),
                    .cardAdded(card),
                    .fundsDeposited(FundsDeposited(amountCents: 100_000, cardID: card.cardID, chargeID: "ch_\(handle)")),
                ].map(Aggregate.user.codec.encode))
        }
        users += fresh
        let from = Day(year: 2026, month: 12, day: 1)!
        let until = Day(year: 2026, month: 12, day: 20)!
        // 20 rentals a round, each with 4 bids, one approved and the others rejected; closed, relisted.
        for index in 0..<20 {
            let owner = fresh[index]
            let item = ItemID()
            var events: [ItemEvent] = [
                .rentalPosted(
                    RentalPosted(
                        itemID: item, ownerID: owner, title: "Road bike \(round)-\(index)", description: "Serviced, with lights",
                        category: .bikes, dailyPriceCents: 1500, location: Self.places[index % 4], availableFrom: from,
                        availableUntil: until))
            ]
            let bids = (1...4).map { offset in (BidID(), fresh[(index + offset) % fresh.count]) }
            for (bid, bidder) in bids {
                events.append(
                    .bidPlaced(BidPlaced(bidID: bid, bidderID: bidder, dailyPriceCents: 1400, from: from, until: until, message: "Please")))
            }
            events.append(.bidApproved(BidApproved(bidID: bids[0].0)))
            events.append(.reserved(ItemReserved(bidID: bids[0].0, bidderID: bids[0].1)))
            for (bid, _) in bids.dropFirst() { events.append(.bidRejected(BidRejected(bidID: bid, reason: "another_bid_approved"))) }
            events.append(.closed(ItemClosed()))
            events.append(.relisted(ItemRelisted()))
            add(.item(item), try! events.map(Aggregate.item.codec.encode))
        }
        // 5 loans a round, each funded by four lenders through their carts, then a repayment.
        for index in 0..<5 {
            let borrower = fresh[index]
            let loan = LoanID()
            let lenders = (1...4).map { fresh[(index * 4 + $0) % fresh.count] }
            var loanEvents: [LoanEvent] = [
                .posted(
                    LoanPosted(
                        loanID: loan, borrowerID: borrower, title: "Sewing machine \(round)-\(index)", description: "For the workshop",
                        sector: "Manufacturing", activity: "Tailoring", countryCode: "NP", location: Self.places[index % 4],
                        amountCents: 20_000, deadline: until))
            ]
            for lender in lenders {
                add(
                    .cart(of: lender),
                    try! [
                        .itemAdded(CartItemAdded(loanID: loan, amountCents: 5000)),
                        .checkedOut(CartCheckedOut(purchases: [LoanAmount(loanID: loan, amountCents: 5000)], totalCents: 5000, paidWith: "balance")),
                    ].map(Aggregate.cart.codec.encode))
                add(.user(lender), try! [UserEvent.balanceDebited(BalanceDebited(amountCents: 5000))].map(Aggregate.user.codec.encode))
                loanEvents.append(.sharePurchased(LoanSharePurchased(lenderID: lender, amountCents: 5000)))
            }
            loanEvents.append(.funded(LoanFunded()))
            let credits = LoanDecider.split(1000, over: lenders.map { LenderAmount(lenderID: $0, amountCents: 5000) })
            loanEvents.append(.repaymentRecorded(LoanRepaymentRecorded(amountCents: 1000, credits: credits)))
            add(.loan(loan), try! loanEvents.map(Aggregate.loan.codec.encode))
        }
        return appends
    }
}
