import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Marketplace
import Payments
import Postgres
import Projections
import ServerTestSupport
import Testing
import TestSupport
import UseCases

#if canImport(Glibc)
import Glibc
#endif

/// Money moves exactly once (SPEC §11.1), over HTTP in the test process.
@Suite("Money over HTTP")
struct MoneyTests {
    @Test func tenConcurrentDepositsWithOneKeyChargeOnceAndCreditOnce() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let card = try await client.addCard(ada.token).decode(CardResource.self).id
            let answers = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String?).self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        let response = try await client.send(
                            .post, "/v1/me/deposits", body: API.DepositBody(amountCents: 5000, cardId: card.rawValue), token: ada.token,
                            idempotencyKey: "deposit-1")
                        return (response.status, try? response.decode(Deposit.self).chargeId)
                    }
                }
                return try await group.reduce(into: [(HTTPResponse.Status, String?)]()) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.0 == .created }, "\(answers)")
            #expect(Set(answers.compactMap(\.1)).count == 1, "one charge id for all: \(answers)")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges") == 1)
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'FundsDeposited'") == 1)
            #expect(try await client.balance(ada.token) == 5000)
        }
    }

    @Test func aRepaymentIsPaidByTheBorrowerAndNeverCreatesMoney() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            let (loan, lenders) = try await client.fundedLoan(borrower: rita.token, lenders: 2, amount: 5000)
            let before = try await eventCount(admin)

            // No balance: refused, nothing credited, nothing written.
            let broke = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", body: API.RepaymentBody(amountCents: 1000, payWith: .balance), token: rita.token)
            #expect(broke.status == .conflict)
            #expect(broke.code == "insufficient_funds")
            #expect(try await eventCount(admin) == before)
            for token in lenders { #expect(try await client.balance(token) == 0) }
            let unpaid = try await client.send(.post, "/v1/loans/\(loan)/repayments", json: ["amountCents": 1000], token: rita.token)
            #expect(unpaid.status == .unprocessableContent)
            #expect(unpaid.fieldCodes["payWith"] == "required")

            // From the balance: the borrower loses exactly what the lenders gain.
            try await client.fund(rita.token, 3000)
            let paid = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", body: API.RepaymentBody(amountCents: 1001, payWith: .balance), token: rita.token)
            #expect(paid.status == .created, "\(paid)")
            #expect(try paid.decode(Repayment.self).balanceCents == 1999)
            #expect(try await client.balance(rita.token) == 1999)
            var credited = 0
            for token in lenders { credited += try await client.balance(token) }
            #expect(credited == 1001)

            // By card: charged at the processor, recorded with its charge id, lenders credited.
            let card = try await client.addCard(rita.token, number: "5555555555554444").decode(CardResource.self).id
            let byCard = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", body: API.RepaymentBody(amountCents: 999, payWith: .card, cardId: card.rawValue),
                token: rita.token)
            #expect(byCard.status == .created, "\(byCard)")
            #expect(try byCard.decode(Repayment.self).paidWith.cardId == "\(card)")
            #expect(try await client.balance(rita.token) == 1999)
            credited = 0
            for token in lenders { credited += try await client.balance(token) }
            #expect(credited == 2000)
            #expect(
                try await count(
                    admin,
                    "SELECT count(*) FROM events e JOIN sandbox_charges c ON c.charge_id = e.data->>'chargeID' WHERE e.type = 'CardCharged' AND c.amount_cents = 999"
                ) == 1)
            let output = try runLender(["audit", "money"], database: try await ownerURL(admin))
            #expect(output.contains("Money adds up"), "\(output)")
        }
    }

    @Test func aRepeatedCheckoutOrRepaymentAnswersTheFirstOutcomeAndMovesMoneyOnce() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            let lena = try await client.user("lena")
            let loan = try await client.postLoan(rita.token, amount: 5000)
            let card = try await client.addCard(lena.token).decode(CardResource.self).id
            #expect(try await client.addToCart(lena.token, loan, 5000).status == .created)
            let checkout = API.CartPayment(payWith: .card, cardId: card.rawValue)
            let first = try await client.send(.post, "/v1/cart/checkout", body: checkout, token: lena.token, idempotencyKey: "co-1")
            #expect(first.status == .ok, "\(first)")
            let again = try await client.send(.post, "/v1/cart/checkout", body: checkout, token: lena.token, idempotencyKey: "co-1")
            #expect(again.status == .ok, "\(again)")
            #expect(again.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            let answered = try again.decode(PaidCart.self)
            #expect(answered.totalCents == 5000)
            #expect(answered.position == (try first.decode(PaidCart.self).position))
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges") == 1)
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'CardCharged'") == 1)

            try await client.fund(rita.token, 2000)
            let repayment = API.RepaymentBody(amountCents: 1500, payWith: .balance)
            let paid = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", body: repayment, token: rita.token, idempotencyKey: "r-1")
            #expect(paid.status == .created, "\(paid)")
            let repeated = try await client.send(
                .post, "/v1/loans/\(loan)/repayments", body: repayment, token: rita.token, idempotencyKey: "r-1")
            #expect(repeated.status == .created)
            #expect(repeated.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            let answer = try repeated.decode(Repayment.self)
            #expect(answer.balanceCents == 500, "the first answer's balance")
            #expect(answer.position == (try paid.decode(Repayment.self).position))
            #expect(try await client.balance(rita.token) == 500, "debited once")
            #expect(try await client.balance(lena.token) == 1500, "credited once")
            #expect(try runLender(["audit", "money"], database: try await ownerURL(admin)).contains("Money adds up"))
        }
    }

    @Test func theMoneyAuditNamesTheUserWhoseBalanceEventWasAltered() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            try await client.fund(ada.token, 4000)
            try await client.fund(bob.token, 2500)
            let database = try await ownerURL(admin)
            let clean = try runLender(["audit", "money"], database: database)
            #expect(clean.contains("Money adds up"), "\(clean)")

            try await admin.query("ALTER TABLE events DISABLE TRIGGER events_no_update_or_delete")
            try await admin.query(
                """
                UPDATE events SET data = jsonb_set(data, '{amountCents}', '400000')
                WHERE type = 'FundsDeposited' AND stream_id = \("user-\(ada.id)")
                """)
            try await admin.query("ALTER TABLE events ENABLE TRIGGER events_no_update_or_delete")
            let output = try runLender(["audit", "money"], database: database, expectedStatus: 1)
            let lines = output.split(separator: "\n").filter { $0.hasPrefix("IMBALANCE") }
            #expect(lines.contains { $0.contains("(ada)") && $0.contains("users_view") }, "\(output)")
            #expect(lines.contains { $0.contains("(ada)") && $0.contains("at the processor") }, "\(output)")
            #expect(!lines.contains { $0.contains("(bob)") }, "\(output)")
        }
    }

    @Test func aBodyWithADuplicateKeyIsRefusedBeforeAnythingReadsIt() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let card = try await client.addCard(ada.token).decode(CardResource.self).id
            let raw = "{\"amountCents\": 500000, \"cardId\": \"\(card)\", \"amountCents\": 1000}"
            for key in [nil, "dup-1"] {
                let response = try await client.send(.post, "/v1/me/deposits", raw: raw, token: ada.token, idempotencyKey: key)
                #expect(response.status == .badRequest)
                #expect(response.code == "duplicate_key")
                #expect(response.fieldCodes["amountCents"] == "duplicate_key")
            }
            // Nested, and spelt with an escape: the same key all the same.
            let nested = try await client.send(
                .post, "/v1/rentals",
                raw: "{\"title\": \"Bike\", \"category\": \"bikes\", \"dailyPriceCents\": 100, \"location\": {\"lat\": 1, \"l\\u0061t\": 2, \"lng\": 3}}",
                token: ada.token)
            #expect(nested.code == "duplicate_key", "\(nested)")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges") == 0)
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type IN ('FundsDeposited', 'RentalPosted')") == 0)
            // The same keys in two objects are no duplicate.
            let fine = try await client.send(
                .post, "/v1/rentals",
                raw: "{\"title\": \"Bike\", \"category\": \"bikes\", \"dailyPriceCents\": 100, \"location\": {\"lat\": 1, \"lng\": 3, \"place\": \"title\"}}",
                token: ada.token)
            #expect(fine.status == .created, "\(fine)")
        }
    }

    @Test func theEleventhCardChargeOrCardAddInAnHourIs429() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let card = try await client.addCard(ada.token).decode(CardResource.self).id
            for _ in 0..<10 {
                let deposit = try await client.send(
                    .post, "/v1/me/deposits", body: API.DepositBody(amountCents: 500, cardId: card.rawValue), token: ada.token)
                #expect(deposit.status == .created, "\(deposit)")
            }
            let eleventh = try await client.send(
                .post, "/v1/me/deposits", body: API.DepositBody(amountCents: 500, cardId: card.rawValue), token: ada.token)
            #expect(eleventh.status == .tooManyRequests)
            #expect(eleventh.code == "too_many_payment_attempts")
            #expect(Int(eleventh.headers[.retryAfter] ?? "") ?? 0 > 0)
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges") == 10)
            #expect(try await client.balance(ada.token) == 5000)

            // Card adds count apart: nine more new cards, then the eleventh is refused.
            let numbers = [
                "5555555555554444", "2223003122003222", "378282246310005", "6011111111111117", "3566002020360505",
                "4000056655665556", "5200828282828210", "5105105105105100", "4012888888881881", "4111111111111111",
            ]
            var statuses = [HTTPResponse.Status]()
            for number in numbers {
                let cvv = number.count == 15 ? "1234" : "123"
                statuses.append(try await client.addCard(ada.token, number: number, cvv: cvv).status)
            }
            #expect(statuses.prefix(9).allSatisfy { $0 == .created }, "\(statuses)")
            #expect(statuses.last == .tooManyRequests)
            // Another user is not limited by ada's attempts.
            let bob = try await client.user("bob")
            #expect(try await client.addCard(bob.token).status == .created)

            // The hour slides (issue 47): ten charges 50 minutes ago are a wait of 10 minutes,
            // not until the clock's next hour; once the oldest is an hour old, one more goes.
            try await admin.query("UPDATE payment_attempt_times SET at = now() - interval '50 minutes' WHERE kind = 'card_charge'")
            let waiting = try await client.send(
                .post, "/v1/me/deposits", body: API.DepositBody(amountCents: 500, cardId: card.rawValue), token: ada.token)
            #expect(waiting.status == .tooManyRequests)
            #expect((590...600).contains(Int(waiting.headers[.retryAfter] ?? "") ?? 0), "\(waiting.headers)")
            try await admin.query(
                """
                UPDATE payment_attempt_times SET at = now() - interval '61 minutes'
                WHERE ctid = (SELECT ctid FROM payment_attempt_times WHERE kind = 'card_charge' LIMIT 1)
                """)
            let again = try await client.send(
                .post, "/v1/me/deposits", body: API.DepositBody(amountCents: 500, cardId: card.rawValue), token: ada.token)
            #expect(again.status == .created, "\(again)")
        }
    }

    @Test func reconciliationNeverRefundsAChargeThatARetryUsedAfterItsCutoff() async throws {
        try await withServer { _, admin in
            let processor = SandboxPaymentProcessor(pool: admin)
            let first = try await processor.charge(token: "tok_sandbox_1", amountCents: 700, idempotencyKey: "k-1")
            try await Task.sleep(for: .milliseconds(20))
            let cutoff = Date()
            try await Task.sleep(for: .milliseconds(20))
            // A late retry of the same command: the same charge, used again after the cutoff.
            let retried = try await processor.charge(token: "tok_sandbox_1", amountCents: 700, idempotencyKey: "k-1")
            #expect(retried.id == first.id)
            #expect(try await processor.unrefundedCharges(before: cutoff).isEmpty)
            #expect(try await processor.refund(chargeID: first.id, unusedSince: cutoff) == false)
            #expect(try await processor.refund(chargeID: first.id, unusedSince: Date().addingTimeInterval(1)) == true)
            #expect(try await processor.refund(chargeID: first.id, unusedSince: Date().addingTimeInterval(1)) == false, "once")
            // Once refunded, a retry learns it, and nothing records the charge.
            #expect(try await processor.charge(token: "tok_sandbox_1", amountCents: 700, idempotencyKey: "k-1").isRefunded)
            await #expect(throws: (any Error).self) {
                _ = try await processor.charge(token: "tok_sandbox_1", amountCents: 701, idempotencyKey: "k-1")
            }
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges") == 1)
        }
    }

    @Test func aKeySpentOnACommandThatDecidedNothingRefusesAnotherBody() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            let carl = try await client.user("carl")
            #expect(
                try await client.send(.post, "/v1/me/blocks", body: API.BlockBody(userId: bob.id.rawValue), token: ada.token).status == .ok)
            // Blocking bob again decides nothing, and still spends the key.
            let again = try await client.send(
                .post, "/v1/me/blocks", body: API.BlockBody(userId: bob.id.rawValue), token: ada.token, idempotencyKey: "b-1")
            #expect(again.status == .ok)
            let other = try await client.send(
                .post, "/v1/me/blocks", body: API.BlockBody(userId: carl.id.rawValue), token: ada.token, idempotencyKey: "b-1")
            #expect(other.status == .unprocessableContent)
            #expect(other.code == "idempotency_key_reused")
            let repeated = try await client.send(
                .post, "/v1/me/blocks", body: API.BlockBody(userId: bob.id.rawValue), token: ada.token, idempotencyKey: "b-1")
            #expect(repeated.status == .ok)
        }
    }
}

