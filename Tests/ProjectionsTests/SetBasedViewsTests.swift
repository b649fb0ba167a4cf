import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres
@testable import Projections
import Testing
import TestSupport

/// The projections write a batch set-based (`WritePlan`): one statement per shape of write
/// and step. A history whose items interleave event by event, with every kind of item event,
/// a user forgotten halfway, loans and carts, built in one batch must make exactly the views
/// it makes one event at a time. The one-at-a-time build applies events as appends do
/// (`apply`, after its first event), so the rebuild's way (`rebuild`, then `finishRebuild`:
/// the market's cells made at the end; the feed's notices, the users and their cards, the
/// items and the bids, the loans, their shares and the countries' counts worked out in memory
/// and sent by `COPY`) is held to the appends' way too, in one batch and in many.
@Suite("Views written set-based")
struct SetBasedViewsTests {
    /// A rebuild's tables start empty: a generic plan made then is one for empty tables, kept
    /// as they grow (a build of 1.08M events in batches of 1,500 took twice as long for it).
    /// Its writes are planned with each batch's values, even where the database's sessions
    /// are set to the worst case, a generic plan always, as they are here.
    @Test func aRebuildPlansItsWritesWithEachBatchsValues() async throws {
        try await TestDatabase.withMigrated { configuration in
            let name = "\"" + configuration.database.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            try await TestDatabase.withPool(try TestDatabase.adminConfiguration().database(configuration.database), size: 1) {
                try await $0.query("ALTER DATABASE \(unsafeRaw: name) SET plan_cache_mode = force_generic_plan")
            }
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger)
                let events = try await InterleavedHistory().append(to: store)
                var rebuilder = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: TestDatabase.logger)
                rebuilder.batchSize = 20
                try await rebuilder.createSchema("planned")
                #expect(try await rebuilder.build("planned", after: 0) == Int64(events))
                // Both of the pool's sessions: one wrote each batch while the other read and
                // recorded the next.
                let plans = try await pool.withConnection { first in
                    try await pool.withConnection { second in
                        var plans = (custom: 0, generic: 0)
                        for connection in [first, second] {
                            let row = try await connection.query(
                                """
                                SELECT coalesce(sum(custom_plans), 0)::int AS custom, coalesce(sum(generic_plans), 0)::int AS generic
                                FROM pg_prepared_statements WHERE statement ~ '^\\s*(INSERT|UPDATE|DELETE|WITH)'
                                """
                            ).single()
                            plans.custom += try row.decode("custom", as: Int.self)
                            plans.generic += try row.decode("generic", as: Int.self)
                        }
                        return plans
                    }
                }
                // Users, loans, items and bids are held to the build's end: the rest of the writes.
                #expect(plans.custom > 20, "the writes of \(events / 20 + 1) batches")
                #expect(plans.generic == 0)
                // Inside a longer transaction (a swap's, a comparison's), the mode before comes back.
                try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        try session.withTransaction { session in
                            _ = try session.query("SET LOCAL plan_cache_mode = auto")
                            try ViewRebuilder.inSchema("planned", &session) { session in
                                let inside = try session.query("SELECT current_setting('plan_cache_mode') AS mode").single()
                                #expect(try inside.decode("mode", as: String.self) == "force_custom_plan")
                            }
                            let after = try session.query("SELECT current_setting('plan_cache_mode') AS mode").single()
                            #expect(try after.decode("mode", as: String.self) == "auto")
                        }
                    }
                }
            }
        }
    }

    /// A build whose writing fails, with a batch being read and another recorded meanwhile,
    /// throws that error and holds no connection after. (That it waits for those two before
    /// throwing is not seen here: they end within a millisecond of the failure.)
    @Test func aBuildWhoseWritingFailsThrowsAndHoldsNoConnection() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 3) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger)
                let events = try await InterleavedHistory().append(to: store)
                var rebuilder = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: TestDatabase.logger)
                rebuilder.batchSize = 7
                try await rebuilder.createSchema("broken")
                // Every message refused, mid-history (a dropped table is refused before the
                // build starts: `aBuildIntoASchemaLackingATableWritesNothing`).
                try await pool.query("ALTER TABLE broken.messages_view ADD CHECK (text = '')")
                await #expect(throws: PostgresError.self) { try await rebuilder.build("broken", after: 0) }
                #expect(pool.usage.inUse == 0, "\(pool.usage.inUse) connections still held after \(events) events")
            }
        }
    }

    /// The batches' `search_path` is the build's schema, then `public`: a table missing from
    /// the schema would be found among the live views and written. A build refuses such a
    /// schema before it writes anything.
    @Test func aBuildIntoASchemaLackingATableWritesNothing() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 3) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger)
                _ = try await InterleavedHistory().append(to: store)
                let rebuilder = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: TestDatabase.logger)
                try await rebuilder.createSchema("partial")
                try await pool.query("DROP TABLE partial.messages_view")
                let live = "SELECT count(*)::int AS n FROM public.messages_view"
                // The history was appended without the inline projections: the live views are empty.
                let before = try await pool.query(PostgresQuery(unsafeSQL: live)).single().decode("n", as: Int.self)
                await #expect(throws: RebuildError.self) { try await rebuilder.build("partial", after: 0) }
                #expect(try await pool.query(PostgresQuery(unsafeSQL: live)).single().decode("n", as: Int.self) == before)
                let written = try await pool.query("SELECT count(*)::int AS n FROM partial.items_view").single()
                #expect(try written.decode("n", as: Int.self) == 0)
            }
        }
    }

    /// A build copies a bid at its fate; fates after that (which the deciders refuse) are
    /// written as the appends write them, the last one standing, however many a batch holds.
    @Test func aBuildKeepsTheLastOfABidsLateFates() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 3) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger)
                let (owner, item, bid) = (UserID(), ItemID(), BidID())
                let day = Day(year: 2026, month: 12, day: 1)!
                _ = try await store.append([
                    StreamAppend(
                        .user(owner), expectedVersion: .any,
                        events: [
                            try Aggregate.user.codec.encode(
                                .registered(UserRegistered(userID: owner, handle: "o", displayName: "O", email: "o@example.org")))
                        ]),
                    StreamAppend(
                        .item(item), expectedVersion: .any,
                        events: try [
                            .rentalPosted(
                                RentalPosted(
                                    itemID: item, ownerID: owner, title: "Drill", description: "", category: .tools, dailyPriceCents: 500,
                                    location: Location(lat: 1, lng: 2, place: "Here"), availableFrom: nil, availableUntil: nil)),
                            .bidPlaced(BidPlaced(bidID: bid, bidderID: UserID(), dailyPriceCents: 500, from: day, until: day, message: nil)),
                            .bidApproved(BidApproved(bidID: bid)),
                            .bidRejected(BidRejected(bidID: bid, reason: "first")),
                            .bidWithdrawn(BidWithdrawn(bidID: bid)),
                        ].map(Aggregate.item.codec.encode)),
                ])
                var rebuilder = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: TestDatabase.logger)
                // The approval's batch copies the bid; the next holds both late fates.
                rebuilder.batchSize = 4
                try await rebuilder.createSchema("late")
                #expect(try await rebuilder.build("late", after: 0) == 6)
                let row = try await pool.query("SELECT status, reason FROM late.bids_view").single()
                #expect(try row.decode("status", as: String.self) == "withdrawn")
                #expect(try row.decode("reason", as: String?.self) == nil)
            }
        }
    }

    @Test func oneBatchMakesTheViewsThatOneEventAtATimeMakes() async throws {
        try await TestDatabase.withMigrated { configuration in
            // Three connections, as `lender replay` opens: a batch is read and decoded while the
            // one before it is recorded and the one before that sent.
            try await TestDatabase.withPool(configuration, size: 3) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger)
                let events = try await InterleavedHistory().append(to: store)
                #expect(events > 150)

                var oneByOne = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: TestDatabase.logger)
                oneByOne.batchSize = 1
                let together = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: TestDatabase.logger)
                #expect(together.batchSize >= events, "the whole history in one batch")
                // A build from the first event in batches of seven: what the rebuild keeps in
                // memory from one batch to the next (a bid's fate after its placing, a
                // lender's news, a person forgotten after their notices) is held too.
                var inBatches = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: TestDatabase.logger)
                inBatches.batchSize = 7
                // The appends' way in batches of seven, as a group commit folds several
                // commands' events together: rows read once, folded over many events.
                var appendedInBatches = ViewRebuilder(pool: pool, groups: ViewGroup.all, logger: TestDatabase.logger)
                appendedInBatches.batchSize = 7
                try await oneByOne.createSchema("one_by_one")
                try await appendedInBatches.createSchema("appended_in_batches")
                try await together.createSchema("together")
                try await inBatches.createSchema("in_batches")
                #expect(try await oneByOne.build("one_by_one", after: 0, until: 1) == 1)
                #expect(try await oneByOne.build("one_by_one", after: 1) == Int64(events))
                #expect(try await together.build("together", after: 0) == Int64(events))
                #expect(try await inBatches.build("in_batches", after: 0) == Int64(events))
                #expect(try await appendedInBatches.build("appended_in_batches", after: 0, until: 1) == 1)
                #expect(try await appendedInBatches.build("appended_in_batches", after: 1) == Int64(events))

                for built in ["together", "in_batches", "appended_in_batches"] {
                    for table in ViewGroup.all.flatMap(\.tables) {
                        let rows = try await pool.query("SELECT count(*) AS n FROM one_by_one.\(unsafeRaw: table)").single()
                            .decode("n", as: Int.self)
                        let differing = try await pool.query(
                            """
                            SELECT count(*) AS n FROM (
                                (SELECT to_jsonb(t)::text FROM one_by_one.\(unsafeRaw: table) t
                                 EXCEPT ALL SELECT to_jsonb(t)::text FROM \(unsafeRaw: built).\(unsafeRaw: table) t)
                                UNION ALL
                                (SELECT to_jsonb(t)::text FROM \(unsafeRaw: built).\(unsafeRaw: table) t
                                 EXCEPT ALL SELECT to_jsonb(t)::text FROM one_by_one.\(unsafeRaw: table) t)
                            ) d
                            """
                        ).single().decode("n", as: Int.self)
                        #expect(differing == 0, "\(built).\(table): \(differing) rows differ of \(rows)")
                    }
                }
                // Not an empty comparison: the chains' ends are there.
                let items = try await pool.query(
                    "SELECT status, count(*)::int AS n FROM together.items_view GROUP BY status ORDER BY status"
                ).map { "\(try $0.decode("status", as: String.self)) \(try $0.decode("n", as: Int.self))" }
                // A second release's history: its rentals reserved and closed whole read as
                // bookings of the approved bids' days, and never left the market.
                #expect(items == ["available 8", "withdrawn 2"])
                let bookings = try await pool.query(
                    "SELECT status, count(*)::int AS n FROM together.bookings_view GROUP BY status ORDER BY status"
                ).map { "\(try $0.decode("status", as: String.self)) \(try $0.decode("n", as: Int.self))" }
                #expect(bookings == ["cancelled 1", "completed 12", "confirmed 1"], "one for each closing, and five booked by date")
                // Each way a booking by date ended, as the fold left it: pinned, since the appends
                // and a build share the fold.
                let dated = try await pool.query(
                    """
                    SELECT string_agg(concat_ws(' ', status, reminded, reviews_closed, refund_cents, settled_payout_cents,
                                                settled_fees_cents, b.deposit_cents, deposit_status, claim_cents, claim_text,
                                                dispute_status, dispute_text, resolution_renter_cents, resolution_owner_cents,
                                                resolution, p.charge_cents), ' | ' ORDER BY b.position) AS b
                    FROM together.bookings_view b LEFT JOIN together.rental_prices_view p ON p.bid_id = b.booking_id
                    WHERE b.deposit_cents IS NOT NULL OR p.bid_id IS NOT NULL
                    """
                ).single().decode("b", as: String.self)
                #expect(
                    dated == [
                        "cancelled t f 8150 135 15 5000 held 3150", "completed f t 2700 450 3150",
                        "completed f f 2700 450 5000 divided 2000 Scratched resolved [removed] 4000 1000 Split 3150",
                        "completed f f 3000 held 500 [removed]", "completed f f 3000 released",
                    ].joined(separator: " | "))
                let closed = try await pool.query(
                    "SELECT string_agg(concat_ws(' ', from_day, until_day), ', ' ORDER BY from_day) AS d FROM together.blackouts_view"
                ).single().decode("d", as: String?.self)
                #expect(closed == "2026-12-20 2026-12-20", "one kept of four added")
                // The forgotten owner's shed: its place, texts and photos gone (issue 48).
                let shed = try await pool.query(
                    "SELECT owner_handle, place, lat, description, photos FROM together.items_view WHERE title = '[removed]'"
                ).single()
                #expect(try shed.decode("owner_handle", as: String.self) == "former user")
                #expect(try shed.decode("place", as: String.self) == "[removed]" && shed.decode("lat", as: Double.self) == 0)
                #expect(try shed.decode("description", as: String.self) == "[removed]")
                // The photo from before the forgetting is gone; the one after, a made-up event, stays.
                #expect(try shed.decode("photos", as: [String].self) == [String(repeating: "e", count: 64)])
                let reports = try await pool.query(
                    "SELECT status || ' ' || coalesce(text, '-') AS r FROM together.reports_view ORDER BY filed_position"
                ).map { try $0.decode("r", as: String.self) }
                #expect(reports == ["resolved Cheap", "open -", "open [removed]"], "\(reports)")
                let deals = try await pool.query("SELECT sum(completed_deals)::int AS n FROM together.users_view").single()
                let dealt = try deals.decode("n", as: Int.self)
                #expect(dealt == 23, "two for each of seven closings and four bookings by date, one for the owner who rented their own")
                let bids = try await pool.query(
                    "SELECT status, count(*)::int AS n FROM together.bids_view GROUP BY status ORDER BY status"
                ).map { "\(try $0.decode("status", as: String.self)) \(try $0.decode("n", as: Int.self))" }
                #expect(bids == ["approved 9", "pending 4", "rejected 9", "withdrawn 8"], "three of them paid, and booked")
                let cells = try await pool.query("SELECT coalesce(sum(count), 0)::int AS n FROM together.market_cells WHERE level = 4")
                    .single()
                #expect(try cells.decode("n", as: Int.self) == 8, "the available items, each in one cell a level")
                let loans = try await pool.query(
                    "SELECT status || ' ' || lender_count || ' ' || funded_cents AS l FROM together.loans_view ORDER BY 1"
                ).map { try $0.decode("l", as: String.self) }
                #expect(loans == ["expired 1 7500", "fundraising 2 1000", "repaid 4 20000", "repaid 4 20000", "repaying 1 5000"])
                let kiln = try await pool.query(
                    "SELECT place, description, photos FROM together.loans_view WHERE title = '[removed]'").single()
                #expect(try kiln.decode("place", as: String.self) == "[removed]" && kiln.decode("photos", as: [String].self) == [])
                #expect(try kiln.decode("description", as: String.self) == "[removed]")
                let seeds = try await pool.query("SELECT photos FROM together.loans_view WHERE title = 'Seeds'").single()
                #expect(try seeds.decode("photos", as: [String].self) == [String(repeating: "a", count: 64)])
                let news = try await pool.query(
                    "SELECT kind || ' ' || count(*) AS k FROM together.feed_view WHERE loan_id IS NOT NULL GROUP BY kind ORDER BY 1"
                ).map { try $0.decode("k", as: String.self) }
                #expect(news == ["loan_expired 1", "loan_funded 5", "loan_repaid 6"], "the forgotten lender hears nothing")
                // Each notice to whom it concerns: a bid to the item's owner, its fate to its bidder.
                let notices = try await pool.query(
                    "SELECT kind || ' ' || count(*) AS k FROM together.feed_view WHERE loan_id IS NULL GROUP BY kind ORDER BY 1"
                ).map { try $0.decode("k", as: String.self) }
                #expect(
                    notices == [
                        "bid_approved 7", "bid_received 24", "bid_rejected 6", "booking_cancelled 1", "booking_confirmed 4",
                        "booking_disputed 2", "booking_starts_tomorrow 2", "dispute_resolved 1", "message_received 6", "payout_sent 1",
                        "review_received 12", "review_wanted 5",
                    ],
                    "\(notices)")
                let misdirected = try await pool.query(
                    """
                    SELECT count(*)::int AS n FROM together.feed_view f
                    LEFT JOIN together.items_view i ON i.item_id = f.item_id LEFT JOIN together.bids_view b ON b.bid_id = f.bid_id
                    WHERE (f.kind = 'bid_received' AND f.user_id IS DISTINCT FROM i.owner_id)
                       OR (f.kind IN ('bid_approved', 'bid_rejected') AND f.user_id IS DISTINCT FROM b.bidder_id)
                    """
                ).single().decode("n", as: Int.self)
                #expect(misdirected == 0)
                let countries = try await pool.query(
                    "SELECT country_code || ' ' || fundraising_loans AS c FROM together.country_loans_view ORDER BY 1"
                ).map { try $0.decode("c", as: String.self) }
                #expect(countries == ["KE 0", "NP 1"])
                let lines = try await pool.query("SELECT amount_cents FROM together.cart_lines_view ORDER BY 1").map { try $0.decode(0, as: Int.self) }
                #expect(lines == [1000, 3000], "one line left in the cart cleared before it, one added twice and changed")
                let suspended = try await pool.query("SELECT string_agg(reason, ', ') AS r FROM together.suspensions_view").single()
                    .decode("r", as: String?.self)
                #expect(suspended == "Spam again", "one replaced, one reinstated, one forgotten")
                let cards = try await pool.query("SELECT exp_month FROM together.cards_view ORDER BY exp_month").map { try $0.decode(0, as: Int.self) }
                #expect(cards == [3, 6, 12, 12, 12], "one removed and added again, one changed twice; the forgotten user's taken away")
                let profiles = try await pool.query(
                    "SELECT handle || ' ' || display_name || ' ' || coalesce(country, '-') || ' ' || (photo IS NOT NULL) AS p FROM together.users_view WHERE handle IN ('u1', 'u2', 'u3') ORDER BY 1"
                ).map { try $0.decode("p", as: String.self) }
                #expect(profiles == ["u1 Una GB true", "u2 User 2 NP true", "u3 former user - false"])
                let money = try await pool.query(
                    "SELECT handle || ' ' || balance_cents || ' ' || held_cents AS m FROM together.users_view ORDER BY handle"
                ).map { try $0.decode("m", as: String.self) }
                // Each deposit of 100,000, less 5,000 for each share bought from the balance; u0's
                // three payouts of 1,000 out of it, the failed one back.
                #expect(money == ["late 0 0", "u0 98000 0", "u1 100000 0", "u2 95000 0", "u3 90000 0", "u4 95000 0", "u5 90000 0"])
                let payouts = try await pool.query(
                    "SELECT status || ' ' || coalesce(transfer_id, reason, '-') AS p FROM together.payouts_view ORDER BY position"
                ).map { try $0.decode("p", as: String.self) }
                #expect(payouts == ["sent tr_1", "failed account_closed", "pending -"])
                // The fold's tallies, pinned: the appends and a build share it, so only these
                // catch a wrong one (a bid counted twice, a hidden review still counted).
                let ratings = try await pool.query(
                    "SELECT sum(review_count) || ' ' || sum(review_stars) AS r FROM together.users_view").single()
                let rated = try ratings.decode("r", as: String.self)
                #expect(rated == "13 59", "users' ratings")
                let tallies = try await pool.query(
                    """
                    SELECT sum(bid_count) || ' ' || sum(review_count) || ' ' || sum(review_stars) || ' '
                           || count(deal_bidder_id) || ' ' || sum(cardinality(photos)) AS t
                    FROM together.items_view
                    """
                ).single()
                let tallied = try tallies.decode("t", as: String.self)
                #expect(tallied == "30 6 24 2 3", "bids, ratings, deals and photos of the items")
            }
        }
    }
}

