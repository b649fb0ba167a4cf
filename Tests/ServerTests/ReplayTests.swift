import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ImageFixtures
import Marketplace
import Postgres
import Projections
import Server
import ServerTestSupport
import Testing
import TestSupport

extension TestClientProtocol {
    /// Every command of the API at least once, so that every projection sees every event type.
    func everyCommand(_ admin: PostgresPool, clock: TestClock) async throws {
        let rita = try await user("rita")
        let ada = try await user("ada")
        let bob = try await user("bob")
        _ = try await send(
            .patch, "/v1/me", body: API.ProfileBody(displayName: "Ada L.", country: "GB", defaultShareCents: 5000), token: ada.token)
        _ = try await send(.post, "/v1/me/blocks", body: API.BlockBody(userId: bob.id.rawValue), token: ada.token)
        _ = try await send(.delete, "/v1/me/blocks/\(bob.id)", token: ada.token)

        // Items and bids: revise, withdraw, reject, approve (a rental's booking of its days, the
        // overlapping bid rejected with it), a blackout added and one removed, the window revised.
        let bike = try await postRental(rita.token).id
        _ = try await send(.patch, "/v1/items/\(bike)", body: API.RevisionBody(title: "Road bike, serviced"), token: rita.token)
        let first = try await bid(bike, ada.token).decode(BidResource.self).id
        _ = try await send(.post, "/v1/bids/\(first)/withdraw", token: ada.token)
        let again = try await bid(bike, ada.token).decode(BidResource.self).id
        let other = try await bid(bike, bob.token).decode(BidResource.self).id
        #expect(try await send(.post, "/v1/bids/\(again)/approve", token: rita.token).status == .ok)
        _ = other
        _ = try await send(.post, "/v1/bids/\(again)/messages", body: API.MessageBody(text: "Where do we meet?"), token: ada.token)
        let blackout = try await send(
            .post, "/v1/items/\(bike)/blackouts", body: API.BlackoutBody(from: "2026-12-20", until: "2026-12-22"), token: rita.token)
        #expect(blackout.status == .created, "\(blackout)")
        let brief = try await send(
            .post, "/v1/items/\(bike)/blackouts", body: API.BlackoutBody(from: "2026-12-25", until: "2026-12-25"), token: rita.token)
        _ = try await send(.delete, "/v1/items/\(bike)/blackouts/\(brief.json["id"] as? String ?? "")", token: rita.token)
        #expect(
            try await send(.patch, "/v1/items/\(bike)", body: API.RevisionBody(availableUntil: "2027-01-31"), token: rita.token).status
                == .ok)
        // A request, reserved whole, completed and reviewed by both sides.
        let ladder = try await send(
            .post, "/v1/requests",
            body: API.RequestBody(
                title: "Step ladder", category: .tools, location: API.LocationInput(lat: 27.7, lng: 85.3), neededFrom: "2026-12-10",
                neededUntil: "2026-12-12"
            ), token: ada.token
        ).decode(ItemResource.self).id
        let offer = try await send(
            .post, "/v1/items/\(ladder)/bids", body: API.BidBody(dailyPriceCents: 300, from: "2026-12-10", until: "2026-12-11"),
            token: rita.token
        ).decode(BidResource.self).id
        #expect(try await send(.post, "/v1/bids/\(offer)/approve", token: ada.token).status == .ok)
        #expect(try await complete(ladder, ada.token, clock: clock).status == .ok)
        _ = try await send(.post, "/v1/items/\(ladder)/reviews", body: API.ReviewBody(stars: 5, text: "Lovely ladder"), token: ada.token)
        _ = try await send(.post, "/v1/items/\(ladder)/reviews", body: API.ReviewBody(stars: 4), token: rita.token)
        // A revision that moves an available item on the map, and a photo added and removed.
        _ = try await send(
            .patch, "/v1/items/\(bike)",
            body: API.RevisionBody(location: API.RevisionBody.LocationPayload(lat: 28.2, lng: 83.98, place: "Pokhara")), token: rita.token)
        let image = try Fixture.image(width: 64, height: 48, as: ".png")
        let photos = try await upload("/v1/items/\(bike)/photos", image, type: "image/png", token: rita.token)
            .decode(ItemResource.self).photos
        let loomPhoto = try Fixture.image(width: 48, height: 64, as: ".jpg")
        _ = try await upload("/v1/items/\(bike)/photos", loomPhoto, type: "image/jpeg", token: rita.token)
        _ = try await send(.delete, "/v1/items/\(bike)/photos/\(try #require(photos.first).digest)", token: rita.token)
        _ = try await upload("/v1/me/photo", image, type: "image/png", token: ada.token, method: .put)
        // Booked again by another, on other days.
        let second = try await send(
            .post, "/v1/items/\(bike)/bids", body: API.BidBody(dailyPriceCents: 1400, from: "2026-12-10", until: "2026-12-12"),
            token: bob.token
        ).decode(BidResource.self).id
        #expect(try await send(.post, "/v1/bids/\(second)/approve", token: rita.token).status == .ok)
        // A profile changed again, in part, and the photo taken away: a rebuild folds each
        // user's changes within its batch, keeping the last value of each field.
        #expect(try await send(.patch, "/v1/me", body: API.ProfileBody(displayName: "Ada Lovelace"), token: ada.token).status == .ok)
        #expect(try await send(.delete, "/v1/me/photo", token: ada.token).status == .ok)
        #expect(try await upload("/v1/me/photo", loomPhoto, type: "image/jpeg", token: bob.token, method: .put).status == .ok)
        let lamp = try await postRental(rita.token, title: "Lamp").id
        let rejected = try await bid(lamp, ada.token).decode(BidResource.self).id
        _ = try await send(.post, "/v1/bids/\(rejected)/reject", body: API.RejectionBody(reason: "too low"), token: rita.token)
        _ = try await bid(lamp, bob.token)
        _ = try await send(.post, "/v1/items/\(lamp)/withdraw", token: rita.token)
        _ = try await send(
            .post, "/v1/requests",
            body: API.RequestBody(
                title: "Ladder", category: .tools, location: API.LocationInput(lat: 27.7, lng: 85.3), neededFrom: "2026-12-10",
                neededUntil: "2026-12-11"
            ), token: ada.token)