/// Crashes at the worst moments of moving money, in a real server process (SPEC §11.1).
@Suite("Money across crashes", .serialized)
struct MoneyCrashTests {
    /// A user with a card, made on a server without failpoints, which is then stopped.
    func userWithCard(_ database: PostgresConfiguration, _ handle: String) async throws -> (token: String, card: CardID) {
        let server = try await ServerProcess(database: database)
        let user = try await server.user(handle)
        let card = try await server.send(
            .post, "/v1/me/cards",
            body: API.CardBody(number: "4242424242424242", expMonth: 12, expYear: 2031, cvv: "123", holderName: "Ada"),
            token: user.token)
        #expect(card.status == .created)
        server.kill(SIGTERM)
        _ = await server.waitForExit()
        return (user.token, try card.decode(CardResource.self).id)
    }

    /// Sends `body` to a server armed with `failpoint`, which must die before answering.
    func sendAndDie(_ database: PostgresConfiguration, failpoint: String, _ path: String, _ body: some Encodable, token: String, key: String)
        async throws
    {
        let armed = try await ServerProcess(database: database, environment: ["LENDER_FAILPOINTS": failpoint])
        await #expect(throws: (any Error).self) {
            _ = try await armed.send(.post, path, body: body, token: token, idempotencyKey: key)
        }
        #expect(await armed.waitForExit() != nil, "the server died at \(failpoint)")
    }

    @Test func aDepositKilledAfterTheChargeAndRetriedChargesOnceAndCreditsOnce() async throws {
        try await withServerDatabase { database, admin in
            let ada = try await userWithCard(database, "ada")
            let deposit = API.DepositBody(amountCents: 7000, cardId: ada.card.rawValue)
            try await sendAndDie(database, failpoint: "charge.after", "/v1/me/deposits", deposit, token: ada.token, key: "dep-1")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges") == 1, "charged before the crash")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'FundsDeposited'") == 0)

            let server = try await ServerProcess(database: database)
            let retry = try await server.send(.post, "/v1/me/deposits", body: deposit, token: ada.token, idempotencyKey: "dep-1")
            #expect(retry.status == .created, "\(retry)")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges") == 1, "one charge")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'FundsDeposited'") == 1, "one credit")
            let chargeID = try await admin.query("SELECT charge_id FROM sandbox_charges").single().decode(0, as: String.self)
            #expect(try retry.decode(Deposit.self).chargeId == chargeID)
            #expect(try await server.send(.get, "/v1/me", token: ada.token).decode(PrivateProfile.self).balanceCents == 7000)
            let audit = try runLender(["audit", "money"], database: database)
            #expect(audit.contains("Money adds up"), "\(audit)")
        }
    }

    @Test func aDepositKilledAfterTheCommitIsAnsweredAgainAndNotChargedAgain() async throws {
        try await withServerDatabase { database, admin in
            let ada = try await userWithCard(database, "ada")
            let deposit = API.DepositBody(amountCents: 6000, cardId: ada.card.rawValue)
            try await sendAndDie(database, failpoint: "append.after-commit", "/v1/me/deposits", deposit, token: ada.token, key: "dep-2")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'FundsDeposited'") == 1, "committed")
            let position = try await admin.query("SELECT max(position) FROM events").single().decode(0, as: Int.self)

            let server = try await ServerProcess(database: database)
            let retry = try await server.send(.post, "/v1/me/deposits", body: deposit, token: ada.token, idempotencyKey: "dep-2")
            #expect(retry.status == .created, "\(retry)")
            #expect(retry.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            let deposited = try retry.decode(Deposit.self)
            #expect(deposited.position == Int64(position), "the first answer's position")
            #expect(deposited.balanceCents == 6000)
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges") == 1, "not charged again")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'FundsDeposited'") == 1)
            let chargeID = try await admin.query("SELECT charge_id FROM sandbox_charges").single().decode(0, as: String.self)
            #expect(deposited.chargeId == chargeID)
            #expect(try runLender(["audit", "money"], database: database).contains("Money adds up"))
        }
    }

    @Test func aCardCheckoutKilledAfterTheChargeIsRefundedOnceByReconciliation() async throws {
        try await withServerDatabase { database, admin in
            let lender = try await userWithCard(database, "lena")
            let setup = try await ServerProcess(database: database)
            let rita = try await setup.user("rita")
            let posted = try await setup.send(
                .post, "/v1/loans",
                body: API.LoanBody(
                    title: "Loom", description: "", sector: "Textiles", activity: "Weaving", country: "NP",
                    location: API.LocationInput(lat: 28.2, lng: 83.9), amountCents: 5000, deadline: dayFromToday(30)),
                token: rita.token)
            #expect(posted.status == .created, "\(posted)")
            let loanID = try posted.decode(LoanResource.self).id
            let added = try await setup.send(
                .post, "/v1/cart/items", body: API.CartLineBody(loanId: loanID.rawValue, amountCents: 2500), token: lender.token)
            #expect(added.status == .created)
            setup.kill(SIGTERM)
            _ = await setup.waitForExit()

            let checkout = API.CartPayment(payWith: .card, cardId: lender.card.rawValue)
            try await sendAndDie(database, failpoint: "charge.after", "/v1/cart/checkout", checkout, token: lender.token, key: "co-1")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges WHERE refunded_at IS NULL") == 1)
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'CardCharged'") == 0)

            let dryRun = try runLender(["payments", "reconcile", "--dry-run", "--older-than", "0"], database: database)
            #expect(dryRun.contains("would refund"), "\(dryRun)")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges WHERE refunded_at IS NULL") == 1)
            let first = try runLender(["payments", "reconcile", "--older-than", "0"], database: database)
            #expect(first.contains("1 not in the log"), "\(first)")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges WHERE refunded_at IS NOT NULL") == 1)
            let second = try runLender(["payments", "reconcile", "--older-than", "0"], database: database)
            #expect(second.contains("0 unrefunded charges checked, 0 not in the log"), "\(second)")

            // The refunded charge never pays for anything: the same request again is refused.
            let server = try await ServerProcess(database: database)
            let retry = try await server.send(.post, "/v1/cart/checkout", body: checkout, token: lender.token, idempotencyKey: "co-1")
            #expect(retry.status == .conflict)
            #expect(retry.code == "payment_refunded")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'CardCharged'") == 0)
            #expect(try runLender(["audit", "money"], database: database).contains("Money adds up"))
        }
    }
}