/// Four owners' items, each event of each item appended in turn with the others' (so every
/// item's chain of conflicts runs beside the others'), two rounds of deals, a user forgotten
/// between them, and loans with carts.
struct InterleavedHistory {
    let users = (0..<6).map { _ in UserID() }
    let from = Day(year: 2026, month: 12, day: 1)!
    let until = Day(year: 2026, month: 12, day: 20)!
    let places = [
        Location(lat: 27.7172, lng: 85.3240, place: "Kathmandu"), Location(lat: 28.2096, lng: 83.9856, place: "Pokhara"),
        Location(lat: -1.2921, lng: 36.8219, place: "Nairobi"), Location(lat: 51.5072, lng: -0.1276, place: "London"),
    ]
    /// This release's bookings by date: none in a second release's log (`UpgradeTests`).
    var bookingsByDate = true

    /// Appends the history, one stream's step at a time; returns how many events it made.
    func append(to store: EventStore) async throws -> Int {
        var count = 0
        func add(_ stream: StreamID, _ events: [NewEvent]) async throws {
            _ = try await store.append([StreamAppend(stream, expectedVersion: .any, events: events)])
            count += events.count
        }
        func item(_ id: ItemID, _ event: ItemEvent) async throws { try await add(.item(id), [try Aggregate.item.codec.encode(event)]) }
        func rental(_ id: ItemID, by owner: UserID, _ title: String, cents: Int, at place: Location) async throws {
            try await item(
                id,
                .rentalPosted(
                    RentalPosted(
                        itemID: id, ownerID: owner, title: title, description: "Fine", category: .tools, dailyPriceCents: cents,
                        location: place, availableFrom: from, availableUntil: until)))
        }

        var cards = [CardID]()
        for (index, user) in users.enumerated() {
            let card = CardOnFile(
                cardID: CardID(), network: .visa, last4: "424\(index)", expMonth: 12, expYear: 2030,
                fingerprint: String(repeating: "ab", count: 32), processorToken: "tok_\(index)")
            cards.append(card.cardID)
            try await add(
                .user(user),
                try [
                    .registered(
                        UserRegistered(
                            userID: user, handle: "u\(index)", displayName: "User \(index)", email: "u\(index)@example.org", country: "NP")),
                    .profileUpdated(ProfileUpdated(defaultShareCents: 5000)),
                    .cardAdded(card),
                    .fundsDeposited(FundsDeposited(amountCents: 100_000, cardID: card.cardID, chargeID: "ch_\(index)")),
                ].map(Aggregate.user.codec.encode))
        }
        // Payouts asked for now and settled at the history's end: one sent, one failed, one
        // still pending.
        let payouts = (sent: PayoutID(), failed: PayoutID(), pending: PayoutID())
        for payout in [payouts.sent, payouts.failed, payouts.pending] {
            try await add(
                .user(users[0]),
                [
                    try Aggregate.user.codec.encode(
                        .payoutRequested(
                            PayoutRequested(
                                payoutID: payout, amountCents: 1_000, requestedAt: Date(timeIntervalSince1970: 1_800_000_000),
                                token: "ba_test_1")))
                ])
        }
        // Suspensions: one replaced by a later one, one ended by a reinstatement, one by the
        // forgetting of its user below.
        let operatorID = users[0]
        for (user, event) in [
            (users[2], UserEvent.suspended(UserSuspended(operatorID: operatorID, reason: "Spam", until: nil))),
            (users[3], .suspended(UserSuspended(operatorID: operatorID, reason: "Fraud", until: nil))),
            (users[4], .suspended(UserSuspended(operatorID: operatorID, reason: "Rude", until: nil))),
            (users[2], .suspended(UserSuspended(operatorID: operatorID, reason: "Spam again", until: Date(timeIntervalSince1970: 1_900_000_000)))),
            (users[4], .reinstated(UserReinstated(operatorID: operatorID, reason: "Sorry"))),
        ] {
            try await add(.user(user), [try Aggregate.user.codec.encode(event)])
        }
        // A card's expiry changed, then removed; another's changed twice. Photos set, taken
        // away and set again; a profile changed in part, then in another part; the photo of
        // someone forgotten later.
        let face = String(repeating: "cd", count: 32)
        for (user, events) in [
            (users[1], [UserEvent.photoChanged(ProfilePhotoChanged(digest: face))]),
            (users[2], [.photoChanged(ProfilePhotoChanged(digest: face)), .photoChanged(ProfilePhotoChanged(digest: nil))]),
            (users[1], [.profileUpdated(ProfileUpdated(displayName: "Una", country: "KE"))]),
            (users[2], [.photoChanged(ProfilePhotoChanged(digest: face))]),
            (users[1], [.profileUpdated(ProfileUpdated(country: "GB"))]),
            (users[3], [.photoChanged(ProfilePhotoChanged(digest: face))]),
            (users[0], [.cardExpiryUpdated(PaymentCardExpiryUpdated(cardID: cards[0], expMonth: 1, expYear: 2031))]),
            (users[1], [.cardExpiryUpdated(PaymentCardExpiryUpdated(cardID: cards[1], expMonth: 2, expYear: 2032))]),
            (users[0], [.cardRemoved(PaymentCardRemoved(cardID: cards[0]))]),
            (users[1], [.cardExpiryUpdated(PaymentCardExpiryUpdated(cardID: cards[1], expMonth: 3, expYear: 2033))]),
        ] {
            try await add(.user(user), try events.map(Aggregate.user.codec.encode))
        }
        let items = (0..<4).map { _ in ItemID() }
        let owners = (0..<4).map { users[$0] }
        // Step by step, each item in turn.
        for (index, id) in items.enumerated() {
            try await rental(id, by: owners[index], "Thing \(index)", cents: 1000 + index, at: places[index])
        }
        for round in 0..<2 {
            if round == 1 {
                // Forgotten between the rounds: the owner of item 3, who bid on others in round 0.
                try await add(.user(users[3]), [try Aggregate.user.codec.encode(.forgotten(UserForgotten(userID: users[3])))])
            }
            var bids = [[(BidID, UserID)]]()
            for (index, id) in items.enumerated() {
                // Three bidders on each item, the others' owners and a sixth user.
                let bidders = [users[(index + 1) % 4], users[(index + 2) % 4], users[4 + round]]
                bids.append(bidders.map { (BidID(), $0) })
            }
            for slot in 0..<3 {
                for (index, id) in items.enumerated() {
                    let (bid, bidder) = bids[index][slot]
                    try await item(
                        id,
                        .bidPlaced(
                            BidPlaced(bidID: bid, bidderID: bidder, dailyPriceCents: 900, from: from, until: until, message: "Please \(slot)")))
                }
            }
            for (index, id) in items.enumerated() { try await item(id, .bidWithdrawn(BidWithdrawn(bidID: bids[index][2].0))) }
            for (index, id) in items.enumerated() { try await item(id, .bidApproved(BidApproved(bidID: bids[index][0].0))) }
            for (index, id) in items.enumerated() {
                try await item(id, .reserved(ItemReserved(bidID: bids[index][0].0, bidderID: bids[index][0].1)))
            }
            for (index, id) in items.enumerated() {
                try await item(id, .bidRejected(BidRejected(bidID: bids[index][1].0, reason: "another_bid_approved")))
            }
            for (index, id) in items.enumerated() {
                try await item(
                    id,
                    .messageSent(
                        MessageSent(
                            messageID: MessageID(), bidID: bids[index][0].0, authorID: bids[index][0].1, recipientID: owners[index],
                            text: "When?")))
            }
            // Item 3 stays reserved in the second round; the others close and relist.
            for (index, id) in items.enumerated() where !(round == 1 && index == 3) { try await item(id, .closed(ItemClosed())) }
            for (index, id) in items.enumerated() where !(round == 1 && index == 3) {
                let (bid, bidder) = bids[index][0]
                try await item(
                    id,
                    .reviewWritten(ReviewWritten(bidID: bid, authorID: bidder, subjectID: owners[index], role: .bidder, stars: 4, text: "Good")))
                try await item(
                    id,
                    .reviewWritten(ReviewWritten(bidID: bid, authorID: owners[index], subjectID: bidder, role: .owner, stars: 5, text: "Kind")))
            }
            // An operator hides the first item's renter review of the first round: out of its
            // owner's and its item's ratings (SPEC §12.5).
            if round == 0 {
                try await item(
                    items[0],
                    .reviewHidden(
                        ReviewHidden(
                            bidID: bids[0][0].0, role: .bidder, subjectID: owners[0], stars: 4, counted: true, operatorID: owners[1],
                            reason: "Fake")))
            }
            for (index, id) in items.enumerated() where !(round == 1 && index == 3) { try await item(id, .relisted(ItemRelisted())) }
            for (index, id) in items.enumerated() {
                try await item(id, .photoAdded(ItemPhotoAdded(digest: String(repeating: "\(index)", count: 64))))
                try await item(id, .revised(ItemRevised(title: "Thing \(index), round \(round)", location: places[(index + round + 1) % 4])))
            }
            for (index, id) in items.enumerated() where round == 1 && index < 2 {
                try await item(id, .photoRemoved(ItemPhotoRemoved(digest: String(repeating: "\(index)", count: 64))))
            }
        }
        // A request, revised and withdrawn; an item withdrawn right after it was posted.
        let request = ItemID()
        try await item(
            request,
            .requestPosted(
                RequestPosted(
                    itemID: request, ownerID: users[5], title: "Ladder", description: "Tall", category: .tools, maxDailyPriceCents: 700,
                    neededFrom: from, neededUntil: until, location: places[0])))
        let lamp = ItemID()
        try await rental(lamp, by: users[4], "Lamp", cents: 300, at: places[1])
        // An owner's bid on their own item, reserved and closed: one deal for them, not two.
        let own = ItemID()
        let ownBid = BidID()
        try await rental(own, by: users[5], "Tent", cents: 400, at: places[3])
        try await item(own, .bidPlaced(BidPlaced(bidID: ownBid, bidderID: users[5], dailyPriceCents: 400, from: from, until: until)))
        try await item(own, .bidApproved(BidApproved(bidID: ownBid)))
        try await item(own, .reserved(ItemReserved(bidID: ownBid, bidderID: users[5])))
        try await item(own, .closed(ItemClosed()))
        try await item(request, .revised(ItemRevised(priceCents: 800)))
        try await item(lamp, .withdrawn(ItemWithdrawn()))
        try await item(request, .withdrawn(ItemWithdrawn()))

        // Two loans, each funded by lenders through their carts, then repaid in part.
        for (index, borrower) in users.prefix(2).enumerated() {
            let loan = LoanID()
            let lenders = [users[(index + 2) % 6], users[(index + 3) % 6], users[5]]
            try await add(
                .loan(loan),
                [
                    try Aggregate.loan.codec.encode(
                        .posted(
                            LoanPosted(
                                loanID: loan, borrowerID: borrower, title: "Loom \(index)", description: "For weaving", sector: "Arts",
                                activity: "Weaving", countryCode: "NP", location: places[index], amountCents: 15_000, deadline: until)))
                ])
            for lender in lenders {
                try await add(
                    .cart(of: lender),
                    try [
                        .itemAdded(CartItemAdded(loanID: loan, amountCents: 5000)),
                        .checkedOut(CartCheckedOut(purchases: [LoanAmount(loanID: loan, amountCents: 5000)], totalCents: 5000, paidWith: "balance")),
                    ].map(Aggregate.cart.codec.encode))
                try await add(.user(lender), [try Aggregate.user.codec.encode(.balanceDebited(BalanceDebited(amountCents: 5000)))])
                try await add(.loan(loan), [try Aggregate.loan.codec.encode(.sharePurchased(LoanSharePurchased(lenderID: lender, amountCents: 5000)))])
            }
            let credits = LoanDecider.split(1500, over: lenders.map { LenderAmount(lenderID: $0, amountCents: 5000) })
            try await add(
                .loan(loan),
                try [.funded(LoanFunded()), .repaymentRecorded(LoanRepaymentRecorded(amountCents: 1500, credits: credits))]
                    .map(Aggregate.loan.codec.encode))
            // A lender after the funding hears of the repayment, not of the funding.
            try await add(
                .loan(loan),
                try [.sharePurchased(LoanSharePurchased(lenderID: users[1 - index], amountCents: 5000)), .repaid(LoanRepaid())]
                    .map(Aggregate.loan.codec.encode))
        }
        // A loan in Kenya that expires with one share bought; carts changed, emptied and cleared.
        let seeds = LoanID()
        try await add(
            .loan(seeds),
            [
                try Aggregate.loan.codec.encode(
                    .posted(
                        LoanPosted(
                            loanID: seeds, borrowerID: users[2], title: "Seeds", description: "For the farm", sector: "Agriculture",
                            activity: "Farming", countryCode: "KE", location: places[2], amountCents: 20_000, deadline: until)))
            ])
        // Its photos: one added twice (kept once) and one taken away.
        let (front, back) = (String(repeating: "a", count: 64), String(repeating: "b", count: 64))
        try await add(
            .loan(seeds),
            try [
                LoanEvent.photoAdded(LoanPhotoAdded(digest: front)), .photoAdded(LoanPhotoAdded(digest: back)),
                .photoAdded(LoanPhotoAdded(digest: front)), .photoRemoved(LoanPhotoRemoved(digest: back)),
            ].map(Aggregate.loan.codec.encode))
        try await add(.cart(of: users[4]), [try Aggregate.cart.codec.encode(.itemAdded(CartItemAdded(loanID: seeds, amountCents: 2500)))])
        try await add(.cart(of: users[5]), [try Aggregate.cart.codec.encode(.itemAdded(CartItemAdded(loanID: seeds, amountCents: 5000)))])
        try await add(
            .cart(of: users[4]), [try Aggregate.cart.codec.encode(.amountChanged(CartItemAmountChanged(loanID: seeds, amountCents: 7500)))])
        try await add(.cart(of: users[5]), [try Aggregate.cart.codec.encode(.cleared(CartCleared()))])
        try await add(
            .loan(seeds), [try Aggregate.loan.codec.encode(.sharePurchased(LoanSharePurchased(lenderID: users[4], amountCents: 7500)))])
        try await add(.cart(of: users[4]), [try Aggregate.cart.codec.encode(.itemRemoved(CartItemRemoved(loanID: seeds)))])
        try await add(.cart(of: users[5]), [try Aggregate.cart.codec.encode(.itemAdded(CartItemAdded(loanID: seeds, amountCents: 1000)))])
        // A line added twice (the first stays), then changed.
        for event in [
            CartEvent.itemAdded(CartItemAdded(loanID: seeds, amountCents: 2000)), .itemAdded(CartItemAdded(loanID: seeds, amountCents: 9000)),
            .amountChanged(CartItemAmountChanged(loanID: seeds, amountCents: 3000)),
        ] {
            try await add(.cart(of: users[2]), [try Aggregate.cart.codec.encode(event)])
        }
        try await add(
            .loan(seeds),
            [try Aggregate.loan.codec.encode(.expired(LoanExpired(refunds: [LenderAmount(lenderID: users[4], amountCents: 7500)])))])
        // Held the same by every build too: a request without a price, and, beyond what the
        // deciders make, someone never registered who is credited and forgotten at once.
        let wanted = ItemID()
        try await item(
            wanted,
            .requestPosted(
                RequestPosted(
                    itemID: wanted, ownerID: users[5], title: "Wanted", description: "A ladder", category: .tools, neededFrom: from,
                    neededUntil: until, location: places[0])))
        let stranger = UserID()
        try await add(
            .user(stranger),
            try [
                UserEvent.balanceCredited(BalanceCredited(amountCents: 100, loanID: seeds, reason: .refund)),
                .forgotten(UserForgotten(userID: stranger)),
            ].map(Aggregate.user.codec.encode))
        // And someone never registered rated, which no row counts; a second registration of an
        // id, which changes nothing; a card added again after its removal; a share bought
        // before its loan's posting, which counts among its lenders but not in its funding.
        try await item(
            wanted, .reviewWritten(ReviewWritten(bidID: BidID(), authorID: users[5], subjectID: UserID(), role: .owner, stars: 1, text: "?")))
        try await add(
            .user(users[0]),
            try [
                UserEvent.registered(UserRegistered(userID: users[0], handle: "again", displayName: "Again", email: "again@example.org")),
                .cardAdded(
                    CardOnFile(
                        cardID: cards[0], network: .visa, last4: "4240", expMonth: 6, expYear: 2031,
                        fingerprint: String(repeating: "ab", count: 32), processorToken: "tok_again")),
            ].map(Aggregate.user.codec.encode))
        let early = LoanID()
        try await add(
            .loan(early),
            try [
                LoanEvent.sharePurchased(LoanSharePurchased(lenderID: users[4], amountCents: 1000)),
                .posted(
                    LoanPosted(
                        loanID: early, borrowerID: users[4], title: "Cart", description: "For the market", sector: "Retail",
                        activity: "Vending", countryCode: "NP", location: places[1], amountCents: 10_000, deadline: until)),
                .sharePurchased(LoanSharePurchased(lenderID: users[5], amountCents: 1000)),
            ].map(Aggregate.loan.codec.encode))
        // A bid left undecided; and a late user's bid, still undecided when they are
        // forgotten, then approved and rejected (a build holds a bid until its fate, and
        // writes the undecided at its end).
        let late = UserID()
        try await add(
            .user(late),
            [try Aggregate.user.codec.encode(.registered(UserRegistered(userID: late, handle: "late", displayName: "Late", email: "l@example.org")))])
        // The late user's item, which loses its place when they are forgotten.
        let shed = ItemID()
        try await rental(shed, by: late, "Shed", cents: 200, at: places[2])
        // The late user's loan, with photos, repaid in part (still repaying) when they are forgotten.
        let kiln = LoanID()
        try await add(
            .loan(kiln),
            try [
                .posted(
                    LoanPosted(
                        loanID: kiln, borrowerID: late, title: "Kiln", description: "For pots", sector: "Arts", activity: "Pottery",
                        countryCode: "NP", location: places[3], amountCents: 5000, deadline: until)),
                .photoAdded(LoanPhotoAdded(digest: front)), .photoAdded(LoanPhotoAdded(digest: back)),
                .photoAdded(LoanPhotoAdded(digest: front)), .photoRemoved(LoanPhotoRemoved(digest: back)),
                .sharePurchased(LoanSharePurchased(lenderID: users[5], amountCents: 5000)), .funded(LoanFunded()),
                .repaymentRecorded(
                    LoanRepaymentRecorded(amountCents: 1000, credits: [LenderAmount(lenderID: users[5], amountCents: 1000)])),
            ].map(Aggregate.loan.codec.encode))
        let (open, lateBid) = (BidID(), BidID())
        for (bid, bidder) in [(open, users[5]), (lateBid, late)] {
            try await item(
                items[0], .bidPlaced(BidPlaced(bidID: bid, bidderID: bidder, dailyPriceCents: 800, from: from, until: until, message: "Still?")))
        }
        // Reports: filed, resolved, filed again on the same subject (one open at a time across
        // reports, which a batch must not reorder), and one by the person forgotten next.
        let (first, second, theirs) = (ReportID(), ReportID(), ReportID())
        func report(_ id: ReportID, _ event: ReportEvent) async throws {
            try await add(.report(id), [try Aggregate.report.codec.encode(event)])
        }
        try await report(
            first,
            .filed(ReportFiled(reportID: first, reporterID: users[1], subjectType: .item, subjectID: shed.rawValue, reason: .scam, text: "Cheap")))
        try await report(first, .resolved(ReportResolved(operatorID: users[2], action: .none, reason: "Fine")))
        try await report(
            second, .filed(ReportFiled(reportID: second, reporterID: users[1], subjectType: .item, subjectID: shed.rawValue, reason: .scam, text: nil)))
        try await report(
            theirs,
            .filed(ReportFiled(reportID: theirs, reporterID: late, subjectType: .user, subjectID: users[1].rawValue, reason: .spam, text: "Spam")))
        // Bookings by date (SPEC §12.1-12.5): a rental's paid bids, each confirmed, then each
        // way a booking ends: reminded and cancelled; completed, its reviews closed; its deposit
        // claimed and a dispute opened by the late user, divided by an operator; the late
        // user's own claim, whose words their forgetting takes away; a deposit released. And
        // the days its owner closed: two added, one removed, one added and removed again.
        if bookingsByDate { try await bookByDate(late: late, shed: shed, add: add, item: item, rental: rental) }
        // A photo of the shed the forgetting takes away (issue 48).
        try await item(shed, .photoAdded(ItemPhotoAdded(digest: String(repeating: "d", count: 64))))
        try await add(.user(late), [try Aggregate.user.codec.encode(.forgotten(UserForgotten(userID: late)))])
        // Then a photo added; one never added, removed, which still changes the row; and the
        // first added again, which does not (the row's last change is the removal's).
        let (digest, absent) = (String(repeating: "e", count: 64), String(repeating: "f", count: 64))
        try await item(shed, .photoAdded(ItemPhotoAdded(digest: digest)))
        try await item(shed, .photoRemoved(ItemPhotoRemoved(digest: absent)))
        try await item(shed, .photoAdded(ItemPhotoAdded(digest: digest)))
        try await item(items[0], .bidApproved(BidApproved(bidID: lateBid)))
        try await item(items[0], .bidRejected(BidRejected(bidID: lateBid, reason: "Changed my mind")))
        try await add(
            .user(users[0]),
            try [
                .payoutSent(PayoutSent(payoutID: payouts.sent, amountCents: 1_000, transferID: "tr_1")),
                .payoutFailed(PayoutFailed(payoutID: payouts.failed, amountCents: 1_000, reason: "account_closed")),
            ].map(Aggregate.user.codec.encode))
        return count
    }

