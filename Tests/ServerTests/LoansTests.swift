import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Marketplace
import Postgres
import Server
import Synchronization
import Testing
import TestSupport
@testable import Projections

/// A day `days` from today (UTC), as `YYYY-MM-DD`.
func dayFromToday(_ days: Int) -> String {
    Day(Date().addingTimeInterval(Double(days) * 86_400)).description
}

extension TestClientProtocol {
    func postLoan(
        _ token: String, amount: Int = 10_000, country: String = "NP", title: String = "Sewing machine",
        sector: String = "Manufacturing", lat: Double = 28.2, lng: Double = 83.99, deadlineDays: Int = 30
    ) async throws -> String {
        let response = try await send(
            .post, "/v1/loans",
            json: [
                "title": title, "description": "A second machine for the workshop", "sector": sector,
                "activity": "Tailoring", "country": country, "location": ["lat": lat, "lng": lng, "place": "Pokhara"],
                "amountCents": amount, "deadline": dayFromToday(deadlineDays),
            ], token: token)
        #expect(response.status == .created, "\(response.body)")
        return try #require(response.body["id"] as? String)
    }

    func addCard(
        _ token: String, number: String = "4242 4242 4242 4242", expMonth: Int = 12, expYear: Int = 2030, cvv: String = "123"
    ) async throws -> (status: HTTPResponse.Status, body: [String: Any]) {
        let response = try await send(
            .post, "/v1/me/cards",
            json: ["number": number, "expMonth": expMonth, "expYear": expYear, "cvv": cvv, "holderName": "Ada Lovelace"],
            token: token)
        return (response.status, response.body)
    }

    /// Adds an approved card and deposits `amount` with it.
    func fund(_ token: String, _ amount: Int) async throws {
        let card = try await addCard(token)
        let cardID = try #require(card.body["id"] as? String)
        let deposit = try await send(.post, "/v1/me/deposits", json: ["amountCents": amount, "cardId": cardID], token: token)
        #expect(deposit.status == .created, "\(deposit.body)")
    }

    func addToCart(_ token: String, _ loan: String, _ amount: Int? = nil) async throws -> (status: HTTPResponse.Status, body: [String: Any]) {
        var json: [String: Any] = ["loanId": loan]
        if let amount { json["amountCents"] = amount }
        let response = try await send(.post, "/v1/cart/items", json: json, token: token)
        return (response.status, response.body)
    }

    func me(_ token: String) async throws -> [String: Any] {
        let response = try await send(.get, "/v1/me", token: token)
        #expect(response.status == .ok)
        return response.body
    }

    func balance(_ token: String) async throws -> Int { try await me(token)["balanceCents"] as? Int ?? -1 }

    func loan(_ id: String, _ token: String) async throws -> [String: Any] {
        let response = try await send(.get, "/v1/loans/\(id)", token: token)
        #expect(response.status == .ok, "\(response.body)")
        return response.body
    }
}

func eventCount(_ admin: PostgresPool) async throws -> Int {
    try await admin.query("SELECT count(*) AS n FROM events").single().decode("n", as: Int.self)
}

func fieldCodes(_ body: [String: Any]) -> [String: String] {
    Dictionary(
        ((body["errors"] as? [[String: Any]]) ?? []).map { ($0["field"] as? String ?? "", $0["code"] as? String ?? "") },
        uniquingKeysWith: { first, _ in first })
}

@Suite("Cards and deposits over HTTP")
struct CardsTests {
    @Test func aCardKeepsOnlyItsNetworkLastFourAndExpiryAndIsRecognisedWhenAddedAgain() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let first = try await client.addCard(ada.token, number: "4242-4242-4242-4242", expMonth: 10, expYear: 2030)
            #expect(first.status == .created, "\(first.body)")
            #expect(first.body["network"] as? String == "visa")
            #expect(first.body["last4"] as? String == "4242")
            #expect(first.body["redacted"] as? String == "•••• 4242")
            let id = try #require(first.body["id"] as? String)

