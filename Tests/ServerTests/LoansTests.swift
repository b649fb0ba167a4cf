import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Marketplace
import Postgres
import Projections
import Server
import ServerTestSupport
import Testing
import TestSupport
import UseCases

@Suite("Cards and deposits over HTTP")
struct CardsTests {
    @Test func aCardKeepsOnlyItsNetworkLastFourAndExpiryAndIsRecognisedWhenAddedAgain() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let first = try await client.addCard(ada.token, number: "4242-4242-4242-4242", expMonth: 10, expYear: 2030)
            #expect(first.status == .created, "\(first)")
            let card = try first.decode(CardResource.self)
            #expect(card.network == "visa")
            #expect(card.last4 == "4242")
            #expect(card.redacted == "•••• 4242")
            let id = card.id

            // The same card again: not a second card; the one on file, with its new expiry.
            let again = try await client.addCard(ada.token, number: "4242424242424242", expMonth: 11, expYear: 2031)
            #expect(again.status == .ok)
            let onFile = try again.decode(CardResource.self)
            #expect(onFile.id == id)
            #expect(onFile.expYear == 2031)
            let cards = try await client.me(ada.token).cards
            #expect(cards.count == 1)
            #expect(cards.first?.expMonth == 11)

            // Another user may add the same card.
            let bo = try await client.user("bob")
            #expect(try await client.addCard(bo.token).status == .created)