    /// Bookings by date, on a rental of their own and on the late user's shed.
    func bookByDate(
        late: UserID, shed: ItemID, add: (StreamID, [NewEvent]) async throws -> Void, item: (ItemID, ItemEvent) async throws -> Void,
        rental: (ItemID, UserID, String, Int, Location) async throws -> Void
    ) async throws {
        let bike = ItemID()
        try await rental(bike, users[1], "Bike", 1000, places[1])
        let three = Period(from: from, until: from.adding(days: 2))
        let price = try #require(RentalPrice(dailyPriceCents: 1000, period: three, fees: RentalFees(), policy: .flexible, depositCents: 5000))
        let booked = (cancelled: BidID(), completed: BidID(), disputed: BidID(), claimed: BidID(), released: BidID())
        for (bid, renter) in [(booked.cancelled, users[2]), (booked.completed, users[4]), (booked.disputed, late)] {
            try await item(
                bike,
                .bidPlaced(
                    BidPlaced(
                        bidID: bid, bidderID: renter, dailyPriceCents: 1000, from: three.from, until: three.until, price: price,
                        hold: RentalHold(method: .card, amountCents: price.chargeCents + 5000))))
        }
        func confirm(_ bid: BidID, on rental: ItemID, _ owner: UserID, to renter: UserID, deposit: Int?) async throws {
            try await item(
                rental,
                .bookingConfirmed(
                    BookingConfirmed(
                        bookingID: BookingID(bid.rawValue), ownerID: owner, renterID: renter, from: three.from, until: three.until,
                        dailyPriceCents: 1000, depositCents: deposit)))
        }
        func booking(_ bid: BidID) -> BookingID { BookingID(bid.rawValue) }
        try await confirm(booked.cancelled, on: bike, users[1], to: users[2], deposit: 5000)
        try await confirm(booked.completed, on: bike, users[1], to: users[4], deposit: nil)
        try await confirm(booked.disputed, on: bike, users[1], to: late, deposit: 5000)
        try await confirm(booked.claimed, on: shed, late, to: users[5], deposit: 3000)
        try await confirm(booked.released, on: shed, late, to: users[5], deposit: 3000)
        let (kept, removed, again) = (BlackoutID(), BlackoutID(), BlackoutID())
        try await item(bike, .blackoutAdded(BlackoutAdded(blackoutID: kept, from: until, until: until)))
        try await item(bike, .blackoutAdded(BlackoutAdded(blackoutID: removed, from: from.adding(days: 5), until: from.adding(days: 6))))
        try await item(
            bike, .bookingReminded(BookingReminded(bookingID: booking(booked.cancelled), ownerID: users[1], renterID: users[2])))
        try await item(bike, .blackoutRemoved(BlackoutRemoved(blackoutID: removed)))
        try await item(
            bike,
            .bookingCancelled(
                BookingCancelled(
                    bookingID: booking(booked.cancelled), ownerID: users[1], renterID: users[2], cancelledBy: users[2], reason: "Ill",
                    cancelledOn: from, settlement: Settlement(refundCents: 8150, payoutCents: 135, feesCents: 15))))
        try await item(bike, .blackoutAdded(BlackoutAdded(blackoutID: again, from: until, until: until)))
        try await item(bike, .blackoutRemoved(BlackoutRemoved(blackoutID: again)))
        for bid in [booked.completed, booked.disputed] {
            try await item(
                bike,
                .bookingCompleted(
                    BookingCompleted(
                        bookingID: booking(bid), ownerID: users[1], renterID: bid == booked.completed ? users[4] : late,
                        completedOn: three.until.adding(days: 1), payoutCents: price.payoutCents, feesCents: 450)))
        }
        try await item(bike, .reviewWindowClosed(ReviewWindowClosed(bookingID: booking(booked.completed))))
        try await item(
            bike,
            .depositClaimed(
                DepositClaimed(bookingID: booking(booked.disputed), ownerID: users[1], renterID: late, amountCents: 2000, text: "Scratched")))
        try await item(
            bike,
            .disputeOpened(
                DisputeOpened(
                    bookingID: booking(booked.disputed), ownerID: users[1], renterID: late, openedBy: late, reason: .notAsDescribed,
                    text: "It came scratched")))
        try await item(
            bike,
            .disputeResolved(
                DisputeResolved(
                    bookingID: booking(booked.disputed), ownerID: users[1], renterID: late, operatorID: users[0], renterCents: 4000,
                    ownerCents: 1000, reason: "Split")))
        for bid in [booked.claimed, booked.released] {
            try await item(
                shed, .bookingCompleted(BookingCompleted(bookingID: booking(bid), ownerID: late, renterID: users[5], completedOn: until)))
        }
        try await item(
            shed,
            .depositClaimed(DepositClaimed(bookingID: booking(booked.claimed), ownerID: late, renterID: users[5], amountCents: 500, text: "Dented")))
        try await item(shed, .depositReleased(DepositReleased(bookingID: booking(booked.released), renterID: users[5], amountCents: 3000)))
    }
}
