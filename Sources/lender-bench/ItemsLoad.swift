import ArgumentParser
import Aggregates
import EventStore
import Foundation
import Logging
import Marketplace
import Postgres
import Projections

/// Loads N rentals of one owner scattered over a region: the log, then the views rebuilt
/// from it, as `lender replay` builds them. The market's readers sign up through the server.
/// Every `--booked-every`th rental has three bookings of three days (`bookedDays`), approved
/// bids of one renter, for the market's period filter.
struct ItemsLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load-items",
        abstract: "Load N available rentals, and M fundraising loans, around Kathmandu into a fresh, migrated database.")

    @Option(name: .customLong("database-url"), help: "The database, as its owner.") var databaseURL: String
    @Option var items = 100_000
    @Option var loans = 0
    @Option(help: "Every Nth rental has three bookings (0: none).") var bookedEvery = 0

    func run() async throws {
        var logger = Logger(label: "lender-bench")
        logger.logLevel = .warning
        let configuration = try PostgresConfiguration(databaseURL)
        try await PostgresPool.with(configuration: configuration, options: .init(size: 3), logger: logger) { pool in
            let store = EventStore(pool: pool, logger: logger)
            let owner = UserID()
            _ = try await store.append(
                to: .user(owner), expectedVersion: .noStream,
                events: [try Aggregate.user.codec.encode(.registered(UserRegistered(userID: owner, handle: "bench_owner", displayName: "Owner", email: "owner@example.org")))])
            let renter = UserID()
            _ = try await store.append(
                to: .user(renter), expectedVersion: .noStream,
                events: [try Aggregate.user.codec.encode(.registered(UserRegistered(userID: renter, handle: "bench_renter", displayName: "Renter", email: "renter@example.org")))])
            let today = Day(Date())
            var generator = SystemRandomNumberGenerator()
            var loaded = 0
            let categories = Marketplace.Category.allCases
            while loaded < items {
                var appends = [StreamAppend]()
                for _ in 0..<min(1000, items - loaded) {
                    let item = ItemID()
                    // Within about 300 km of Kathmandu: a market dense near the centre.
                    let location = Location(
                        lat: 27.7172 + Double.random(in: -2.7...2.7, using: &generator),
                        lng: 85.3240 + Double.random(in: -3...3, using: &generator), place: "Nepal")
                    let words = Self.words(loaded)
                    let posted = RentalPosted(
                        itemID: item, ownerID: owner, title: "Item \(loaded) \(words.title)", description: words.description,
                        category: categories[loaded % categories.count], dailyPriceCents: 100 + loaded % 5000, location: location)
                    var events: [ItemEvent] = [.rentalPosted(posted)]
                    if bookedEvery > 0, loaded % bookedEvery == 0 {
                        for period in Self.bookedDays(loaded, today: today) {
                            let bid = BidID()
                            events += [
                                .bidPlaced(BidPlaced(bidID: bid, bidderID: renter, dailyPriceCents: 500, from: period.from, until: period.until)),
                                .bidApproved(BidApproved(bidID: bid)),
                                .bookingConfirmed(
                                    BookingConfirmed(
                                        bookingID: bid, ownerID: owner, renterID: renter, from: period.from, until: period.until,
                                        dailyPriceCents: 500)),
                            ]
                        }
                    }
                    appends.append(
                        StreamAppend(.item(item), expectedVersion: .noStream, events: try events.map(Aggregate.item.codec.encode)))
                    loaded += 1
                }
                _ = try await store.append(appends)
            }
            // Loans of the same owner over the same region, fundraising until two months from now.
            let deadline = Day(Date().addingTimeInterval(60 * 86_400))
            var lent = 0
            while lent < loans {
                var appends = [StreamAppend]()
                for _ in 0..<min(1000, loans - lent) {
                    let loan = LoanID()
                    let location = Location(
                        lat: 27.7172 + Double.random(in: -2.7...2.7, using: &generator),
                        lng: 85.3240 + Double.random(in: -3...3, using: &generator), place: "Nepal")
                    let posted = LoanPosted(
                        loanID: loan, borrowerID: owner, title: "Loan \(lent)", description: "For the loans benchmark",
                        sector: "Retail", activity: "Shop", countryCode: "NP", location: location, amountCents: 100_000,
                        deadline: deadline)
                    appends.append(
                        StreamAppend(.loan(loan), expectedVersion: .noStream, events: [try Aggregate.loan.codec.encode(.posted(posted))]))
                    lent += 1
                }
                _ = try await store.append(appends)
            }
            // The views, from the log, as `lender replay` builds them.
            let rebuilder = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: logger)
            let schema = ViewRebuilder.temporarySchema()
            try await rebuilder.createSchema(schema)
            let built = try await rebuilder.build(schema, after: 0)
            _ = try await rebuilder.swapIn(schema, builtTo: built)
            _ = try await pool.query("ANALYZE items_view")
            _ = try await pool.query("ANALYZE bookings_view")
            _ = try await pool.query("ANALYZE loans_view")
            FileHandle.standardError.write(Data("loaded \(loaded) items and \(lent) loans\n".utf8))
        }
    }

    /// The bookings of the `index`th rental: three of three days, from 10, 45 and 80 days
    /// ahead, shifted by up to 29 days, so that a three-day period 30 days ahead meets about
    /// one booked rental in six.
    /// A title's two words and a description's twelve, drawn by the item's number from a
    /// vocabulary of things people rent (`market_words` searches two of them): each word in
    /// about one title in 57 and one description in 10, so a two-word search finds about one
    /// item in 75, most by their descriptions.
    static func words(_ n: Int) -> (title: String, description: String) {
        var state = UInt64(truncatingIfNeeded: n) &* 0x9E37_79B9_7F4A_7C15 &+ 1
        func next() -> String {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return vocabulary[Int((state &* 0x2545_F491_4F6C_DD1D) >> 33) % vocabulary.count]
        }
        let title = "\(next()) \(next())"
        let description = (0..<12).map { _ in next() }.joined(separator: " ")
        return (title, description.prefix(1).uppercased() + description.dropFirst() + ".")
    }

    static let vocabulary = [
        "drill", "cordless", "ladder", "tent", "camera", "lens", "bike", "mountain", "road", "helmet", "projector",
        "speaker", "guitar", "amplifier", "kayak", "paddle", "saw", "circular", "sander", "mixer", "blender", "oven",
        "grill", "stove", "sleeping", "bag", "backpack", "trekking", "poles", "snowboard", "skis", "boots", "jacket",
        "dress", "suit", "tripod", "drone", "console", "games", "board", "chairs", "table", "trailer", "car", "van",
        "scooter", "lawnmower", "hedge", "trimmer", "pressure", "washer", "vacuum", "cleaner", "carpet", "steam", "iron",
        "sewing", "machine", "heater", "fan", "generator", "solar", "panel", "battery", "charger", "cable", "router",
        "laptop", "tablet", "printer", "scanner", "microphone", "lights", "tools", "hammer", "wrench", "jack", "pump",
        "compressor", "welder", "grinder", "chisel", "level", "measuring", "tape", "wheelbarrow", "shovel", "rake",
        "telescope", "binoculars", "stroller", "crib", "carrier", "party", "speakers", "costume", "wedding", "decor",
        "canopy", "cooler", "hammock", "fishing", "rod", "surfboard", "wetsuit", "harness", "rope",
    ]

    static func bookedDays(_ index: Int, today: Day) -> [Period] {
        [10, 45, 80].map { start in
            let from = today.adding(days: start + index % 30)
            return Period(from: from, until: from.adding(days: 2))
        }
    }
}