            // Removed, it is gone; removed twice, it is unknown.
            #expect(try await client.send(.delete, "/v1/me/cards/\(id)", token: ada.token).status == .ok)
            let missing = try await client.send(.delete, "/v1/me/cards/\(id)", token: ada.token)
            #expect(missing.status == .notFound)
            #expect(missing.code == "card_not_found")
            #expect(try await client.me(ada.token).cards.isEmpty)
            _ = admin
        }
    }

    @Test func anInvalidCardNamesEveryFailingFieldAndWritesNothing() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let before = try await eventCount(admin)
            let response = try await client.addCard(ada.token, number: "4242424242424241", expMonth: 13, cvv: "12")
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes == ["number": "invalid_checksum", "expMonth": "invalid_expiry", "cvv": "invalid_cvv"])
            let expired = try await client.addCard(ada.token, expMonth: 1, expYear: 2020)
            #expect(expired.fieldCodes["expYear"] == "card_expired")
            let amex = try await client.addCard(ada.token, number: "3782 822463 10005", cvv: "123")
            #expect(amex.fieldCodes == ["cvv": "invalid_cvv"])
            #expect(try await client.addCard(ada.token, number: "3782 822463 10005", cvv: "1234").decode(CardResource.self).network == "amex")
            let missing = try await client.send(.post, "/v1/me/cards", json: ["number": "4242424242424242"], token: ada.token)
            #expect(Set(missing.fieldCodes.keys) == ["expMonth", "expYear", "cvv", "holderName"])
            #expect(try await eventCount(admin) == before + 1)
        }
    }

    /// The wallet decides on the server's day, as every controller does, not on the machine's:
    /// a card good until the end of 12/2026 is expired once the server's day is in 2027.
    @Test func cardsAndDepositsDecideOnTheServersDay() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, _ in
            let ada = try await client.user("ada")
            let card = try await client.addCard(ada.token, expMonth: 12, expYear: 2026).decode(CardResource.self).id
            let deposit = API.DepositBody(amountCents: 10_000, cardId: card.rawValue)
            try await clock.on("2027-01-05") {
                let expired = try await client.addCard(ada.token, expMonth: 12, expYear: 2026)
                #expect(expired.fieldCodes["expYear"] == "card_expired", "\(expired)")
                let refused = try await client.send(.post, "/v1/me/deposits", body: deposit, token: ada.token)
                #expect(refused.code == "card_expired", "\(refused)")
            }
            #expect(try await client.send(.post, "/v1/me/deposits", body: deposit, token: ada.token).status == .created)
        }
    }

    @Test func depositsRaiseTheBalanceAndADeclinedCardWritesNothing() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let card = try await client.addCard(ada.token).decode(CardResource.self).id
            let deposit = try await client.send(
                .post, "/v1/me/deposits", body: API.DepositBody(amountCents: 10_000, cardId: card.rawValue), token: ada.token)
            #expect(deposit.status == .created, "\(deposit)")
            let deposited = try deposit.decode(Deposit.self)
            #expect(deposited.balanceCents == 10_000)
            #expect((deposited.position ?? 0) > 0)
            #expect(try await client.balance(ada.token) == 10_000)

            let tooSmall = try await client.send(
                .post, "/v1/me/deposits", body: API.DepositBody(amountCents: 499, cardId: card.rawValue), token: ada.token)
            #expect(tooSmall.status == .unprocessableContent)
            #expect(tooSmall.fieldCodes["amountCents"] == "invalid_amount")
            let unknown = try await client.send(
                .post, "/v1/me/deposits", body: API.DepositBody(amountCents: 1000, cardId: UUID()), token: ada.token)
            #expect(unknown.status == .notFound)

            // The sandbox's decline number: the card is kept, every charge is declined.
            let declining = try await client.addCard(ada.token, number: "4000 0000 0000 0002")
            #expect(declining.status == .created)
            let declinedCard = try declining.decode(CardResource.self).id
            let before = try await eventCount(admin)
            let declined = try await client.send(
                .post, "/v1/me/deposits", body: API.DepositBody(amountCents: 5000, cardId: declinedCard.rawValue), token: ada.token)
            #expect(declined.status.code == 402)
            #expect(declined.code == "card_declined")
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
                #expect(added.status == .created, "\(added)")
                if let id = try? added.decode(CardResource.self).id {
                    _ = try await client.send(
                        .post, "/v1/me/deposits", body: API.DepositBody(amountCents: 700, cardId: id.rawValue), token: ada.token)
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
        // A CVV's three or four digits occur inside request ids, a UUID's groups (`-1357-`)
        // and durations (`918.42`): look for them as a value of their own, UUIDs blanked out.
        let uuid = "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
        let scrubbed = log.replacingOccurrences(of: uuid, with: "<uuid>", options: .regularExpression)
        for cvv in cvvs {
            let alone = try NSRegularExpression(pattern: "(?<![0-9A-Za-z.])\(cvv)(?![0-9A-Za-z.])")
            let found = alone.firstMatch(in: scrubbed, range: NSRange(scrubbed.startIndex..., in: scrubbed))
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

@Suite("Loans, cart and checkout over HTTP")
struct LoansTests {
    @Test func postingALoanChecksEveryRuleAndListsFilterIt() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            let bad = try await client.send(
                .post, "/v1/loans",
                body: API.LoanBody(
                    title: "Loom", sector: "Arts", activity: "Weaving", country: "XX",
                    location: API.LocationInput(lat: 95, lng: 10), amountCents: 2600, deadline: dayFromToday(91)), token: rita.token)
            #expect(bad.status == .unprocessableContent)
            #expect(
                bad.fieldCodes
                    == ["country": "invalid_country", "location.lat": "out_of_range", "amountCents": "invalid_amount",
                        "deadline": "invalid_deadline"])
            #expect(try await eventCount(admin) == 1)

            let nepal = try await client.postLoan(rita.token, title: "Sewing machine for Pokhara")
            _ = try await client.postLoan(rita.token, country: "KE", title: "Maize seed", sector: "Agriculture", lat: -1.29, lng: 36.82)
            let loan = try await client.loan(nepal, rita.token)
            #expect(loan.status == "fundraising")
            #expect(loan.fundedCents == 0)
            #expect(loan.borrowerId == rita.id)

            func titles(_ query: String) async throws -> [String] {
                let response = try await client.send(.get, "/v1/loans\(query)", token: rita.token)
                #expect(response.status == .ok, "\(response)")
                return try response.decode(Page<LoanResource>.self).data.map(\.title)
            }
            #expect(try await titles("?country=NP") == ["Sewing machine for Pokhara"])
            #expect(try await titles("?sector=Agriculture") == ["Maize seed"])
            #expect(try await titles("?q=sewing") == ["Sewing machine for Pokhara"])
            #expect(try await titles("?status=funded").isEmpty)
            #expect(try await titles("").count == 2)
            #expect(try await titles("?near=27.7,85.3&radiusKm=500&sort=distance") == ["Sewing machine for Pokhara"])
            let paged = try await client.send(.get, "/v1/loans?limit=1", token: rita.token)
            let cursor = try #require(try paged.decode(Page<LoanResource>.self).nextCursor)
            #expect(try await titles("?limit=1&cursor=\(cursor)") == ["Sewing machine for Pokhara"])
            let invalid = try await client.send(.get, "/v1/loans?country=ZZ&status=lost&limit=0", token: rita.token)
            #expect(invalid.status == .unprocessableContent)
            #expect(Set(invalid.fieldCodes.keys) == ["country", "status", "limit"])
            #expect(try await client.send(.get, "/v1/loans/\(UUID())", token: rita.token).status == .notFound)

            // The countries list finds Nepal by a part of its name, with its fundraising loan.
            let countries = try await client.send(.get, "/v1/countries?q=nep", token: rita.token)
            let found = try #require(try countries.decode(Page<Country>.self).data.first)
            #expect(found.name == "Nepal")
            #expect(found.code == "NP")
            #expect(found.alpha3 == "NPL")
            #expect(found.flag == "🇳🇵")
            #expect(found.fundraisingLoans == 1)
            let all = try await client.send(.get, "/v1/countries?limit=100", token: rita.token).decode(Page<Country>.self)
            #expect(all.data.count == 100)
            #expect(all.nextCursor != nil)
        }
    }

    @Test func theCartAppliesItsRulesAndShowsWhatEachLoanStillNeeds() async throws {
        try await withServer { client, _ in
            let rita = try await client.user("rita")
            let ada = try await client.user("ada")
            let loan = try await client.postLoan(rita.token, amount: 10_000)

            #expect(try await client.addToCart(rita.token, loan).code == "own_loan")
            let odd = try await client.addToCart(ada.token, loan, 2600)
            #expect(odd.status == .unprocessableContent)
            let tooMuch = try await client.addToCart(ada.token, loan, 12_500)
            #expect(tooMuch.code == "exceeds_need")
            #expect(try await client.addToCart(ada.token, LoanID()).status == .notFound)

            // The default share from the profile, else 2500.
            _ = try await client.send(.patch, "/v1/me", body: API.ProfileBody(defaultShareCents: 5000), token: ada.token)
            let added = try await client.addToCart(ada.token, loan)
            #expect(added.status == .created, "\(added)")
            let cart = try added.decode(CartResource.self)
            let line = try #require(cart.lines.first)
            #expect(line.amountCents == 5000)
            #expect(line.stillNeededCents == 10_000)
            #expect(line.title == "Sewing machine")
            // A line that fits says so with an explicit null, not a missing key.
            #expect((added.json["lines"] as? [[String: Any]])?.first?["problem"] is NSNull)
            #expect(cart.totalCents == 5000)
            #expect(try await client.addToCart(ada.token, loan).code == "already_in_cart")

            let changed = try await client.send(
                .patch, "/v1/cart/items/\(loan)", body: API.CartAmountBody(amountCents: 7500), token: ada.token)
            #expect(changed.status == .ok)
            #expect(try changed.decode(CartResource.self).totalCents == 7500)

            // Others fund the loan meanwhile: the line no longer fits, and the cart says why.
            let bo = try await client.user("bob")
            try await client.fund(bo.token, 5000)
            _ = try await client.addToCart(bo.token, loan, 5000)
            #expect(
                try await client.send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: bo.token).status == .ok)
            let later = try await client.send(.get, "/v1/cart", token: ada.token).decode(CartResource.self)
            let stale = try #require(later.lines.first)
            #expect(stale.stillNeededCents == 5000)
            #expect(stale.problem == "exceeds_need")

            let removed = try await client.send(.delete, "/v1/cart/items/\(loan)", token: ada.token)
            #expect(try removed.decode(CartResource.self).lines.isEmpty)
            #expect(try await client.send(.delete, "/v1/cart/items/\(loan)", token: ada.token).code == "not_in_cart")
            _ = try await client.addToCart(ada.token, loan, 2500)
            let cleared = try await client.send(.delete, "/v1/cart", token: ada.token)
            #expect(try cleared.decode(CartResource.self).totalCents == 0)
            let empty = try await client.send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: ada.token)
            #expect(empty.code == "cart_empty")
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
            #expect(
                try await client.send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: bo.token).status == .ok)

            let before = try await eventCount(admin)
            let refused = try await client.send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: ada.token)
            #expect(refused.status == .conflict)
            #expect(refused.code == "checkout_blocked")
            #expect(refused.fieldCodes == ["lines[1]": "exceeds_need"])
            #expect(try await eventCount(admin) == before)
            #expect(try await client.loan(first, ada.token).fundedCents == 0)
            #expect(try await client.balance(ada.token) == 10_000)
            #expect(try await client.send(.get, "/v1/cart", token: ada.token).decode(CartResource.self).lines.count == 2)

            // Without the line, it goes through, and the purchases say what was bought.
            _ = try await client.send(.delete, "/v1/cart/items/\(second)", token: ada.token)
            let done = try await client.send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: ada.token)
            #expect(done.status == .ok, "\(done)")
            let paid = try done.decode(PaidCart.self)
            #expect(paid.totalCents == 2500)
            #expect(try done.decode(Paid.self).paidWith.method == "balance")
            #expect(paid.purchases.first?.loanId == first)
            #expect(try await client.balance(ada.token) == 7500)
            let mine = try await client.me(ada.token).loans
            #expect(mine.first?.amountCents == 2500)
            #expect(mine.first?.status == "fundraising")
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
                        let response = try await client.send(
                            .post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: token)
                        return (token, response.status, response.code)
                    }
                }
                return try await group.reduce(into: [(String, HTTPResponse.Status, String?)]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0.1 == .ok }.count == 4)
            #expect(outcomes.filter { $0.1 == .conflict }.count == 6)
            #expect(outcomes.allSatisfy { $0.1 == .ok || $0.2 == "checkout_blocked" })
            let funded = try await client.loan(loan, rita.token)
            #expect(funded.fundedCents == 10_000)
            #expect(funded.status == "funded")
            #expect(funded.lenderCount == 4)
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
            let declining = try await client.addCard(ada.token, number: "4000000000000002").decode(CardResource.self).id
            _ = try await client.addToCart(ada.token, loan, 2500)
            let before = try await eventCount(admin)
            let declined = try await client.send(
                .post, "/v1/cart/checkout", body: API.CartPayment(payWith: .card, cardId: declining.rawValue), token: ada.token)
            #expect(declined.status.code == 402)
            #expect(declined.code == "card_declined")
            #expect(try await eventCount(admin) == before)

            let card = try await client.addCard(ada.token, number: "5555 5555 5555 4444").decode(CardResource.self).id
            let paid = try await client.send(
                .post, "/v1/cart/checkout", body: API.CartPayment(payWith: .card, cardId: card.rawValue), token: ada.token)
            #expect(paid.status == .ok, "\(paid)")
            #expect(try paid.decode(Paid.self).paidWith.cardId == "\(card)")
            #expect(try await client.balance(ada.token) == 0)
            #expect(try await client.loan(loan, ada.token).fundedCents == 2500)

            let noFunds = try await client.addToCart(ada.token, loan, 2500)
            #expect(noFunds.status == .created)
            let broke = try await client.send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: ada.token)
            #expect(broke.status == .conflict)
            #expect(broke.code == "insufficient_funds")
            let wrong = try await client.send(.post, "/v1/cart/checkout", json: ["payWith": "cash"], token: ada.token)
            #expect(wrong.fieldCodes["payWith"] == "invalid_payment")
        }
    }

    @Test func repaymentsAreSplitProRataToTheCentUntilRepaid() async throws {
        try await withServer { client, _ in
            let rita = try await client.user("rita")
            let (loan, lenders) = try await client.fundedLoan(borrower: rita.token, lenders: 3, amount: 7500)
            #expect(try await client.loan(loan, rita.token).status == "funded")

            // The borrower pays the repayments (SPEC §11.1): from a balance of exactly the loan.
            try await client.fund(rita.token, 7500)
            let notMine = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", body: API.RepaymentBody(amountCents: 100, payWith: .balance), token: lenders[0])
            #expect(notMine.status == .forbidden)
            let repaid = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", body: API.RepaymentBody(amountCents: 100, payWith: .balance), token: rita.token)
            #expect(repaid.status == .created, "\(repaid)")
            let repayment = try repaid.decode(Repayment.self)
            #expect(repayment.credits.map(\.amountCents) == [34, 33, 33])
            #expect(repayment.loan.status == "repaying")
            var balances = [Int]()
            for token in lenders { balances.append(try await client.balance(token)) }
            #expect(balances == [34, 33, 33])
            #expect(try await client.me(lenders[0]).loans.first?.repaidCents == 34)

            let over = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", body: API.RepaymentBody(amountCents: 7401, payWith: .balance), token: rita.token)
            #expect(over.status == .conflict)
            #expect(over.code == "exceeds_outstanding")
            let rest = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", body: API.RepaymentBody(amountCents: 7400, payWith: .balance), token: rita.token)
            #expect(rest.status == .created)
            let repaidLoan = try rest.decode(Repayment.self).loan
            #expect(repaidLoan.status == "repaid")
            #expect(repaidLoan.repaidCents == 7500)
            for token in lenders { #expect(try await client.balance(token) == 2500) }
            let after = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", body: API.RepaymentBody(amountCents: 1, payWith: .balance), token: rita.token)
            #expect(after.code == "loan_not_repayable")
        }
    }

    @Test func expiryRefundsEveryLenderExactlyOnce() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            let (loan, lenders) = try await client.fundedLoan(borrower: rita.token, lenders: 3, amount: 10_000)
            for token in lenders { #expect(try await client.balance(token) == 0) }
            let database = try await admin.query("SELECT current_database() AS d").single().decode("d", as: String.self)
            let url = try TestDatabase.adminConfiguration().database(database)

            // Not yet due: nothing expires.
            #expect(try runLender(["loans", "expire"], database: url).contains("0 loans expired"))
            let output = try runLender(["loans", "expire", "--as-of", dayFromToday(31)], database: url)
            #expect(output.contains("7500 cents refunded to 3 lenders"), "\(output)")
            let expired = try await client.loan(loan, rita.token)
            #expect(expired.status == "expired")
            for token in lenders { #expect(try await client.balance(token) == 2500) }
            let countries = try await client.send(.get, "/v1/countries?q=nepal", token: rita.token)
            #expect(try countries.decode(Page<Country>.self).data.first?.fundraisingLoans == 0)
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
            #expect(try response.decode(Page<Country>.self).data.map(\.code) == ["KE"])
            // The last page says so with an explicit null, not a missing key.
            #expect(response.json["nextCursor"] is NSNull)
        }
    }
}