            // The same card again: not a second card; the one on file, with its new expiry.
            let again = try await client.addCard(ada.token, number: "4242424242424242", expMonth: 11, expYear: 2031)
            #expect(again.status == .ok)
            #expect(again.body["id"] as? String == id)
            #expect(again.body["expYear"] as? Int == 2031)
            let cards = try #require(try await client.me(ada.token)["cards"] as? [[String: Any]])
            #expect(cards.count == 1)
            #expect(cards.first?["expMonth"] as? Int == 11)

            // Another user may add the same card.
            let bo = try await client.user("bob")
            #expect(try await client.addCard(bo.token).status == .created)

            // Removed, it is gone; removed twice, it is unknown.
            #expect(try await client.send(.delete, "/v1/me/cards/\(id)", token: ada.token).status == .ok)
            let missing = try await client.send(.delete, "/v1/me/cards/\(id)", token: ada.token)
            #expect(missing.status == .notFound)
            #expect(missing.body["code"] as? String == "card_not_found")
            #expect((try await client.me(ada.token)["cards"] as? [[String: Any]])?.isEmpty == true)
            _ = admin
        }
    }

    @Test func anInvalidCardNamesEveryFailingFieldAndWritesNothing() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let before = try await eventCount(admin)
            let response = try await client.addCard(ada.token, number: "4242424242424241", expMonth: 13, cvv: "12")
            #expect(response.status == .unprocessableContent)
            #expect(fieldCodes(response.body) == ["number": "invalid_checksum", "expMonth": "invalid_expiry", "cvv": "invalid_cvv"])
            let expired = try await client.addCard(ada.token, expMonth: 1, expYear: 2020)
            #expect(fieldCodes(expired.body)["expYear"] == "card_expired")
            let amex = try await client.addCard(ada.token, number: "3782 822463 10005", cvv: "123")
            #expect(fieldCodes(amex.body) == ["cvv": "invalid_cvv"])
            #expect(try await client.addCard(ada.token, number: "3782 822463 10005", cvv: "1234").body["network"] as? String == "amex")
            let missing = try await client.send(.post, "/v1/me/cards", json: ["number": "4242424242424242"], token: ada.token)
            #expect(Set(fieldCodes(missing.body).keys) == ["expMonth", "expYear", "cvv", "holderName"])
            #expect(try await eventCount(admin) == before + 1)
        }
    }

    @Test func depositsRaiseTheBalanceAndADeclinedCardWritesNothing() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let card = try #require(try await client.addCard(ada.token).body["id"] as? String)
            let deposit = try await client.send(
                .post, "/v1/me/deposits", json: ["amountCents": 10_000, "cardId": card], token: ada.token)
            #expect(deposit.status == .created, "\(deposit.body)")
            #expect(deposit.body["balanceCents"] as? Int == 10_000)
            #expect((deposit.body["position"] as? Int ?? 0) > 0)
            #expect(try await client.balance(ada.token) == 10_000)

            let tooSmall = try await client.send(.post, "/v1/me/deposits", json: ["amountCents": 499, "cardId": card], token: ada.token)
            #expect(tooSmall.status == .unprocessableContent)
            #expect(fieldCodes(tooSmall.body)["amountCents"] == "invalid_amount")
            let unknown = try await client.send(
                .post, "/v1/me/deposits", json: ["amountCents": 1000, "cardId": UUID().uuidString], token: ada.token)
            #expect(unknown.status == .notFound)

            // The sandbox's decline number: the card is kept, every charge is declined.
            let declining = try await client.addCard(ada.token, number: "4000 0000 0000 0002")
            #expect(declining.status == .created)
            let declinedCard = try #require(declining.body["id"] as? String)
            let before = try await eventCount(admin)
            let declined = try await client.send(
                .post, "/v1/me/deposits", json: ["amountCents": 5000, "cardId": declinedCard], token: ada.token)
            #expect(declined.status.code == 402)
            #expect(declined.body["code"] as? String == "card_declined")
            #expect(declined.headers[.contentType] == "application/problem+json")
            #expect(try await client.balance(ada.token) == 10_000)
            #expect(try await eventCount(admin) == before)
        }
    }

    /// SPEC §4: the full number and the CVV reach no event, no table and no log line.
    @Test func noCardNumberOrCVVReachesTheDatabaseOrTheLogs() async throws {
        let lines = LogCapture()
        var logger = Logger(label: "lender.capture") { _ in lines }
        logger.logLevel = .trace
        let numbers = [
            "4242424242424242", "5555555555554444", "2223003122003222", "378282246310005", "6011111111111117",
            "3566002020360505", "4000000000000002",
        ]
        let cvvs = ["918", "1357"]
        try await withServer(logger: logger) { client, admin in
            let ada = try await client.user("ada")
            for number in numbers {
                let cvv = number.count == 15 ? cvvs[1] : cvvs[0]
                let added = try await client.addCard(ada.token, number: number, cvv: cvv)
                #expect(added.status == .created, "\(added.body)")
                if let id = added.body["id"] as? String {
                    _ = try await client.send(.post, "/v1/me/deposits", json: ["amountCents": 700, "cardId": id], token: ada.token)
                }
                // A refused card too, with the number in it.
                _ = try await client.addCard(ada.token, number: number, expMonth: 13, cvv: cvv)
            }
            let database = try TestDatabase.adminConfiguration().database(try await admin.query("SELECT current_database() AS d").single().decode("d"))
            let dump = try pgDump(database)
            #expect(dump.contains("PaymentCardAdded"), "the dump holds the events")
            for secret in numbers + cvvs.map({ "\"\($0)\"" }) {
                #expect(!dump.contains(secret), "the dump holds \(secret)")
            }
            for number in numbers {
                #expect(!dump.contains(String(number.prefix(12))), "the dump holds the start of \(number)")
            }
        }
        let log = lines.text
        #expect(!log.isEmpty)
        for number in numbers {
            #expect(!log.contains(number), "the log holds \(number)")
        }
        // A CVV's three or four digits occur inside request ids and durations: look for them
        // as a value of their own.
        for cvv in cvvs {
            let alone = try NSRegularExpression(pattern: "(?<![0-9A-Za-z.])\(cvv)(?![0-9A-Za-z])")
            let found = alone.firstMatch(in: log, range: NSRange(log.startIndex..., in: log))
            #expect(found == nil, "the log holds the CVV \(cvv)")
        }
    }
}

