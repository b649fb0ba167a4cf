import Aggregates
import EventStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import ServerTestSupport
import Testing
import TestSupport
import UseCases

/// Suspensions (SPEC §12.5): an operator's sanction short of erasure, and its end.
@Suite("Suspensions")
struct SuspensionsTests {
    /// Every write route of the API (its method, and its path with made-up ids), but logging out.
    static var writeRoutes: [(HTTPRequest.Method, String)] {
        let paths = OpenAPITests.repositoryDocument["paths"] as? [String: [String: Any]] ?? [:]
        var routes = [(HTTPRequest.Method, String)]()
        for (path, operations) in paths {
            for (method, operation) in operations {
                guard let method = ["post": HTTPRequest.Method.post, "put": .put, "patch": .patch, "delete": .delete][method],
                    let security = (operation as? [String: Any])?["security"] as? [Any], !security.isEmpty,
                    !(method == .delete && path == "/v1/sessions/current")
                else { continue }
                let filled = path.split(separator: "/").map { $0.hasPrefix("{") ? UUID().uuidString.lowercased() : String($0) }
                routes.append((method, filled.joined(separator: "/")))
            }
        }
        return routes
    }

    /// Ada with a rental posted, and Desk, an operator; the database as its owner.
    static func adaWithADrillAndAnOperator(_ client: any TestClientProtocol, _ admin: PostgresPool) async throws
        -> (ada: (id: UserID, token: String), desk: (id: UserID, token: String), database: PostgresConfiguration, drill: ItemID)
    {
        let ada = try await client.user("ada")
        let desk = try await client.user("desk")
        let database = try await ownerURL(admin)
        _ = try runLender(["users", "grant-operator", "desk"], database: database)
        return (ada, desk, database, try await client.postRental(ada.token, title: "Drill").id)
    }

    @Test func aSuspendedUserReadsButNeitherWritesNorKeepsTheirSessions() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            let carol = try await client.user("carol")
            let desk = try await client.user("desk")
            try await client.fund(ada.token, 10_000)
            // Ada's drill with Bob's bid on it; Ada's own bid on Carol's tent, held on her balance.
            let drill = try await client.postRental(ada.token, title: "Drill").id
            let loan = try await client.postLoan(ada.token)
            let bobsBid = try #require(try await client.bid(drill, bob.token).json["id"] as? String)
            let tent = try await client.postRental(carol.token, title: "Tent").id
            let adasBid = try await client.send(
                .post, "/v1/items/\(tent)/bids",
                body: API.BidBody(dailyPriceCents: 1400, from: "2026-12-05", until: "2026-12-07", payWith: .balance), token: ada.token)
            let adasBidID = try #require(adasBid.json["id"] as? String, "\(adasBid)")
            let available = { try await client.send(.get, "/v1/me", token: $0).json["availableCents"] as? Int }
            #expect(try await available(ada.token) ?? 10_000 < 10_000, "the bid holds part of her balance")

            let path = "/v1/admin/users/\(ada.id)/suspend"
            let stranger = try await client.send(.post, path, body: API.SuspendBody(reason: "Scam"), token: bob.token)
            #expect(stranger.status == .forbidden && stranger.code == "not_operator", "\(stranger)")
            _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
            let reasonless = try await client.send(.post, path, json: [:], token: desk.token)
            #expect(reasonless.status == .unprocessableContent && reasonless.fieldCodes["reason"] == "reason_required", "\(reasonless)")
            let past = try await client.send(
                .post, path, body: API.SuspendBody(reason: "Scam", until: ISO8601DateFormatter().date(from: "2020-01-01T00:00:00Z")!),
                token: desk.token)
            #expect(past.status == .unprocessableContent && past.fieldCodes["until"] == "invalid_until", "\(past)")
            let garbled = try await client.send(.post, path, json: ["reason": "Scam", "until": "soon"], token: desk.token)
            #expect(garbled.status == .unprocessableContent && garbled.fieldCodes["until"] == "invalid_time", "\(garbled)")
            let nobody = try await client.send(
                .post, "/v1/admin/users/\(UUID())/suspend", body: API.SuspendBody(reason: "x"), token: desk.token)
            #expect(nobody.status == .notFound, "\(nobody)")
            let notYet = try await client.send(
                .post, "/v1/admin/users/\(ada.id)/reinstate", body: API.ReasonBody(reason: "x"), token: desk.token)
            #expect(notYet.status == .conflict && notYet.code == "not_suspended", "\(notYet)")

