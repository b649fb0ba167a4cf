import Aggregates
import EventStore
import Foundation
import ImageFixtures
import Glibc
import Marketplace
import Postgres
import Projections
import ServerTestSupport
import Testing
import TestSupport
import UseCases

/// Personal data in the append-only log (SPEC §11.3): sealed with each person's key,
/// forgotten by destroying it, exported on request, never handed to auditors in clear.
@Suite("Personal data", .serialized)
struct PersonalDataTests {
    /// Strings found nowhere else, so that a dump holding one holds it because of this user.
    let mark = String(UUID().uuidString.prefix(8)).lowercased()

    @Test func aForgottenUserLeavesNothingPersonalInTheDatabase() async throws {
        try await withServer { client, admin in
            let name = "Zelda Quixotic \(mark)"
            let email = "zq\(mark)@forget.example"
            let place = "Hidden Lane \(mark)"
            let message = "call me on 555-\(mark)"
            // What she posts says where she is too (issue 48).
            let (title, description) = ("Ladder \(mark)", "Ring Ladderhouse \(mark) for it")
            let loanTitle = "Loom \(mark)"
            let registered = try await client.send(
                .post, "/v1/users",
                body: API.RegisterBody(handle: "zelda", displayName: name, email: email, password: "correct horse battery", country: "NP"))
            #expect(registered.status == .created, "\(registered)")
            let zelda = try await client.login("zelda")
            let bob = try await client.user("bob")

            // Zelda does everything there is: a card and a deposit, a rental where she lives,
            // a bid with a message, a loan she borrows, a share of Bob's loan (her whole balance:
            // money is not forgotten, `balance_not_empty`).
            try await client.fund(zelda, 2500)
            let rental = try await client.send(
                .post, "/v1/rentals",
                body: API.RentalBody(
                    title: title, description: description, category: .tools, dailyPriceCents: 500,
                    location: API.LocationInput(lat: 12.3456789, lng: 98.7654321, place: place)), token: zelda)
            #expect(rental.status == .created, "\(rental)")
            let ladder = try rental.decode(ItemResource.self)
            let photo = try await client.upload(
                "/v1/items/\(ladder.id)/photos", try Fixture.image(width: 120, height: 90, as: ".png"), type: "image/png", token: zelda)
            let ladderPhoto = try #require(try photo.decode(ItemResource.self).photos.first?.digest)
            let bikes = try await client.postRental(bob.token)
            let bid = try await client.send(
                .post, "/v1/items/\(bikes.id)/bids",
                body: API.BidBody(dailyPriceCents: 1400, from: "2026-12-05", until: "2026-12-07", message: message), token: zelda)
            #expect(bid.status == .created, "\(bid)")
            #expect(try await client.bid(ladder.id, bob.token).status == .created)
            let zeldasLoan = try await client.send(
                .post, "/v1/loans",
                body: API.LoanBody(
                    title: loanTitle, description: "For weaving", sector: "Manufacturing", activity: "Weaving",
                    country: "NP", location: API.LocationInput(lat: 27.1234567, lng: 84.7654321, place: "Loom Street \(mark)"),
                    amountCents: 10_000, deadline: dayFromToday(30)), token: zelda)
            #expect(zeldasLoan.status == .created, "\(zeldasLoan)")
            let bobsLoan = try await client.postLoan(bob.token)
            _ = try await client.addToCart(zelda, bobsLoan, 2500)
            #expect(try await client.send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: zelda).status == .ok)
            try await client.fund(bob.token, 2500)
            _ = try await client.addToCart(bob.token, try zeldasLoan.decode(LoanResource.self).id, 2500)
            #expect(
                try await client.send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: bob.token).status == .ok)

            // Sealed in the log already: the auditors' copy holds none of it in clear.
            let log = try await admin.query("SELECT string_agg(data::text, ' ') AS t FROM events").single().decode("t", as: String.self)
            for secret in [name, email, place, message, "12.3456789", title, description, loanTitle] {
                #expect(!log.contains(secret), "\(secret) in the log")
            }
            #expect(log.contains("\"$sealed\""))