/// Runs pg_dump of a whole database, data included, as text.
func pgDump(_ configuration: PostgresConfiguration) throws -> String {
    let candidates = ["/usr/lib/postgresql/15/bin/pg_dump"]
        + ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []).sorted().reversed()
        .map { "/usr/lib/postgresql/\($0)/bin/pg_dump" }
    let binary = try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0) })
    let process = Process()
    process.executableURL = URL(fileURLWithPath: binary)
    process.arguments = ["--dbname", configuration.connectionString, "--inserts"]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    return String(decoding: data, as: UTF8.self)
}

/// Every log line the server writes, kept for searching.
final class LogCapture: LogHandler, @unchecked Sendable {
    private let lines = Mutex<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    var text: String { lines.withLock { $0.joined(separator: "\n") } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(
        level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String,
        function: String, line: UInt
    ) {
        let all = self.metadata.merging(metadata ?? [:]) { $1 }
        lines.withLock { $0.append("\(level) \(message) \(all)") }
    }
}

@Suite("Loans, cart and checkout over HTTP")
struct LoansTests {
    @Test func postingALoanChecksEveryRuleAndListsFilterIt() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            let bad = try await client.send(
                .post, "/v1/loans",
                json: [
                    "title": "Loom", "sector": "Arts", "activity": "Weaving", "country": "XX",
                    "location": ["lat": 95, "lng": 10], "amountCents": 2600, "deadline": dayFromToday(91),
                ], token: rita.token)
            #expect(bad.status == .unprocessableContent)
            #expect(
                fieldCodes(bad.body)
                    == ["country": "invalid_country", "location.lat": "out_of_range", "amountCents": "invalid_amount",
                        "deadline": "invalid_deadline"])
            #expect(try await eventCount(admin) == 1)

