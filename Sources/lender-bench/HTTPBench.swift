import ArgumentParser
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore

/// HTTP load against a running `lender serve`: keep-alive connections, each a closed loop of
/// requests, bounded in time. Prints one JSON object of figures.
struct HTTPBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http",
        abstract: "Load a running server: post_rentals, place_bids (held on the balance), place_bids_card (a card authorisation each) or place_request_bids (no money: bids on requests) spread over --items items, book_rentals or book_rentals_card (approvals over --items rentals, capturing the holds), cart_checkout, me_200_posts, me_2000_posts, market_near, market_newest, market_words, market_available_dates, availability, loans_near, clusters_world, clusters_region or clusters_city.")

    static let scenarios = ["post_rentals", "place_bids", "place_bids_card", "place_request_bids", "book_rentals", "book_rentals_card",
        "cart_checkout", "me_200_posts", "me_2000_posts", "market_near",
        "market_newest", "market_words", "market_available_dates", "availability", "loans_near", "register_users", "clusters_world",
        "clusters_region", "clusters_city",
    ]

    @Argument(help: "One of \(scenarios.joined(separator: ", "))") var scenario: String
    @Option var port: Int
    @Option var connections = 64
    @Option var seconds = 10.0
    @Option(help: "Items the bids are spread over (place_bids, book_rentals).") var items = 1000
    @Option(help: "Bids placed before the run, each approved once during it (book_rentals).") var bookings = 48_000
    @Option(help: "Who sends the load after the set-up: this program, or wrk (not register_users or cart_checkout).")
    var client = "lender-bench"

    func run() async throws {
        guard Self.scenarios.contains(scenario) else { throw ValidationError("unknown scenario \(scenario)") }
        // Refused before the set-up, which registers a user per connection.
        guard client == "lender-bench" || client == "wrk" else { throw ValidationError("the client is lender-bench or wrk") }
        if client == "wrk", !Self.wrkScenarios.contains(scenario) {
            throw ValidationError("wrk sends the reads, post_rentals and place_bids")
        }
        // One pending bid per item and bidder: past items × connections bids, the rest are
        // refused (409) and counted as failures.
        if scenario.hasPrefix("place_"), Double(items * connections) < seconds * Self.bidsPerSecondAtMost {
            FileHandle.standardError.write(
                Data("warning: place_bids has \(items * connections) (item, user) pairs, fewer than \(Int(seconds * Self.bidsPerSecondAtMost)) bids might ask for in \(seconds) s; past them bids are refused (raise --items)\n".utf8))
        }
        let run = UUID().uuidString.prefix(6).lowercased()
        let setup = TestClient(host: "127.0.0.1", port: port)
        setup.connect()
        // One user per connection, and for bids an owner with the items.
        var tokens = [String]()
        for index in 0..<connections { tokens.append(try await Self.user("b\(run)_\(index)", setup)) }
        var targets = [String]()
        var readPath = Self.readPath(scenario)
        // What each user's bids pay with (SPEC §12.2): the body of each, user by user.
        var bidBodies = Array(repeating: Self.bidBody, count: tokens.count)
        switch scenario {
        case "place_bids", "place_bids_card", "book_rentals", "book_rentals_card":
            let card = scenario.hasSuffix("_card")
            for (user, token) in tokens.enumerated() {
                let cardID = try Self.field("id", try await Self.send(setup, .post, "/v1/me/cards", Self.card, token).1)
                if card {
                    bidBodies[user] = Self.bidBody(paying: #""payWith":"card","cardId":"\#(cardID)""#)
                } else {
                    let deposit = ["amountCents": 500_000, "cardId": cardID] as [String: Any]
                    guard try await Self.send(setup, .post, "/v1/me/deposits", deposit, token).0 == 201 else {
                        throw ValidationError("a deposit failed")
                    }
                    bidBodies[user] = Self.bidBody(paying: #""payWith":"balance""#)
                }
            }
        default: break
        }
        switch scenario {
        case "place_bids", "place_bids_card":
            let owner = try await Self.user("o\(run)", setup)
            for index in 0..<items {
                let body = try await Self.send(setup, .post, "/v1/rentals", Self.rental("Item \(index)"), owner).1
                targets.append(try Self.field("id", body))
            }
        case "place_request_bids":
            // The same bids with no money: a request's (its days cover the bids').
            let owner = try await Self.user("o\(run)", setup)
            for index in 0..<items {
                let body = try await Self.send(setup, .post, "/v1/requests", Self.request("Item \(index)"), owner).1
                targets.append(try Self.field("id", body))
            }
        case "book_rentals", "book_rentals_card":
            // The owner's rentals, then bids of every user on `bookings / connections` of them,
            // each user on two days of its own so no two bids on a rental overlap: each
            // approval confirms a booking and rejects nothing. The run approves them (targets,
            // the approvals' paths) by user, so approvals in a row are on different rentals.
            let owner = try await Self.user("o\(run)", setup)
            var rentals = [String]()
            for index in 0..<items {
                rentals.append(try Self.field("id", try await Self.send(setup, .post, "/v1/rentals", Self.rental("Rental \(index)"), owner).1))
            }
            let perUser = min(items, bookings / connections)
            targets = try await Self.placeBids(on: rentals, by: tokens, paying: bidBodies, each: perUser, port: port)
                .map { "/v1/bids/\($0)/approve" }
            tokens = Array(repeating: owner, count: connections)
        case "availability":
            // One rental with 50 bookings of a day each over the next 90 days (its default
            // calendar): 50 renters bid, the owner approves.
            let owner = try await Self.user("o\(run)", setup)
            let rental = try Self.field("id", try await Self.send(setup, .post, "/v1/rentals", Self.rental("Booked rental"), owner).1)
            for index in 0..<50 {
                let renter = try await Self.user("a\(run)_\(index)", setup)
                let day = Self.day(1 + index * 9 / 5)
                let card = try Self.field("id", try await Self.send(setup, .post, "/v1/me/cards", Self.card, renter).1)
                let bid = ["dailyPriceCents": 1400, "from": day, "until": day, "payWith": "card", "cardId": card] as [String: Any]
                let placed = try await Self.send(setup, .post, "/v1/items/\(rental)/bids", bid, renter).1
                guard try await Self.send(setup, .post, "/v1/bids/\(try Self.field("id", placed))/approve", [:], owner).0 == 200 else {
                    throw ValidationError("an approval failed")
                }
            }
            readPath = "/v1/items/\(rental)/availability"
        case "cart_checkout":
            // Loans of 1,000,000 cents (400 shares each), enough that none fills during the run;
            // each lender holds 1,000,000 cents (400 checkouts of one share).
            let borrower = try await Self.user("l\(run)", setup)
            for index in 0..<100 {
                let body = try await Self.send(setup, .post, "/v1/loans", Self.loan("Loan \(index)"), borrower).1
                targets.append(try Self.field("id", body))
            }
            for token in tokens {
                let card = try await Self.send(setup, .post, "/v1/me/cards", Self.card, token).1
                for _ in 0..<2 {
                    let deposit = ["amountCents": 500_000, "cardId": try Self.field("id", card)] as [String: Any]
                    guard try await Self.send(setup, .post, "/v1/me/deposits", deposit, token).0 == 201 else {
                        throw ValidationError("a deposit failed")
                    }
                }
            }
        case "me_200_posts", "me_2000_posts":
            // Every connection reads the profile of one user with 200 (or 2,000) posts.
            let owner = try await Self.user("m\(run)", setup)
            for index in 0..<(scenario == "me_200_posts" ? 200 : 2000) {
                guard try await Self.send(setup, .post, "/v1/rentals", Self.rental("Post \(index)"), owner).0 == 201 else {
                    throw ValidationError("a post failed")
                }
            }
            tokens = Array(repeating: owner, count: connections)
        default: break
        }
        try await setup.shutdown()
        if client == "wrk" {
            let request: WrkLoad.Request =
                switch scenario {
                case "post_rentals": .postRental
                case "place_bids", "place_bids_card", "place_request_bids": .placeBid(items: targets, bodies: bidBodies)
                case "book_rentals", "book_rentals_card": .postEach(paths: targets)
                default: .read(path: readPath!)
                }
            try printFigures(try WrkLoad(request: request, tokens: tokens, port: port, seconds: seconds).run(scenario: scenario))
            return
        }
        let targetIDs = targets
        let bodies = bidBodies
        let scenario = scenario
        let getPath = readPath
        let connections = connections
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(seconds)
        let started = clock.now
        let (latencies, failures) = try await withThrowingTaskGroup(of: ([Double], Int).self) { group in
            for (connection, token) in tokens.enumerated() {
                group.addTask {
                    let client = TestClient(host: "127.0.0.1", port: port)
                    client.connect()
                    defer { Task { try? await client.shutdown() } }
                    var latencies = [Double]()
                    var failures = 0
                    var index = 0
                    while clock.now < deadline {
                        index += 1
                        let begin = clock.now
                        let succeeded: Bool
                        switch scenario {
                        case _ where getPath != nil:
                            succeeded = try await Self.get(client, getPath!, token) == 200
                        case "book_rentals", "book_rentals_card":
                            // Each connection its own approvals, in the order of the list.
                            let path = targetIDs[((index - 1) * connections + connection) % targetIDs.count]
                            succeeded = try await Self.post(client, path, "", token) == 200
                        case "register_users":
                            // A new account each time (bcrypt at the server's BCRYPT_COST): its data key, its sealed fields.
                            let user = #"{"handle":"r\#(run)_\#(connection)_\#(index)","displayName":"Bench \#(index)","email":"r\#(run)_\#(connection)_\#(index)@bench.example","password":"correct horse battery","country":"NP"}"#
                            succeeded = try await Self.post(client, "/v1/users", user, token) == 201
                        case "post_rentals":
                            let rental = Self.rentalBody(title: "Bench \(connection)-\(index)")
                            succeeded = try await Self.post(client, "/v1/rentals", rental, token) == 201
                        case "cart_checkout":
                            // One pair: a share of a loan into the cart, then the checkout from the balance.
                            let line = #"{"loanId":"\#(targetIDs[(connection * 7 + index) % targetIDs.count])","amountCents":2500}"#
                            let added = try await Self.post(client, "/v1/cart/items", line, token) == 201
                            succeeded = try await Self.post(client, "/v1/cart/checkout", #"{"payWith":"balance"}"#, token) == 200 && added
                        default:
                            // Each user bids on the items in turn: one pending bid per item and bidder.
                            let item = targetIDs[(connection * 7 + index) % targetIDs.count]
                            succeeded = try await Self.post(client, "/v1/items/\(item)/bids", bodies[connection], token) == 201
                        }
                        latencies.append((clock.now - begin).milliseconds)
                        if !succeeded { failures += 1 }
                    }
                    return (latencies, failures)
                }
            }
            return try await group.reduce(into: ([Double](), 0)) { $0.0 += $1.0; $0.1 += $1.1 }
        }
        let elapsed = (clock.now - started).milliseconds / 1000
        let sorted = latencies.sorted()
        let figures = HTTPFigures(
            scenario: scenario, connections: connections, requests: sorted.count, failures: failures, seconds: elapsed,
            throughput: Double(sorted.count - failures) / elapsed, p50Ms: sorted.percentile(0.50),
            p90Ms: sorted.percentile(0.90), p99Ms: sorted.percentile(0.99))
        try printFigures(figures)
    }

    /// More bids a second than this machine has run (4,418 alone): a run that could ask for
    /// more pairs than this many seconds' worth is warned of.
    static let bidsPerSecondAtMost = 6_000.0

    /// The bodies of post_rentals (a title each time) and place_bids, whichever client sends them.
    static func rentalBody(title: String) -> String {
        #"{"title":"\#(title)","category":"tools","dailyPriceCents":500,"location":{"lat":27.7,"lng":85.3,"place":"Kathmandu"}}"#
    }
    /// A bid at a cent a day (3 days: a charge of 3 cents, no fees), so that a balance of
    /// 500,000 cents holds every bid a run places; with no money said, a request's.
    static let bidBody = bidBody(paying: nil)

    static func bidBody(paying: String?) -> String {
        #"{"dailyPriceCents":1,"from":"2027-01-05","until":"2027-01-07"\#(paying.map { "," + $0 } ?? "")}"#
    }

    /// What wrk can send: the reads, and the commands of one request each whose bodies its Lua writes.
    static let wrkScenarios: Set<String> = Set(scenarios).subtracting(["register_users", "cart_checkout"])

    /// The path a read scenario asks for, the same every time; nil for the commands.
    static func readPath(_ scenario: String) -> String? {
        switch scenario {
        case "market_near": marketQuery
        case "market_newest": newestQuery
        case "market_words": wordsQuery
        case "loans_near": loansQuery
        case "me_200_posts", "me_2000_posts": "/v1/me"
        case "market_available_dates": availableDatesQuery
        default: clusterQueries[scenario]
        }
    }

    /// Rentals free on three days a month ahead (`load-items --booked-every`), newest first.
    static var availableDatesQuery: String {
        "/v1/market?availableFrom=\(day(30))&availableUntil=\(day(32))&limit=20"
    }

    /// The UTC day `days` from today, as the server's clock has it.
    static func day(_ days: Int) -> String {
        Date().addingTimeInterval(Double(days) * 86_400).formatted(.iso8601.year().month().day())
    }

    /// Bids of each user (`tokens`) on `each` of `items`, from the `7 × user`th on, on two days of
    /// the user's own, users in parallel: their ids, user by user.
    static func placeBids(on items: [String], by tokens: [String], paying bodies: [String], each: Int, port: Int) async throws
        -> [String]
    {
        try await withThrowingTaskGroup(of: (Int, [String]).self) { group in
            for (user, token) in tokens.enumerated() {
                group.addTask {
                    let client = TestClient(host: "127.0.0.1", port: port)
                    client.connect()
                    // The user's payment, on two days of their own.
                    var bid = try JSONSerialization.jsonObject(with: Data(bodies[user].utf8)) as! [String: Any]
                    bid["from"] = day(7 + 3 * user)
                    bid["until"] = day(8 + 3 * user)
                    var placed = [String]()
                    for index in 0..<each {
                        let (status, body) = try await send(client, .post, "/v1/items/\(items[(user * 7 + index) % items.count])/bids", bid, token)
                        guard status == 201 else { throw ValidationError("a bid failed (\(status)): \(body)") }
                        placed.append(try field("id", body))
                    }
                    try await client.shutdown()
                    return (user, placed)
                }
            }
            return try await group.reduce(into: [(Int, [String])]()) { $0.append($1) }.sorted { $0.0 < $1.0 }.flatMap(\.1)
        }
    }

    /// The market near a point, nearest first: what `queries` also runs through pgbench.
    static let marketQuery = "/v1/market?near=27.7172,85.3240&radiusKm=25&sort=distance&limit=20"

    /// The market newest first in one category: what `queries` also runs through pgbench.
    static let newestQuery = "/v1/market?category=tools&limit=20"
    /// Titles holding "234" (about one in three hundred of the bench's), newest first.
    /// Two words, most relevant first (the default with `q`): `load-items` puts each in about
    /// one item in nine.
    static let wordsQuery = "/v1/market?q=cordless+drill&limit=20"
    /// A map of the whole world; of the region that holds all the items (load-items: 5.4° by 6°
    /// around Kathmandu); of the city, zoomed in (1° square), each as a phone's viewport asks.
    static let clusterQueries = [
        "clusters_world": "/v1/market/clusters?zoom=1",
        "clusters_region": "/v1/market/clusters?zoom=6&bbox=82.3,25,88.4,30.4",
        "clusters_city": "/v1/market/clusters?zoom=9&bbox=84.8,27.2,85.8,28.2",
    ]
    static let loansQuery = "/v1/loans?near=27.7172,85.3240&radiusKm=25&sort=distance&limit=20"

    static func get(_ client: TestClient, _ uri: String, _ token: String) async throws -> Int {
        let headers: HTTPFields = [.authorization: "Bearer \(token)", .connection: "keep-alive"]
        return try await client.execute(.init(uri, method: .get, authority: "localhost", headers: headers)).head.status.code
    }

    /// A POST of a body written as text, answering only the status: the load loop spends as
    /// little of the machine's two cores as it can.
    static func post(_ client: TestClient, _ uri: String, _ json: String, _ token: String) async throws -> Int {
        let headers: HTTPFields = [
            .contentType: "application/json", .connection: "keep-alive", .authorization: "Bearer \(token)",
        ]
        let request = TestClient.Request(uri, method: .post, authority: "localhost", headers: headers, body: ByteBuffer(string: json))
        return try await client.execute(request).head.status.code
    }

    static func rental(_ title: String) -> [String: Any] {
        ["title": title, "category": "tools", "dailyPriceCents": 500, "location": ["lat": 27.7, "lng": 85.3, "place": "Kathmandu"]]
    }

    /// A request whose days cover every bid of the runs.
    static func request(_ title: String) -> [String: Any] {
        [
            "title": title, "category": "tools", "neededFrom": day(1), "neededUntil": day(700),
            "location": ["lat": 27.7, "lng": 85.3, "place": "Kathmandu"],
        ]
    }

    static func loan(_ title: String) -> [String: Any] {
        let deadline = Date().addingTimeInterval(60 * 86_400).formatted(.iso8601.year().month().day())
        return [
            "title": title, "sector": "Retail", "activity": "Shop", "country": "NP", "amountCents": 1_000_000,
            "deadline": deadline, "location": ["lat": 27.7, "lng": 85.3, "place": "Kathmandu"],
        ]
    }

    static var card: [String: Any] {
        ["number": "4242424242424242", "expMonth": 12, "expYear": 2030, "cvv": "123", "holderName": "Bench Lender"]
    }

    static func user(_ handle: String, _ client: TestClient) async throws -> String {
        let registration: [String: Any] = [
            "handle": handle, "displayName": handle, "email": "\(handle)@example.org", "password": "benchmark-password",
        ]
        _ = try await send(client, .post, "/v1/users", registration, nil)
        let session = try await send(client, .post, "/v1/sessions", ["handle": handle, "password": "benchmark-password"], nil).1
        return try field("token", session)
    }

    static func send(
        _ client: TestClient, _ method: HTTPRequest.Method, _ uri: String, _ json: [String: Any], _ token: String?
    ) async throws -> (Int, [String: Any]) {
        var headers: HTTPFields = [.contentType: "application/json", .connection: "keep-alive"]
        if let token { headers[.authorization] = "Bearer \(token)" }
        let body = ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json))
        let response = try await client.execute(.init(uri, method: method, authority: "localhost", headers: headers, body: body))
        let parsed = response.body.flatMap { try? JSONSerialization.jsonObject(with: Data(buffer: $0)) } as? [String: Any]
        return (response.head.status.code, parsed ?? [:])
    }

    static func field(_ name: String, _ body: [String: Any]) throws -> String {
        guard let value = body[name] as? String else { throw ValidationError("no \(name) in \(body)") }
        return value
    }
}

struct HTTPFigures: Codable {
    var scenario: String
    var connections: Int
    var requests: Int
    var failures: Int
    var seconds: Double
    var throughput: Double
    var p50Ms: Double
    var p90Ms: Double
    var p99Ms: Double
    /// What sent the load: this program, or wrk.
    var client = "lender-bench"
}