            // The jobs teach the search her words, as they do every listing's.
            _ = try runLender(["jobs", "run"], database: try await ownerURL(admin))
            #expect(try await count(admin, "SELECT count(*) FROM search_words WHERE word = 'ladderhouse'") == 1)

            // The password is asked for, and a wrong one changes nothing.
            let before = try await eventCount(admin)
            let missing = try await client.send(.delete, "/v1/me", json: [:], token: zelda)
            #expect(missing.status == .unprocessableContent, "\(missing)")
            let wrong = try await client.send(.delete, "/v1/me", body: API.CloseAccountBody(password: "not the password"), token: zelda)
            // 403, not 401: a client takes a 401 for a dead session and signs the user out.
            #expect(wrong.status == .forbidden && wrong.json["code"] as? String == "wrong_password", "\(wrong)")
            #expect(wrong.fieldCodes["password"] == "wrong_password", "\(wrong)")
            #expect(try await client.send(.get, "/v1/me", token: zelda).status == .ok, "the session is still good")
            #expect(try await eventCount(admin) == before)

            // A failed login of hers from elsewhere, kept with its address for the rate limits.
            try await admin.query("INSERT INTO login_failures (handle, address) VALUES ('zelda', '203.0.113.77')")
            let closed = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: zelda)
            #expect(closed.status == .noContent, "\(closed)")

            // Her sessions are dead, her login closed (the failed attempt, with its address, gone
            // too), her handle still taken.
            #expect(try await count(admin, "SELECT count(*) FROM login_failures WHERE handle = 'zelda'") == 0)
            #expect(try await client.send(.get, "/v1/me", token: zelda).status == .unauthorized)
            #expect(
                try await client.send(.post, "/v1/sessions", body: API.LoginBody(handle: "zelda", password: "correct horse battery"))
                    .status == .unauthorized)
            let again = try await client.send(
                .post, "/v1/users",
                body: API.RegisterBody(handle: "zelda", displayName: "New", email: "new@example.org", password: "correct horse battery"))
            #expect(again.status == .conflict, "\(again)")
            // Her e-mail may serve a new account: its index entry went with her.
            let reuse = try await client.send(
                .post, "/v1/users",
                body: API.RegisterBody(handle: "newcomer", displayName: "New", email: email, password: "correct horse battery"))
            #expect(reuse.status == .created, "\(reuse)")
            _ = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: try await client.login("newcomer"))

            // Her items and bids show a former user; her open ones were withdrawn.
            let item = try await client.send(.get, "/v1/items/\(ladder.id)", token: bob.token).decode(ItemResource.self)
            #expect(item.ownerHandle == Redacted.name && item.status == "withdrawn" && item.location.place == Redacted.text)
            #expect(item.title == Redacted.text && item.description == Redacted.text && item.photos.isEmpty, "\(item)")
            #expect(try await client.media("/v1/media/\(ladderPhoto)").status == .notFound, "her item's photo is deleted")
            let bids = try await client.send(.get, "/v1/items/\(bikes.id)/bids", token: bob.token).json["data"] as? [[String: Any]]
            let hers = bids?.first { $0["bidderHandle"] as? String == Redacted.name }
            #expect(hers?["message"] as? String == Redacted.text && hers?["status"] as? String == "withdrawn", "\(bids ?? [])")
            let profile = try await client.send(.get, "/v1/users/\(try registered.decode(RegisteredUser.self).id)", token: bob.token)
            #expect(profile.json["displayName"] as? String == Redacted.name && profile.json["country"] is NSNull, "\(profile)")
            #expect(profile.json["handle"] as? String == Redacted.name, "the handle too, though still reserved (issue 48)")

            // The jobs' hourly pass forgets the words no listing shows any more (issue 48).
            #expect(try runLender(["jobs", "run"], database: try await ownerURL(admin)).contains("search words forgotten"))
            #expect(try await count(admin, "SELECT count(*) FROM search_words WHERE word = 'ladderhouse'") == 0)

            // Nothing personal of hers anywhere in a full dump; Bob's is all there.
            let database = try await ownerURL(admin)
            let dump = try pgDump(database)
            #expect(dump.count > 10_000, "a dump of the whole database")
            for secret in [
                name, email, place, message, "Loom Street \(mark)", "12.3456789", "98.7654321", "27.1234567", "203.0.113.77", title,
                description, loanTitle,
            ] {
                #expect(!dump.contains(secret), "the dump holds \(secret)")
            }
            #expect(dump.contains("User bob") && dump.contains("bob@example.org"), "another user's data is untouched")
            #expect(try await client.me(bob.token).displayName == "User bob")

            // Her key is gone: her events, read with every key the server has, say nothing of her.
            let zeldaID = try registered.decode(RegisteredUser.self).id
            try await TestDatabase.withPool(database, size: 1) { pool in
                let store = EventStore(pool: pool, logger: TestDatabase.logger, personalData: testPersonalData(pool))
                let events = try await store.readStream(.user(zeldaID)).map(Aggregate.user.codec.decode)
                guard case .registered(let read) = events.first else { Issue.record("\(events)"); return }
                #expect(read.displayName == Redacted.name && read.email == Redacted.text && read.country == nil)
                let bids = try await store.readStream(.item(bikes.id)).map(Aggregate.item.codec.decode)
                #expect(bids.contains { if case .bidPlaced(let placed) = $0 { placed.message == Redacted.text } else { false } })
            }

            // The log still verifies, the views are what a replay makes, the money adds up.
            #expect(try runLender(["audit", "verify"], database: database).contains("intact"))
            #expect(try runLender(["replay", "--verify"], database: database).contains("no differences"))
            #expect(try runLender(["audit", "money"], database: database).contains("Money adds up"))
        }
    }

    /// Another server forgets Ada while this one still holds her key in its cache: what this
    /// one would seal for her after that is refused at the append, under the log head.
    @Test func nothingIsSealedForSomeoneForgottenElsewhere() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            _ = try await client.postRental(ada.token)
            try await admin.query(
                "UPDATE data_keys SET wrapped = NULL, master_key_id = NULL, forgotten_at = now() WHERE subject = \(ada.id.dataSubject)")
            let before = try await eventCount(admin)
            let late = try await client.send(
                .post, "/v1/rentals",
                body: API.RentalBody(
                    title: "Late", description: "", category: .tools, dailyPriceCents: 500,
                    location: API.LocationInput(lat: 1.5, lng: 2.5, place: "Somewhere")), token: ada.token)
            #expect(late.status == .unauthorized && late.json["code"] as? String == "unauthenticated", "\(late)")
            #expect(try await eventCount(admin) == before)
            #expect(try await count(admin, "SELECT count(*) FROM items_view WHERE place = 'Somewhere'") == 0)
            // Bob, in the same moment, is not held up by her.
            let bob = try await client.user("bob")
            _ = try await client.postRental(bob.token)
        }
    }

    /// The same close sent ten times at once: one closes, the others find it closed.
    @Test func aBurstOfClosesForgetsOnce() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        Int(
                            try await client.send(
                                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: ada.token
                            ).status.code)
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            // The rest: 401 (closed), or 429 once their password checks against the emptied
            // hash count as failed logins past the limit; never a second close, never a 404 or 5xx.
            #expect(statuses.filter { $0 == 204 }.count == 1, "\(statuses.sorted())")
            #expect(statuses.allSatisfy { [204, 401, 429].contains($0) } && statuses.contains(401), "\(statuses.sorted())")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'UserForgotten'") == 1)
        }
    }

    @Test func anOperatorForgetsByHandle() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            _ = try await client.postRental(ada.token)
            let database = try await ownerURL(admin)
            #expect(try runLender(["users", "forget", "ada"], database: database).contains("ada is forgotten"))
            // Revoked in the database (a server that cached the session hears of it by
            // `lender_sessions`, which the router-only test server does not listen to).
            #expect(try await count(admin, "SELECT count(*) FROM sessions WHERE user_id = \(ada.id.rawValue) AND revoked_at IS NULL") == 0)
            #expect(
                try await client.send(.post, "/v1/sessions", body: API.LoginBody(handle: "ada", password: "correct horse battery"))
                    .status == .unauthorized)
            #expect(try await count(admin, "SELECT count(*) FROM users_view WHERE display_name = 'User ada'") == 0)
            #expect(try await count(admin, "SELECT count(*) FROM data_keys WHERE forgotten_at IS NOT NULL AND wrapped IS NULL") == 1)
            _ = try runLender(["users", "forget", "ada"], database: database, expectedStatus: 1)
            #expect(try runLender(["replay", "--verify"], database: database).contains("no differences"))
        }
    }

    @Test func theExportHoldsEverythingTheUserMadeAsTheLogSaysIt() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            try await client.fund(ada.token, 7500)
            var posted = Set<String>()
            for title in ["Tent", "Kayak", "Drill"] { posted.insert("\(try await client.postRental(ada.token, title: title).id)") }
            // A request, so that approving her bid reserves it and `complete` closes the deal
            // both then review (a rental's approval only books days; it never completes).
            let bikes = try await client.postRequest(bob.token, title: "Road bike")
            let bid = try await client.bid(bikes.id, ada.token)
            #expect(bid.status == .created)
            let bidID = try bid.decode(BidResource.self).id
            #expect(
                try await client.send(.post, "/v1/bids/\(bidID)/messages", body: API.MessageBody(text: "Is it fast?"), token: ada.token)
                    .status == .created)
            #expect(
                try await client.send(.post, "/v1/bids/\(bidID)/messages", body: API.MessageBody(text: "Very"), token: bob.token)
                    .status == .created)
            #expect(try await client.send(.post, "/v1/bids/\(bidID)/approve", token: bob.token).status == .ok)
            #expect(try await client.complete(bikes.id, bob.token, clock: clock).status == .ok)
            #expect(
                try await client.send(
                    .post, "/v1/items/\(bikes.id)/reviews", body: API.ReviewBody(stars: 5, text: "Fast indeed"), token: ada.token
                ).status == .created)
            #expect(
                try await client.send(.post, "/v1/items/\(bikes.id)/reviews", body: API.ReviewBody(stars: 4), token: bob.token)
                    .status == .created)
            let loan = try await client.postLoan(bob.token)
            _ = try await client.addToCart(ada.token, loan, 2500)
            #expect(
                try await client.send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: ada.token).status == .ok)
            let own = try await client.postLoan(ada.token, title: "Oven")

            let search = try await client.send(
                .post, "/v1/me/saved-searches", body: API.SavedSearchBody(name: "Bikes", query: "q=bike&category=bikes"), token: ada.token)
            #expect(search.status == .created, "\(search)")
            let reported = try await client.send(
                .post, "/v1/reports", body: API.ReportBody(subjectType: .loan, subjectId: loan.rawValue, reason: .spam, text: "Again"),
                token: ada.token)
            #expect(reported.status == .created, "\(reported)")

            let reply = try await client.send(.get, "/v1/me/export", token: ada.token)
            #expect(reply.status == .ok, "\(reply)")
            let export = reply.json
            #expect((export["savedSearches"] as? [[String: Any]])?.map { $0["query"] as? String } == ["q=bike&category=bikes"])
            #expect((export["reports"] as? [[String: Any]])?.map { $0["text"] as? String } == ["Again"], "her reports too")
            #expect((export["profile"] as? [String: Any])?["email"] as? String == "ada@example.org")
            #expect(((export["profile"] as? [String: Any])?["cards"] as? [Any])?.count == 1)
            // Against the log: every item she posted, bid she placed, loan she borrowed or lent
            // to, and every movement of her money, at its position.
            let items = try await admin.query(
                "SELECT stream_id FROM events WHERE type IN ('RentalPosted', 'RequestPosted') AND metadata->>'actorID' = \("\(ada.id)")")
            let logged = Set(try items.map { String(try $0.decode("stream_id", as: String.self).dropFirst("item-".count)) })
            #expect(Set((export["posts"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }) == logged)
            #expect(logged == posted)
            #expect((export["bids"] as? [[String: Any]])?.map { $0["itemId"] as? String } == ["\(bikes.id)"])
            #expect((export["loansLent"] as? [[String: Any]])?.map { $0["loanId"] as? String } == ["\(loan)"])
            #expect((export["loansBorrowed"] as? [[String: Any]])?.map { $0["loanId"] as? String } == ["\(own)"])
            let money = try await admin.query(
                """
                SELECT position FROM events WHERE stream_id = \("user-\(ada.id)")
                AND type IN ('FundsDeposited', 'BalanceDebited', 'CardCharged', 'BalanceCredited') ORDER BY position
                """)
            let positions = try money.map { try $0.decode("position", as: Int64.self) }
            #expect(positions.count == 2)
            #expect((export["balanceHistory"] as? [[String: Any]])?.compactMap { ($0["position"] as? NSNumber)?.int64Value } == positions)
            #expect((export["messages"] as? [[String: Any]])?.compactMap { $0["text"] as? String } == ["Is it fast?", "Very"])
            #expect((export["reviews"] as? [[String: Any]])?.compactMap { $0["stars"] as? Int } == [5, 4], "written and received")
            // Another user's export is theirs alone.
            let bobs = try await client.send(.get, "/v1/me/export", token: bob.token).json
            #expect((bobs["posts"] as? [[String: Any]])?.count == 1 && (bobs["bids"] as? [Any])?.isEmpty == true)
            let carol = try await client.user("carol")
            let carols = try await client.send(.get, "/v1/me/export", token: carol.token).json
            #expect((carols["messages"] as? [Any])?.isEmpty == true && (carols["reviews"] as? [Any])?.isEmpty == true)
        }
    }

    @Test func theAuditorsFeedCarriesPersonalFieldsSealed() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            try await admin.query("INSERT INTO auditors (user_id) VALUES (\(ada.id.rawValue))")
            _ = try await client.postRental(ada.token)
            let feed = try await client.send(.get, "/v1/events", token: ada.token)
            #expect(feed.status == .ok)
            let text = String(decoding: feed.data, as: UTF8.self)
            #expect(text.contains("RentalPosted") && text.contains("$sealed"))
            #expect(!text.contains("ada@example.org") && !text.contains("User ada") && !text.contains("Kathmandu"), "\(text)")
        }
    }

    /// Events as the first release stored them, in clear: they read as they always did.
    @Test func clearTextEventsOfTheFirstReleaseStillRead() async throws {
        try await withServer { _, admin in
            let user = UserID()
            let item = ItemID()
            let fixture: [(StreamID, String, String)] = [
                (
                    .user(user), "UserRegistered",
                    #"{"userID":"\#(user)","handle":"old","displayName":"Old Timer","email":"old@example.org","country":"NP"}"#
                ),
                (
                    .user(user), "PaymentCardAdded",
                    #"{"cardID":"\#(CardID())","network":"visa","last4":"4242","expMonth":12,"expYear":2030,"fingerprint":"fp1","processorToken":"tok_1"}"#
                ),
                (
                    .item(item), "RentalPosted",
                    #"{"itemID":"\#(item)","ownerID":"\#(user)","title":"Saw","description":"","category":"tools","dailyPriceCents":300,"location":{"lat":27.7,"lng":85.3,"place":"Patan"}}"#
                ),
            ]
            let configuration = try await ownerURL(admin)
            try await TestDatabase.withPool(configuration, size: 2) { pool in
                let old = EventStore(pool: pool, logger: TestDatabase.logger)
                for (stream, type, json) in fixture {
                    try await old.append(to: stream, expectedVersion: .any, events: [NewEvent(type: type, data: JSONB(text: json))])
                }
                let store = EventStore(pool: pool, logger: TestDatabase.logger, personalData: testPersonalData(pool))
                let events = try await store.readStream(.user(user)).map(Aggregate.user.codec.decode)
                guard case .registered(let registered) = events.first, case .cardAdded(let card) = events.last else {
                    Issue.record("\(events)")
                    return
                }
                #expect(registered.email == "old@example.org" && registered.displayName == "Old Timer")
                #expect(card.fingerprint == "fp1" && card.processorToken == "tok_1")
                let posted = try await store.readStream(.item(item)).map(Aggregate.item.codec.decode)
                guard case .rentalPosted(let rental) = posted.first else { Issue.record("\(posted)"); return }
                #expect(rental.location.place == "Patan")
            }
        }
    }

    @Test func aRotatedMasterKeyStillOpensEverything() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let database = try await ownerURL(admin)
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("rotate-\(mark)").path
            try Data((testMasterKeyLine + "\n").utf8).write(to: URL(fileURLWithPath: file))
            defer { try? FileManager.default.removeItem(atPath: file) }
            try await TestDatabase.withPool(database, size: 1) { pool in
                // A server that started on the file before the rotation.
                let running = DataKeys(pool: pool, masters: testMasterKeys, file: file)
                let output = try runLender(["keys", "rotate-master"], database: database, environment: ["DATA_KEY_FILE": file])
                #expect(output.contains("Rewrapped 2 data keys"), "ada's and the e-mail index's: \(output)")
                let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
                #expect(lines.count == 2 && lines.last.map(String.init) == testMasterKeyLine)
                let current = try MasterKeys(file: file).currentID
                #expect(try await count(admin, "SELECT count(*) FROM data_keys WHERE master_key_id = \(current)") == 2)
                // The key it makes next is wrapped by the new master key, not the one it started with.
                _ = try await running.sealingKey(for: "someone-new")
                #expect(
                    try await count(admin, "SELECT count(*) FROM data_keys WHERE subject = 'someone-new' AND master_key_id = \(current)")
                        == 1)
                // The rotated file opens every key; the old key alone opens none.
                #expect(try await DataKeys(pool: pool, masters: try MasterKeys(file: file)).openingKeys(for: [ada.id.dataSubject]).count == 1)
                let stale = DataKeys(pool: pool, masters: testMasterKeys)
                await #expect(throws: DataKeyError.self) { try await stale.openingKeys(for: [ada.id.dataSubject]) }
                // A key made under the old master by a server that never saw the rotation is
                // rewrapped by the next server to start.
                _ = try await stale.sealingKey(for: "straggler")
                let server = try await ServerProcess(database: database, environment: ["DATA_KEY_FILE": file])
                #expect(
                    try await count(admin, "SELECT count(*) FROM data_keys WHERE subject = 'straggler' AND master_key_id = \(current)")
                        == 1)
                server.kill(SIGTERM)
                _ = await server.waitForExit()
            }
            #expect(try runLender(["replay", "--verify"], database: database, environment: ["DATA_KEY_FILE": file]).contains("no differences"))
        }
    }

    @Test func serveRefusesToStartWithoutAMasterKey() async throws {
        try await withServerDatabase { configuration, _ in
            let empty = FileManager.default.temporaryDirectory.appendingPathComponent("no-keys-\(mark)").path
            FileManager.default.createFile(atPath: empty, contents: Data())
            defer { try? FileManager.default.removeItem(atPath: empty) }
            let printed = try runLenderFailing(
                ["serve"], database: configuration,
                environment: ["DATA_KEY_FILE": empty, "CARD_FINGERPRINT_SECRET": "lender-tests-card-fingerprint-secret", "PORT": "0"])
            // Exit 1 alone could be any refusal: it must be the key's (`DataKeyError.noMasterKey`).
            #expect(printed.contains("no master key (the key file holds no key)"), "\(printed)")
        }
    }
}