            let nepal = try await client.postLoan(rita.token, title: "Sewing machine for Pokhara")
            _ = try await client.postLoan(rita.token, country: "KE", title: "Maize seed", sector: "Agriculture", lat: -1.29, lng: 36.82)
            let loan = try await client.loan(nepal, rita.token)
            #expect(loan["status"] as? String == "fundraising")
            #expect(loan["fundedCents"] as? Int == 0)
            #expect(loan["borrowerId"] as? String == rita.id)

            func titles(_ query: String) async throws -> [String] {
                let response = try await client.send(.get, "/v1/loans\(query)", token: rita.token)
                #expect(response.status == .ok, "\(response.body)")
                return ((response.body["data"] as? [[String: Any]]) ?? []).compactMap { $0["title"] as? String }
            }
            #expect(try await titles("?country=NP") == ["Sewing machine for Pokhara"])
            #expect(try await titles("?sector=Agriculture") == ["Maize seed"])
            #expect(try await titles("?q=sewing") == ["Sewing machine for Pokhara"])
            #expect(try await titles("?status=funded").isEmpty)
            #expect(try await titles("").count == 2)
            #expect(try await titles("?near=27.7,85.3&radiusKm=500&sort=distance") == ["Sewing machine for Pokhara"])
            let paged = try await client.send(.get, "/v1/loans?limit=1", token: rita.token)
            let cursor = try #require(paged.body["nextCursor"] as? String)
            #expect(try await titles("?limit=1&cursor=\(cursor)") == ["Sewing machine for Pokhara"])
            let invalid = try await client.send(.get, "/v1/loans?country=ZZ&status=lost&limit=0", token: rita.token)
            #expect(invalid.status == .unprocessableContent)
            #expect(Set(fieldCodes(invalid.body).keys) == ["country", "status", "limit"])
            #expect(try await client.send(.get, "/v1/loans/\(UUID())", token: rita.token).status == .notFound)