            let suspended = try await client.send(.post, path, body: API.SuspendBody(reason: "Drills that are not hers"), token: desk.token)
            #expect(suspended.status == .ok && suspended.json["suspended"] as? Bool == true, "\(suspended)")

            // Her session is gone; she may sign in again and read, but writes nothing.
            #expect(try await client.send(.get, "/v1/me", token: ada.token).status == .unauthorized)
            let again = try await client.login("ada")
            #expect(try await client.send(.get, "/v1/me", token: again).status == .ok)
            #expect(try await client.send(.get, "/v1/market", token: again).status == .ok)
            let before = try await eventCount(admin)
            for (method, route) in Self.writeRoutes {
                let refused = try await client.send(method, route, json: [:], token: again)
                #expect(refused.status == .forbidden && refused.code == "account_suspended", "\(method) \(route): \(refused)")
            }
            #expect(try await eventCount(admin) == before, "the refusals wrote nothing")

            // Her drill is out of the market and Bob's bid on it rejected; her bid withdrawn, its hold released.
            #expect(try await client.send(.get, "/v1/items/\(drill)", token: bob.token).json["status"] as? String == "suspended")
            let market = try await client.send(.get, "/v1/market", token: bob.token).json["data"] as? [[String: Any]] ?? []
            #expect(!market.contains { $0["id"] as? String == drill.description })
            let bobs = try await client.send(.get, "/v1/me/bids", token: bob.token).json["data"] as? [[String: Any]] ?? []
            let rejected = bobs.first { $0["id"] as? String == bobsBid }
            #expect(rejected?["status"] as? String == "rejected" && rejected?["reason"] as? String == "owner_suspended", "\(bobs)")
            let carols = try await client.send(.get, "/v1/items/\(tent)/bids", token: carol.token).json["data"] as? [[String: Any]]
            #expect(carols?.first { $0["id"] as? String == adasBidID }?["status"] as? String == "withdrawn", "\(carols ?? [])")
            #expect(try await available(again) == 10_000)
            // Her loan raising money is in no list, and nobody lends to it meanwhile.
            #expect(try await client.send(.get, "/v1/loans/\(loan)", token: bob.token).json["status"] as? String == "suspended")
            let loans = try await client.send(.get, "/v1/loans", token: bob.token).json["data"] as? [[String: Any]] ?? []
            #expect(!loans.contains { $0["id"] as? String == loan.description }, "\(loans)")
            #expect(try await client.addToCart(bob.token, loan, 2500).status == .conflict)
            // The log says who did it, and why.
            let act = try await admin.query(
                """
                SELECT metadata->>'actorID' AS actor, data->>'reason' AS reason FROM events
                WHERE stream_id = \("user-\(ada.id)") AND type = 'UserSuspended'
                """
            ).single()
            #expect(try act.decode("actor", as: String.self) == desk.id.description)
            #expect(try act.decode("reason", as: String.self) == "Drills that are not hers")
            #expect(try await client.send(.delete, "/v1/sessions/current", token: again).status == .noContent, "she may log out")

            // Reinstated: she writes again, and her drill is back in the market.
            let reinstated = try await client.send(
                .post, "/v1/admin/users/\(ada.id)/reinstate", body: API.ReasonBody(reason: "The drills were hers"), token: desk.token)
            #expect(reinstated.status == .ok && reinstated.json["suspended"] as? Bool == false, "\(reinstated)")
            let back = try await client.login("ada")
            let changed = try await client.send(.patch, "/v1/me", body: API.ProfileBody(displayName: "Ada again"), token: back)
            #expect(changed.status == .ok, "\(changed)")
            #expect(try await client.send(.get, "/v1/items/\(drill)", token: bob.token).json["status"] as? String == "available")
            #expect(try await client.send(.get, "/v1/loans/\(loan)", token: bob.token).json["status"] as? String == "fundraising")
            let twice = try await client.send(
                .post, "/v1/admin/users/\(ada.id)/reinstate", body: API.ReasonBody(reason: "x"), token: desk.token)
            #expect(twice.status == .conflict && twice.code == "not_suspended", "\(twice)")