        // Cards, deposits, loans, cart, checkout, repayments, expiry.
        let card = try await addCard(ada.token).decode(CardResource.self).id
        _ = try await addCard(ada.token, expMonth: 6, expYear: 2032)
        _ = try await send(.post, "/v1/me/deposits", body: API.DepositBody(amountCents: 20_000, cardId: card.rawValue), token: ada.token)
        #expect(
            (200..<300).contains(
                try await send(.post, "/v1/me/deposits", body: API.DepositBody(amountCents: 1_500, cardId: card.rawValue), token: ada.token)
                    .status.code))
        let spare = try await addCard(ada.token, number: "5555555555554444").decode(CardResource.self).id
        _ = try await send(.delete, "/v1/me/cards/\(spare)", token: ada.token)
        try await fund(bob.token, 10_000)
        let loom = try await postLoan(rita.token, amount: 7500, title: "Loom")
        let seeds = try await postLoan(rita.token, amount: 10_000, country: "KE", title: "Seeds", deadlineDays: 5)
        _ = try await upload("/v1/loans/\(loom)/photos", loomPhoto, type: "image/jpeg", token: rita.token)
        _ = try await addToCart(ada.token, loom)
        _ = try await send(.patch, "/v1/cart/items/\(loom)", body: API.CartAmountBody(amountCents: 2500), token: ada.token)
        _ = try await addToCart(ada.token, seeds, 2500)
        _ = try await send(.delete, "/v1/cart/items/\(seeds)", token: ada.token)
        _ = try await send(.delete, "/v1/cart", token: ada.token)
        _ = try await addToCart(ada.token, loom, 2500)
        _ = try await addToCart(ada.token, seeds, 2500)
        #expect(try await send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: ada.token).status == .ok)
        _ = try await addToCart(bob.token, loom, 5000)
        #expect(
            try await send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .card, cardId: card.rawValue), token: bob.token)
                .status == .notFound, "not bob's card")
        #expect(try await send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: bob.token).status == .ok)
        try await fund(rita.token, 1000)
        _ = try await send(
            .post, "/v1/loans/\(loom)/repayments", body: API.RepaymentBody(amountCents: 100, payWith: .balance), token: rita.token)
        _ = try await addToCart(bob.token, seeds, 2500)  // left in the cart
        _ = try runLender(["loans", "expire", "--as-of", dayFromToday(6)], database: try await ownerURL(admin))

        // Trust and safety (SPEC §12.5): a report resolved, a deposit booked and disputed and
        // divided, another claimed, a booking cancelled by an operator, a loan and an item taken
        // down, a user suspended and reinstated.
        let desk = try await user("desk")
        _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
        let drill = try await send(
            .post, "/v1/rentals",
            body: API.RentalBody(
                title: "Drill", category: .tools, dailyPriceCents: 1000, location: API.LocationInput(lat: 27.7, lng: 85.3),
                securityDepositCents: 2000
            ), token: rita.token
        ).decode(ItemResource.self).id
        var drillBookings = [String]()
        for (from, until) in [("2026-12-01", "2026-12-02"), ("2026-12-03", "2026-12-04"), ("2026-12-20", "2026-12-21")] {
            let placed = try await send(
                .post, "/v1/items/\(drill)/bids", body: API.BidBody(dailyPriceCents: 1000, from: from, until: until, payWith: .balance),
                token: ada.token)
            let id = try #require(placed.json["id"] as? String, "\(placed)")
            #expect(try await send(.post, "/v1/bids/\(id)/approve", token: rita.token).status == .ok)
            drillBookings.append(id)
        }
        let disputed = try await clock.on("2026-12-01") {
            try await send(
                .post, "/v1/bookings/\(drillBookings[0])/disputes", body: API.DisputeBody(reason: .damaged, text: "Bent"), token: ada.token)
        }
        #expect(disputed.status == .created, "\(disputed)")
        #expect(
            try await send(
                .post, "/v1/admin/bookings/\(drillBookings[0])/resolve",
                body: API.ResolutionBody(renterCents: 2100, ownerCents: 2000, reason: "Split"),
                token: desk.token
            ).status == .ok)
        let claimed = try await clock.on("2026-12-05") {
            _ = try await send(.post, "/v1/bookings/\(drillBookings[1])/complete", token: rita.token)
            return try await send(
                .post, "/v1/bookings/\(drillBookings[1])/claims", body: API.ClaimBody(amountCents: 500, text: "Dull bit"),
                token: rita.token)
        }
        #expect(claimed.status == .created, "\(claimed)")
        #expect(
            try await send(
                .post, "/v1/admin/bookings/\(drillBookings[2])/cancel", body: API.ReasonBody(reason: "Recall"), token: desk.token
            ).status == .ok)
        let report = try #require(
            try await send(
                .post, "/v1/reports", body: API.ReportBody(subjectType: .item, subjectId: lamp.rawValue, reason: .spam), token: bob.token
            ).json["id"] as? String)
        _ = try await send(
            .post, "/v1/admin/reports/\(report)/resolve", body: API.ResolveReportBody(action: .none, reason: "Fine"), token: desk.token)
        let sham = try await postLoan(bob.token, amount: 5000, title: "Sham")
        _ = try await send(.post, "/v1/admin/loans/\(sham)/takedown", body: API.ReasonBody(reason: "Sham"), token: desk.token)
        let scam = try await postRental(bob.token, title: "Scam").id
        _ = try await send(.post, "/v1/admin/items/\(scam)/takedown", body: API.ReasonBody(reason: "Scam"), token: desk.token)
        let tent = try await postRental(bob.token, title: "Tent").id
        _ = try await postLoan(bob.token, amount: 5000, title: "Kiln")
        #expect(
            try await send(.post, "/v1/admin/users/\(bob.id)/suspend", body: API.SuspendBody(reason: "Spam"), token: desk.token).status
                == .ok)
        #expect(
            try await send(.post, "/v1/admin/users/\(bob.id)/reinstate", body: API.ReasonBody(reason: "Fine"), token: desk.token).status
                == .ok)
        _ = tent
    }
}