            // The countries list finds Nepal by a part of its name, with its fundraising loan.
            let countries = try await client.send(.get, "/v1/countries?q=nep", token: rita.token)
            let found = try #require((countries.body["data"] as? [[String: Any]])?.first)
            #expect(found["name"] as? String == "Nepal")
            #expect(found["code"] as? String == "NP")
            #expect(found["alpha3"] as? String == "NPL")
            #expect(found["flag"] as? String == "🇳🇵")
            #expect(found["fundraisingLoans"] as? Int == 1)
            let all = try await client.send(.get, "/v1/countries?limit=100", token: rita.token)
            #expect((all.body["data"] as? [[String: Any]])?.count == 100)
            #expect(all.body["nextCursor"] is String)
        }
    }

    @Test func theCartAppliesItsRulesAndShowsWhatEachLoanStillNeeds() async throws {
        try await withServer { client, _ in
            let rita = try await client.user("rita")
            let ada = try await client.user("ada")
            let loan = try await client.postLoan(rita.token, amount: 10_000)

            #expect(try await client.addToCart(rita.token, loan).body["code"] as? String == "own_loan")
            let odd = try await client.addToCart(ada.token, loan, 2600)
            #expect(odd.status == .unprocessableContent)
            let tooMuch = try await client.addToCart(ada.token, loan, 12_500)
            #expect(tooMuch.body["code"] as? String == "exceeds_need")
            #expect(try await client.addToCart(ada.token, UUID().uuidString).status == .notFound)

            // The default share from the profile, else 2500.
            _ = try await client.send(.patch, "/v1/me", json: ["defaultShareCents": 5000], token: ada.token)
            let added = try await client.addToCart(ada.token, loan)
            #expect(added.status == .created, "\(added.body)")
            let line = try #require((added.body["lines"] as? [[String: Any]])?.first)
            #expect(line["amountCents"] as? Int == 5000)
            #expect(line["stillNeededCents"] as? Int == 10_000)
            #expect(line["title"] as? String == "Sewing machine")
            #expect(line["problem"] is NSNull)
            #expect(added.body["totalCents"] as? Int == 5000)
            #expect(try await client.addToCart(ada.token, loan).body["code"] as? String == "already_in_cart")

            let changed = try await client.send(.patch, "/v1/cart/items/\(loan)", json: ["amountCents": 7500], token: ada.token)
            #expect(changed.status == .ok)
            #expect(changed.body["totalCents"] as? Int == 7500)

            // Others fund the loan meanwhile: the line no longer fits, and the cart says why.
            let bo = try await client.user("bob")
            try await client.fund(bo.token, 5000)
            _ = try await client.addToCart(bo.token, loan, 5000)
            #expect(try await client.send(.post, "/v1/cart/checkout", json: ["payWith": "balance"], token: bo.token).status == .ok)
            let cart = try await client.send(.get, "/v1/cart", token: ada.token)
            let stale = try #require((cart.body["lines"] as? [[String: Any]])?.first)
            #expect(stale["stillNeededCents"] as? Int == 5000)
            #expect(stale["problem"] as? String == "exceeds_need")

            let removed = try await client.send(.delete, "/v1/cart/items/\(loan)", token: ada.token)
            #expect((removed.body["lines"] as? [Any])?.isEmpty == true)
            #expect(try await client.send(.delete, "/v1/cart/items/\(loan)", token: ada.token).body["code"] as? String == "not_in_cart")
            _ = try await client.addToCart(ada.token, loan, 2500)
            let cleared = try await client.send(.delete, "/v1/cart", token: ada.token)
            #expect(cleared.body["totalCents"] as? Int == 0)
            let empty = try await client.send(.post, "/v1/cart/checkout", json: ["payWith": "balance"], token: ada.token)
            #expect(empty.body["code"] as? String == "cart_empty")
        }
    }

    @Test func checkoutWhoseSecondLineNoLongerFitsWritesNothing() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            let first = try await client.postLoan(rita.token, amount: 10_000, title: "First")
            let second = try await client.postLoan(rita.token, amount: 5000, title: "Second")
            let ada = try await client.user("ada")
            try await client.fund(ada.token, 10_000)
            _ = try await client.addToCart(ada.token, first, 2500)
            _ = try await client.addToCart(ada.token, second, 5000)
            let bo = try await client.user("bob")
            try await client.fund(bo.token, 5000)
            _ = try await client.addToCart(bo.token, second, 2500)
            #expect(try await client.send(.post, "/v1/cart/checkout", json: ["payWith": "balance"], token: bo.token).status == .ok)

            let before = try await eventCount(admin)
            let refused = try await client.send(.post, "/v1/cart/checkout", json: ["payWith": "balance"], token: ada.token)
            #expect(refused.status == .conflict)
            #expect(refused.body["code"] as? String == "checkout_blocked")
            #expect(fieldCodes(refused.body) == ["lines[1]": "exceeds_need"])
            #expect(try await eventCount(admin) == before)
            #expect(try await client.loan(first, ada.token)["fundedCents"] as? Int == 0)
            #expect(try await client.balance(ada.token) == 10_000)
            #expect((try await client.send(.get, "/v1/cart", token: ada.token).body["lines"] as? [Any])?.count == 2)

            // Without the line, it goes through, and the purchases say what was bought.
            _ = try await client.send(.delete, "/v1/cart/items/\(second)", token: ada.token)
            let done = try await client.send(.post, "/v1/cart/checkout", json: ["payWith": "balance"], token: ada.token)
            #expect(done.status == .ok, "\(done.body)")
            #expect(done.body["totalCents"] as? Int == 2500)
            #expect((done.body["paidWith"] as? [String: Any])?["method"] as? String == "balance")
            #expect((done.body["purchases"] as? [[String: Any]])?.first?["loanId"] as? String == first)
            #expect(try await client.balance(ada.token) == 7500)
            let mine = try #require(try await client.me(ada.token)["loans"] as? [[String: Any]])
            #expect(mine.first?["amountCents"] as? Int == 2500)
            #expect(mine.first?["status"] as? String == "fundraising")
        }
    }

    @Test func tenLendersCheckingOutAtOnceFundTheLoanExactly() async throws {
        try await withServer { client, _ in
            let rita = try await client.user("rita")
            let loan = try await client.postLoan(rita.token, amount: 10_000)
            var lenders = [String]()
            for index in 0..<10 {
                let lender = try await client.user("lender\(index)")
                try await client.fund(lender.token, 2500)
                #expect(try await client.addToCart(lender.token, loan, 2500).status == .created)
                lenders.append(lender.token)
            }
            let outcomes = try await withThrowingTaskGroup(of: (String, HTTPResponse.Status, String?).self) { group in
                for token in lenders {
                    group.addTask {
                        let response = try await client.send(.post, "/v1/cart/checkout", json: ["payWith": "balance"], token: token)
                        return (token, response.status, response.body["code"] as? String)
                    }
                }
                return try await group.reduce(into: [(String, HTTPResponse.Status, String?)]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0.1 == .ok }.count == 4)
            #expect(outcomes.filter { $0.1 == .conflict }.count == 6)
            #expect(outcomes.allSatisfy { $0.1 == .ok || $0.2 == "checkout_blocked" })
            let funded = try await client.loan(loan, rita.token)
            #expect(funded["fundedCents"] as? Int == 10_000)
            #expect(funded["status"] as? String == "funded")
            #expect(funded["lenderCount"] as? Int == 4)
            for (token, status, _) in outcomes {
                #expect(try await client.balance(token) == (status == .ok ? 0 : 2500))
            }
        }
    }

    @Test func checkoutByCardChargesTheCardAndADeclineWritesNothing() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            let loan = try await client.postLoan(rita.token, amount: 5000)
            let ada = try await client.user("ada")
            let declining = try #require(try await client.addCard(ada.token, number: "4000000000000002").body["id"] as? String)
            _ = try await client.addToCart(ada.token, loan, 2500)
            let before = try await eventCount(admin)
            let declined = try await client.send(
                .post, "/v1/cart/checkout", json: ["payWith": "card", "cardId": declining], token: ada.token)
            #expect(declined.status.code == 402)
            #expect(declined.body["code"] as? String == "card_declined")
            #expect(try await eventCount(admin) == before)

            let card = try #require(try await client.addCard(ada.token, number: "5555 5555 5555 4444").body["id"] as? String)
            let paid = try await client.send(.post, "/v1/cart/checkout", json: ["payWith": "card", "cardId": card], token: ada.token)
            #expect(paid.status == .ok, "\(paid.body)")
            #expect((paid.body["paidWith"] as? [String: Any])?["cardId"] as? String == card)
            #expect(try await client.balance(ada.token) == 0)
            #expect(try await client.loan(loan, ada.token)["fundedCents"] as? Int == 2500)

            let noFunds = try await client.addToCart(ada.token, loan, 2500)
            #expect(noFunds.status == .created)
            let broke = try await client.send(.post, "/v1/cart/checkout", json: ["payWith": "balance"], token: ada.token)
            #expect(broke.status == .conflict)
            #expect(broke.body["code"] as? String == "insufficient_funds")
            let wrong = try await client.send(.post, "/v1/cart/checkout", json: ["payWith": "cash"], token: ada.token)
            #expect(fieldCodes(wrong.body)["payWith"] == "invalid_payment")
        }
    }

    /// Funds a loan of `amount` with one 2500-share per lender; returns the loan and the lenders' tokens.
    func fundedLoan(_ client: any TestClientProtocol, borrower: String, lenders count: Int, amount: Int) async throws
        -> (loan: String, lenders: [String])
    {
        let loan = try await client.postLoan(borrower, amount: amount)
        var lenders = [String]()
        for index in 0..<count {
            let lender = try await client.user("lender\(index)")
            try await client.fund(lender.token, 2500)
            _ = try await client.addToCart(lender.token, loan, 2500)
            let checkout = try await client.send(.post, "/v1/cart/checkout", json: ["payWith": "balance"], token: lender.token)
            #expect(checkout.status == .ok, "\(checkout.body)")
            lenders.append(lender.token)
        }
        return (loan, lenders)
    }

    @Test func repaymentsAreSplitProRataToTheCentUntilRepaid() async throws {
        try await withServer { client, _ in
            let rita = try await client.user("rita")
            let (loan, lenders) = try await fundedLoan(client, borrower: rita.token, lenders: 3, amount: 7500)
            #expect(try await client.loan(loan, rita.token)["status"] as? String == "funded")

            // The borrower pays the repayments (SPEC §11.1): from a balance of exactly the loan.
            try await client.fund(rita.token, 7500)
            let notMine = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", json: ["amountCents": 100, "payWith": "balance"], token: lenders[0])
            #expect(notMine.status == .forbidden)
            let repaid = try await client.send(.post, "/v1/loans/\(loan)/repayments", json: ["amountCents": 100, "payWith": "balance"], token: rita.token)
            #expect(repaid.status == .created, "\(repaid.body)")
            let credits = ((repaid.body["credits"] as? [[String: Any]]) ?? []).compactMap { $0["amountCents"] as? Int }
            #expect(credits == [34, 33, 33])
            #expect((repaid.body["loan"] as? [String: Any])?["status"] as? String == "repaying")
            var balances = [Int]()
            for token in lenders { balances.append(try await client.balance(token)) }
            #expect(balances == [34, 33, 33])
            #expect((try await client.me(lenders[0])["loans"] as? [[String: Any]])?.first?["repaidCents"] as? Int == 34)

            let over = try await client.send(.post, "/v1/loans/\(loan)/repayments", json: ["amountCents": 7401, "payWith": "balance"], token: rita.token)
            #expect(over.status == .conflict)
            #expect(over.body["code"] as? String == "exceeds_outstanding")
            let rest = try await client.send(.post, "/v1/loans/\(loan)/repayments", json: ["amountCents": 7400, "payWith": "balance"], token: rita.token)
            #expect(rest.status == .created)
            #expect((rest.body["loan"] as? [String: Any])?["status"] as? String == "repaid")
            #expect((rest.body["loan"] as? [String: Any])?["repaidCents"] as? Int == 7500)
            for token in lenders { #expect(try await client.balance(token) == 2500) }
            let after = try await client.send(.post, "/v1/loans/\(loan)/repayments", json: ["amountCents": 1, "payWith": "balance"], token: rita.token)
            #expect(after.body["code"] as? String == "loan_not_repayable")
        }
    }

    @Test func expiryRefundsEveryLenderExactlyOnce() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            let (loan, lenders) = try await fundedLoan(client, borrower: rita.token, lenders: 3, amount: 10_000)
            for token in lenders { #expect(try await client.balance(token) == 0) }
            let database = try await admin.query("SELECT current_database() AS d").single().decode("d", as: String.self)
            let url = try TestDatabase.adminConfiguration().database(database)

            // Not yet due: nothing expires.
            #expect(try runLender(["loans", "expire"], database: url).contains("0 loans expired"))
            let output = try runLender(["loans", "expire", "--as-of", dayFromToday(31)], database: url)
            #expect(output.contains("7500 cents refunded to 3 lenders"), "\(output)")
            let expired = try await client.loan(loan, rita.token)
            #expect(expired["status"] as? String == "expired")
            for token in lenders { #expect(try await client.balance(token) == 2500) }
            let countries = try await client.send(.get, "/v1/countries?q=nepal", token: rita.token)
            #expect((countries.body["data"] as? [[String: Any]])?.first?["fundraisingLoans"] as? Int == 0)
            // Again: nothing to expire, nothing refunded twice.
            #expect(try runLender(["loans", "expire", "--as-of", dayFromToday(31)], database: url).contains("0 loans expired"))
            for token in lenders { #expect(try await client.balance(token) == 2500) }
        }
    }
}

@Suite("Countries")
struct CountriesTests {
    /// The decider's codes and the migration's table come from the same iso-codes file.
    @Test func theDecidersCodesAreTheTablesCodes() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let codes = try await pool.query("SELECT code FROM countries").map { try $0.decode("code", as: String.self) }
                #expect(codes.count == 249)
                #expect(Set(codes) == Countries.alpha2)
            }
        }
    }

    @Test func listsEndWithANullCursor() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let response = try await client.send(.get, "/v1/countries?q=ken", token: ada.token)
            #expect((response.body["data"] as? [[String: Any]])?.map { $0["code"] as? String } == ["KE"])
            #expect(response.body["nextCursor"] is NSNull)
        }
    }
}