            let database = try await ownerURL(admin)
            #expect(try runLender(["audit", "money"], database: database).contains("Money adds up"))
            #expect(try runLender(["replay", "--verify"], database: database).contains("no differences"))
        }
    }

    @Test func aSuspensionUntilATimeEndsByItselfAndTheJobsPutThePostingsBack() async throws {
        try await withServer { client, admin in
            let (ada, desk, database, drill) = try await Self.adaWithADrillAndAnOperator(client, admin)
            /// Until `seconds` from now (whole seconds on the wire); when that is.
            @discardableResult func suspend(for seconds: Double) async throws -> Date {
                let until = Date().addingTimeInterval(seconds)
                let suspended = try await client.send(
                    .post, "/v1/admin/users/\(ada.id)/suspend",
                    body: API.SuspendBody(reason: "A cooling-off", until: until), token: desk.token)
                #expect(suspended.status == .ok && suspended.json["until"] is String, "\(suspended)")
                return until
            }
            try await suspend(for: 60)
            let refused = try await client.send(
                .patch, "/v1/me", body: API.ProfileBody(displayName: "Ada"), token: try await client.login("ada"))
            #expect(refused.status == .forbidden && refused.code == "account_suspended", "\(refused)")
            // The jobs leave a suspension that still holds.
            #expect(try runLender(["jobs", "run"], database: database).contains(", 0 suspensions ended"))

            // Suspended again, for a few seconds (a loaded machine takes one to answer): a new `until`.
            let until = try await suspend(for: 15)
            let token = try await client.login("ada")
            try await Task.sleep(for: .seconds(max(0, until.timeIntervalSinceNow) + 1.5))
            // Past `until` her writes are taken at once, before the jobs have ended it.
            let taken = try await client.send(.patch, "/v1/me", body: API.ProfileBody(displayName: "Ada"), token: token)
            #expect(taken.status == .ok, "\(taken)")
            #expect(try await client.send(.get, "/v1/items/\(drill)", token: token).json["status"] as? String == "suspended")
            #expect(try runLender(["jobs", "run"], database: database).contains(", 1 suspensions ended"))
            #expect(try await client.send(.get, "/v1/items/\(drill)", token: token).json["status"] as? String == "available")
            let ended = try await admin.query(
                "SELECT metadata->>'actorID' AS actor FROM events WHERE stream_id = \("user-\(ada.id)") AND type = 'UserReinstated'"
            ).single()
            #expect(try ended.decode("actor", as: String?.self) != desk.id.description, "the jobs ended it, not an operator")
            #expect(try await count(admin, "SELECT count(*) FROM suspensions_view") == 0)
        }
    }

    /// Two servers trusting a checked session for five minutes: a suspension on A ends the
    /// session on B at once, and a reinstatement on A lets the session B read while it held
    /// write on B at once (both announced, not waited out).
    @Test func aSuspensionAndItsEndReachEveryServerAtOnce() async throws {
        try await withServerDatabase { database, admin in
            let environment = ["SESSION_CACHE_SECONDS": "300"]
            let a = try await ServerProcess(database: database, environment: environment)
            defer { a.kill(SIGTERM) }
            let b = try await ServerProcess(database: database, environment: environment)
            defer { b.kill(SIGTERM) }
            let ada = try await a.user("ada")
            let desk = try await a.user("desk")
            _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
            #expect(try await b.send(.get, "/v1/me", token: ada.token).status == .ok, "B trusts her session now")

            let suspended = try await a.send(
                .post, "/v1/admin/users/\(ada.id)/suspend", body: API.SuspendBody(reason: "Spam"), token: desk.token)
            #expect(suspended.status == .ok, "\(suspended)")
            func soon(_ check: () async throws -> Bool) async throws -> Bool {
                let clock = ContinuousClock()
                let start = clock.now
                while clock.now - start < .seconds(2) {
                    if try await check() { return true }
                    try await Task.sleep(for: .milliseconds(20))
                }
                return false
            }
            #expect(try await soon { try await b.send(.get, "/v1/me", token: ada.token).status == .unauthorized })
            let session = try await b.send(.post, "/v1/sessions", body: API.LoginBody(handle: "ada", password: "correct horse battery"))
            let token = try #require(session.json["token"] as? String)
            let refused = try await b.send(.patch, "/v1/me", body: API.ProfileBody(displayName: "Ada"), token: token)
            #expect(refused.status == .forbidden && refused.code == "account_suspended", "B read her suspension: \(refused)")

            let reinstated = try await a.send(
                .post, "/v1/admin/users/\(ada.id)/reinstate", body: API.ReasonBody(reason: "Fine"), token: desk.token)
            #expect(reinstated.status == .ok, "\(reinstated)")
            #expect(
                try await soon { try await b.send(.patch, "/v1/me", body: API.ProfileBody(displayName: "Ada"), token: token).status == .ok })
        }
    }

    /// A suspension or its end committed without its sweep (the server died between them, or
    /// a posting slipped in while it was decided): the jobs bring every posting and bid in
    /// line with its user's standing.
    @Test func theJobsFinishASweepThatNeverRan() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            let desk = try await client.user("desk")
            let database = try await ownerURL(admin)
            let drill = try await client.postRental(ada.token, title: "Drill").id
            let tent = try await client.postRental(bob.token, title: "Tent").id
            let bid = try #require(try await client.bid(tent, ada.token).json["id"] as? String)
            // The acts alone, as the server commits them before it sweeps.
            let store = EventStore(
                pool: admin, logger: TestDatabase.logger, projections: lenderProjections, personalData: testPersonalData(admin))
            let gateway = CommandGateway(store: store, logger: TestDatabase.logger)
            _ = try await gateway.handle(
                UserCommand.suspend(by: desk.id, reason: "Spam", until: nil, now: Date()), on: .user, id: ada.id, actor: desk.id)
            #expect(try await client.send(.get, "/v1/items/\(drill)", token: bob.token).json["status"] as? String == "available")

            #expect(try runLender(["jobs", "run"], database: database).contains(", 0 suspensions ended"))
            #expect(try await client.send(.get, "/v1/items/\(drill)", token: bob.token).json["status"] as? String == "suspended")
            let bids = try await client.send(.get, "/v1/items/\(tent)/bids", token: bob.token).json["data"] as? [[String: Any]]
            #expect(bids?.first { $0["id"] as? String == bid }?["status"] as? String == "withdrawn", "\(bids ?? [])")

            _ = try await gateway.handle(
                UserCommand.reinstate(by: desk.id, reason: "Fine", now: Date()), on: .user, id: ada.id, actor: desk.id)
            _ = try runLender(["jobs", "run"], database: database)
            #expect(try await client.send(.get, "/v1/items/\(drill)", token: bob.token).json["status"] as? String == "available")
            #expect(try runLender(["audit", "money"], database: database).contains("Money adds up"))
        }
    }

    /// A suspended user forgotten before their `until`: the jobs neither fail on them nor keep
    /// the operator's words about them; their suspended posting is withdrawn with them.
    @Test func aForgottenSuspendedUserLeavesNothingForTheJobs() async throws {
        try await withServer { client, admin in
            let (ada, desk, database, drill) = try await Self.adaWithADrillAndAnOperator(client, admin)
            // Far enough ahead that a loaded machine (CI saw 3 s a request) still takes it as to come.
            let end = Date().addingTimeInterval(15)
            let key = "suspend-ada-once"
            for _ in 0..<2 {
                let suspended = try await client.send(
                    .post, "/v1/admin/users/\(ada.id)/suspend", body: API.SuspendBody(reason: "Spam", until: end), token: desk.token,
                    idempotencyKey: key)
                #expect(suspended.status == .ok, "\(suspended)")
            }
            #expect(
                try await count(admin, "SELECT count(*) FROM events WHERE type = 'UserSuspended'") == 1,
                "a repeated Idempotency-Key is the same act")
            _ = try runLender(["users", "forget", "ada"], database: database)
            try await Task.sleep(for: .seconds(max(0, end.timeIntervalSinceNow) + 0.5))
            #expect(try runLender(["jobs", "run"], database: database).contains(", 0 suspensions ended"))
            #expect(try await count(admin, "SELECT count(*) FROM suspensions_view") == 0)
            #expect(try await count(admin, "SELECT count(*) FROM items_view WHERE item_id = \(drill.rawValue) AND status = 'withdrawn'") == 1)
        }
    }
}