extension TestClientProtocol {
    /// Each token's user posts `each` rentals, all users at once; `done` as each finishes.
    func postRentalsAtOnce(_ tokens: [String], each: Int, done: @escaping @Sendable () -> Void = {}) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for token in tokens {
                group.addTask {
                    defer { done() }
                    for round in 0..<each {
                        _ = try await send(
                            .post, "/v1/rentals",
                            body: API.RentalBody(
                                title: "Thing \(round)", category: .tools, dailyPriceCents: 500,
                                location: API.LocationInput(lat: 27.7, lng: 85.3)
                            ), token: token)
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}

@Suite("Replay and the auditors' log")
struct ReplayTests {
    /// Each index of a schema's tables, by table and definition without its name, and each
    /// constraint, by table, name and definition (a build makes some keys again at its end).
    static func indexesAndConstraints(in schema: String, _ admin: PostgresPool) async throws -> [String] {
        try await admin.query(
            """
            SELECT tablename || ' ' || regexp_replace(indexdef, '^(CREATE (UNIQUE )?INDEX )\\S+ ON \\S+ ', '\\1') AS line
            FROM pg_indexes WHERE schemaname = \(schema)
            UNION ALL
            SELECT t.relname || ' ' || c.conname || ' ' || c.contype::text || ' ' || pg_get_constraintdef(c.oid)
            FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid WHERE c.connamespace = \(schema)::regnamespace
            ORDER BY 1
            """
        ).map { try $0.decode("line", as: String.self) }
    }

    @Test func verifyFindsNoDifferenceAfterEveryCommandAndExactlyOneAfterAManualChange() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            try await client.everyCommand(admin, clock: clock)
            let database = try await ownerURL(admin)
            let clean = try runLender(["replay", "--verify"], database: database)
            #expect(clean.contains("no differences"), "\(clean)")

            let title = try await admin.query("UPDATE items_view SET title = 'Tampered' WHERE title = 'Lamp' RETURNING item_id")
            #expect(title.count == 1)
            let found = try runLender(["replay", "--verify"], database: database, expectedStatus: 1)
            #expect(found.contains("1 differences"), "\(found)")
            #expect(found.contains("items_view"))
            #expect(found.contains("Tampered"))

            // A replay puts the log's truth back, with every index and constraint the views had
            // (a rebuild makes some indexes only at its end).
            let before = try await Self.indexesAndConstraints(in: "public", admin)
            #expect(before.count > 40)
            #expect(try runLender(["replay"], database: database).contains("Rebuilt"))
            #expect(try await Self.indexesAndConstraints(in: "public", admin) == before)
            // Built with room on each page, swapped in with the tables' options as migrations made them.
            let options = try await admin.query(
                "SELECT count(*) AS n FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r' AND reloptions IS NOT NULL"
            ).single()
            #expect(try options.decode("n", as: Int.self) == 0)
            #expect(try runLender(["replay", "--verify"], database: database).contains("no differences"))
            let restored = try await admin.query("SELECT count(*) AS n FROM items_view WHERE title = 'Lamp'").single()
            #expect(try restored.decode("n", as: Int.self) == 1)
            let schemas = try await admin.query("SELECT count(*) AS n FROM pg_namespace WHERE nspname LIKE 'rebuild_%'").single()
            #expect(try schemas.decode("n", as: Int.self) == 0, "no rebuild schema is left behind")
            // One projection alone.
            #expect(try runLender(["replay", "--projection", "loans"], database: database).contains("loans_view"))
            _ = try runLender(["replay", "--projection", "nonsense"], database: database, expectedStatus: 1)
        }
    }

    @Test func replayWhileEightClientsWriteAndReadFailsNoRequestAndLosesNothing() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            try await client.everyCommand(admin, clock: clock)
            var tokens = [String]()
            for index in 0..<8 { tokens.append(try await client.user("writer\(index)").token) }
            let database = try await ownerURL(admin)
            let replaying = Counter(1)
            let replay = Task.detached { @Sendable () throws -> String in
                defer { replaying.add(-1) }
                return try runLender(["replay"], database: database)
            }
            let outcomes = try await withThrowingTaskGroup(of: ([ItemID], [Int]).self) { group in
                for (index, token) in tokens.enumerated() {
                    group.addTask {
                        var posted = [ItemID]()
                        var failures = [Int]()
                        var rounds = 0
                        // Until the replay is over, and a few rounds at least.
                        while replaying.value > 0 || rounds < 5 {
                            rounds += 1
                            let response = try await client.send(
                                .post, "/v1/rentals",
                                body: API.RentalBody(
                                    title: "Item \(index)-\(rounds)", category: .tools, dailyPriceCents: 100 + rounds,
                                    location: API.LocationInput(lat: 27.7, lng: 85.3)
                                ), token: token)
                            if response.status == .created, let id = try? response.decode(ItemResource.self).id { posted.append(id) } else {
                                failures.append(Int(response.status.code))
                            }
                            let market = try await client.send(.get, "/v1/market?limit=5", token: token)
                            if market.status != .ok { failures.append(Int(market.status.code)) }
                            let me = try await client.send(.get, "/v1/me", token: token)
                            if me.status != .ok { failures.append(Int(me.status.code)) }
                        }
                        return (posted, failures)
                    }
                }
                return try await group.reduce(into: [([ItemID], [Int])]()) { $0.append($1) }
            }
            let output = try await replay.value
            #expect(output.contains("Rebuilt"), "\(output)")
            #expect(outcomes.flatMap(\.1).isEmpty, "failed requests: \(outcomes.flatMap(\.1))")
            let acknowledged = Set(outcomes.flatMap(\.0).map(\.description))
            #expect(acknowledged.count >= 40)
            let stored = Set(
                try await admin.query("SELECT item_id::text AS id FROM items_view").map { try $0.decode("id", as: String.self) })
            #expect(acknowledged.isSubset(of: stored), "acknowledged but not in the views: \(acknowledged.subtracting(stored))")
            #expect(try runLender(["replay", "--verify"], database: database).contains("no differences"))
        }
    }

    @Test func untilAPositionBeforeAnApprovalShowsTheItemAvailableAndTheBidPending() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            let ada = try await client.user("ada")
            let item = try await client.postRental(rita.token).id
            let bid = try await client.bid(item, ada.token).decode(BidResource.self)
            let bidID = bid.id
            let before = try #require(bid.position)
            #expect(try await client.send(.post, "/v1/bids/\(bidID)/approve", token: rita.token).status == .ok)

            let database = try await ownerURL(admin)
            let output = try runLender(["replay", "--until", "\(before)", "--into", "past"], database: database)
            #expect(output.contains("position \(before)"), "\(output)")
            let past = try await admin.query(
                "SELECT i.status AS item, b.status AS bid FROM past.items_view i JOIN past.bids_view b USING (item_id)"
            ).single()
            #expect(try past.decode("item", as: String.self) == "available")
            #expect(try past.decode("bid", as: String.self) == "pending")
            // Built whole, indexes and all, for the investigator's queries.
            let views = Set(ViewGroup.all.flatMap(\.tables))
            let kept = try await Self.indexesAndConstraints(in: "public", admin).filter { views.contains(String($0.prefix { $0 != " " })) }
            #expect(try await Self.indexesAndConstraints(in: "past", admin) == kept)
            let live = try await admin.query("SELECT count(*)::int AS n FROM bookings_view").single()
            #expect(try live.decode("n", as: Int.self) == 1, "booked now, not then")
            let then = try await admin.query("SELECT count(*)::int AS n FROM past.bookings_view").single()
            #expect(try then.decode("n", as: Int.self) == 0)
            // The schema is the investigator's: a second run into it is refused.
            _ = try runLender(["replay", "--until", "\(before)", "--into", "past"], database: database, expectedStatus: 1)
        }
    }

    @Test func anAuditorFollowingTheLogWhileEightWritersPostMissesNothing() async throws {
        try await withServer { client, admin in
            let auditor = try await client.user("auditor")
            #expect(try await client.send(.get, "/v1/events", token: auditor.token).status == .forbidden)
            #expect(try await client.send(.get, "/v1/events/stream", token: auditor.token).status == .forbidden)
            _ = try await admin.query("INSERT INTO auditors (user_id) VALUES (\(auditor.id.rawValue))")
            var tokens = [String]()
            for index in 0..<8 { tokens.append(try await client.user("writer\(index)").token) }
            let writing = Counter(8)

            async let seen: [Int64] = {
                var positions = [Int64]()
                var after: Int64 = 0
                while true {
                    let done = writing.value == 0
                    let page = try await client.send(.get, "/v1/events?after=\(after)&limit=50", token: auditor.token)
                    #expect(page.status == .ok)
                    // Decoding checks each event's shape: a stream id, and data that is an object.
                    let events = try page.decode(Page<LoggedEvent>.self).data
                    for event in events {
                        positions.append(event.position)
                        #expect(event.hash.count == 64)
                    }
                    after = positions.last ?? after
                    if events.isEmpty && done { return positions }
                }
            }()
            try await client.postRentalsAtOnce(tokens, each: 10) { writing.add(-1) }
            let positions = try await seen
            let head = try await admin.query("SELECT position FROM log_head").single().decode("position", as: Int64.self)
            #expect(positions == Array(1...head), "every position once, in order")
            let invalid = try await client.send(.get, "/v1/events?after=-1&limit=5000", token: auditor.token)
            #expect(Set(invalid.fieldCodes.keys) == ["after", "limit"])
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif

@Suite("The auditors' live stream")
struct EventStreamTests {
    /// A plain socket reading a server-sent event stream: HTTP clients for tests wait for the
    /// whole body, and this one never ends.
    final class StreamReader: @unchecked Sendable {
        let connection: RawConnection
        var socket: Int32 { connection.socket }

        init(port: Int, path: String, token: String, lastEventID: Int64? = nil) throws {
            connection = try RawConnection(port: port)
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let resume = lastEventID.map { "Last-Event-ID: \($0)\r\n" } ?? ""
            let request = "GET \(path) HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(token)\r\nAccept: text/event-stream\r\n\(resume)\r\n"
            _ = request.withCString { send(socket, $0, strlen($0), 0) }
        }

        func close() { connection.close() }

        /// Everything read until `done` says so of the text, or nothing comes for 10 s.
        func read(until done: (String) -> Bool) -> String {
            var text = ""
            var buffer = [UInt8](repeating: 0, count: 65536)
            while !done(text) {
                let count = recv(socket, &buffer, buffer.count, 0)
                if count <= 0 { break }
                text += String(decoding: buffer[0..<count], as: UTF8.self)
            }
            return text
        }

        /// The `id:` of every event, until `until` is seen or nothing comes for 10 s.
        func ids(until last: Int) -> [Int] {
            var text = ""
            var buffer = [UInt8](repeating: 0, count: 65536)
            var ids = [Int]()
            while ids.last != last {
                let count = recv(socket, &buffer, buffer.count, 0)
                if count <= 0 { break }
                text += String(decoding: buffer[0..<count], as: UTF8.self)
                // By scalar: "\r\n" of the chunked framing is one Character, not a "\n".
                ids = text.split(whereSeparator: \.isNewline).compactMap { line in
                    line.hasPrefix("id: ") ? Int(line.dropFirst(4).trimmingCharacters(in: .whitespaces)) : nil
                }
            }
            return ids
        }
    }

    /// A quiet log still writes a comment now and then: proxies keep the connection, and a
    /// write finds a reader that left. Events still come between the comments, in order.
    @Test func aQuietStreamWritesHeartbeatsAndStillDeliversEvents() async throws {
        try await withServer(testing: .live, heartbeat: .milliseconds(200)) { client, admin in
            let auditor = try await client.user("auditor")
            _ = try await admin.query("INSERT INTO auditors (user_id) VALUES (\(auditor.id.rawValue))")
            let head = try await admin.query("SELECT position FROM log_head").single().decode("position", as: Int.self)
            let port = try #require(client.port)
            let reader = try StreamReader(port: port, path: "/v1/events/stream?after=\(head)", token: auditor.token)
            let beats: @Sendable (String) -> Int = { $0.components(separatedBy: ": heartbeat").count - 1 }
            let quiet = await withCheckedContinuation { continuation in
                Thread.detachNewThread { continuation.resume(returning: reader.read { beats($0) >= 2 }) }
            }
            #expect(beats(quiet) >= 2, "\(quiet)")
            #expect(!quiet.contains("id: "), "nothing happened, so no event")
            _ = try await client.user("late")
            let late = try await admin.query("SELECT position FROM log_head").single().decode("position", as: Int.self)
            let ids = await withCheckedContinuation { continuation in
                Thread.detachNewThread { continuation.resume(returning: reader.ids(until: late)) }
            }
            reader.close()
            #expect(ids == Array((head + 1)...late))
        }
    }

    @Test func theStreamDeliversEveryEventInOrderWhileEightWritersPost() async throws {
        try await withServer(testing: .live) { client, admin in
            let auditor = try await client.user("auditor")
            _ = try await admin.query("INSERT INTO auditors (user_id) VALUES (\(auditor.id.rawValue))")
            var tokens = [String]()
            for index in 0..<8 { tokens.append(try await client.user("writer\(index)").token) }
            let port = try #require(client.port)
            // Half the log before the stream opens, half while it is open.
            let reader = try StreamReader(port: port, path: "/v1/events/stream?after=3", token: auditor.token)
            try await client.postRentalsAtOnce(tokens, each: 5)
            let head = try await admin.query("SELECT position FROM log_head").single().decode("position", as: Int.self)
            // On a thread of its own: a blocking read must not hold one of the few threads tasks run on.
            let ids = await withCheckedContinuation { continuation in
                Thread.detachNewThread { continuation.resume(returning: reader.ids(until: head)) }
            }
            reader.close()
            #expect(ids == Array(4...head), "every event after 3, once, in order")
        }
    }
}
