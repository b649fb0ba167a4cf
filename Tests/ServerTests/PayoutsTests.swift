import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import ServerTestSupport
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Money out of the platform (SPEC §12.3), over HTTP: a bank account's token, payouts sent
/// once through the sandbox's books, and every refusal by its code.
@Suite("Payouts")
struct PayoutsTests {
    /// Verifies `token`'s address with the code its mail holds (no SMTP here: read from the outbox).
    func verify(_ client: any TestClientProtocol, _ admin: PostgresPool, _ token: String, _ user: UserID) async throws {
        #expect(try await client.send(.post, "/v1/me/email-verification", token: token).status == .accepted)
        let subject = try await admin.query(
            "SELECT subject FROM outbox WHERE user_id = \(user.rawValue) AND kind = 'email_verification' ORDER BY id DESC LIMIT 1"
        ).single().decode("subject", as: String.self)
        let code = try #require(subject.split(separator: " ").last.map(String.init))
        #expect(
            try await client.send(.post, "/v1/me/email-verification/confirm", body: API.VerificationCodeBody(code: code), token: token)
                .status == .ok)
    }

    /// A user ready to pay out: `balance` deposited, address verified, a sandbox account.
    func payee(_ client: any TestClientProtocol, _ admin: PostgresPool, _ handle: String, balance: Int) async throws
        -> (id: UserID, token: String)
    {
        let user = try await client.user(handle)
        if balance > 0 { try await client.fund(user.token, balance) }
        try await verify(client, admin, user.token, user.id)
        let method = try await client.send(
            .put, "/v1/me/payout-method", body: API.PayoutMethodBody(kind: .bankAccount, token: "ba_test_\(handle)"), token: user.token)
        #expect(method.status == .ok, "\(method)")
        return user
    }

    func payout(_ client: any TestClientProtocol, _ token: String, _ amount: Int, key: String? = nil) async throws -> Reply {
        try await client.send(.post, "/v1/me/payouts", body: API.PayoutBody(amountCents: amount), token: token, idempotencyKey: key)
    }

    func auditClean(_ admin: PostgresPool) async throws {
        let audit = try runLender(["audit", "money"], database: try await ownerURL(admin))
        #expect(audit.contains("Money adds up"), "\(audit)")
    }

    @Test func aPayoutNeedsAVerifiedAddressAnAccountTokenAndTheMoney() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            try await client.fund(ada.token, 50_000)
            #expect(try await payout(client, ada.token, 20_000).code == "email_unverified")
            try await verify(client, admin, ada.token, ada.id)
            #expect(try await payout(client, ada.token, 20_000).code == "payout_method_missing")

            // Account numbers never: an IBAN, a bare number, one inside a token.
            func method(_ token: String) async throws -> Reply {
                try await client.send(
                    .put, "/v1/me/payout-method", body: API.PayoutMethodBody(kind: .bankAccount, token: token), token: ada.token)
            }
            for raw in ["DE89370400440532013000", "12345678", "ba_test_0012345678", "GB29 NWBK 6016 1331 9268 19".replacingOccurrences(of: " ", with: "")] {
                #expect(try await method(raw).fieldCodes == ["token": "raw_account_number"], "\(raw)")
            }
            #expect(try await method("tok_visa").fieldCodes == ["token": "invalid_token"])
            #expect(try await method("ba_test_").fieldCodes == ["token": "invalid_token"])
            #expect(try await client.send(.put, "/v1/me/payout-method", json: ["kind": "card", "token": "ba_test_x"], token: ada.token)
                .fieldCodes == ["kind": "invalid_kind"])
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'PayoutMethodSet'") == 0, "nothing written")
            let set = try await method("ba_test_ada1")
            #expect(set.status == .ok && set.json["tokenEnding"] as? String == "ada1", "\(set)")
            // The token is sealed in the log, as personal data.
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'PayoutMethodSet' AND data::text LIKE '%ba_test_ada1%'") == 0)

            #expect(try await payout(client, ada.token, 999).fieldCodes == ["amountCents": "invalid_amount"])
            #expect(try await payout(client, ada.token, 10_000_001).fieldCodes == ["amountCents": "invalid_amount"])
            #expect(try await payout(client, ada.token, 50_001).code == "insufficient_funds")

            let sent = try await payout(client, ada.token, 20_000)
            #expect(sent.status == .created, "\(sent)")
            #expect(sent.json["status"] as? String == "sent" && sent.json["amountCents"] as? Int == 20_000)
            #expect(try await client.balance(ada.token) == 30_000)
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_transfers WHERE amount_cents = 20000 AND status = 'sent'") == 1)
            let listed = try await client.send(.get, "/v1/me/payouts", token: ada.token).json["data"] as? [[String: Any]] ?? []
            #expect(listed.count == 1 && listed.first?["status"] as? String == "sent")
            let history = try await client.send(.get, "/v1/me/balance-history", token: ada.token).json["data"] as? [[String: Any]] ?? []
            #expect(history.first?["kind"] as? String == "payout" && history.first?["balanceCents"] as? Int == 30_000)
            let feed = try await client.send(.get, "/v1/me/feed", token: ada.token).json["data"] as? [[String: Any]] ?? []
            #expect(feed.contains { $0["kind"] as? String == "payout_sent" && $0["amountCents"] as? Int == 20_000 }, "\(feed)")

            // Money is not forgotten with its owner.
            let close = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: ada.token)
            #expect(close.code == "balance_not_empty", "\(close)")
            #expect(try await payout(client, ada.token, 30_000).status == .created)
            let closed = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: ada.token)
            #expect(closed.status == .noContent, "\(closed)")
            try await auditClean(admin)
        }
    }

    @Test func largePayoutsWaitForAnOperatorAndAFailedTransferComesBack() async throws {
        try await withServer { client, admin in
            let bob = try await payee(client, admin, "bob", balance: 200_000)
            #expect(try await payout(client, bob.token, 60_000).status == .created)
            // 60,000 + 50,000 would pass 100,000 in 30 days.
            let refused = try await payout(client, bob.token, 50_000)
            #expect(refused.status == .forbidden && refused.code == "identity_unverified", "\(refused)")
            let verified = try runLender(["users", "verify-identity", "bob", "--by", "carol"], database: try await ownerURL(admin))
            #expect(verified.contains("verified, by operator:carol"), "\(verified)")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'IdentityVerified' AND data->>'verifiedBy' = 'operator:carol'") == 1)
            #expect(try await payout(client, bob.token, 50_000).status == .created)

            // A transfer that fails: 402, the amount back, the payout listed as failed.
            #expect(
                try await client.send(
                    .put, "/v1/me/payout-method", body: API.PayoutMethodBody(kind: .bankAccount, token: "ba_test_fail"), token: bob.token
                ).status == .ok)
            let failed = try await payout(client, bob.token, 10_000)
            #expect(failed.status.code == 402 && failed.code == "payout_failed", "\(failed)")
            #expect(try await client.balance(bob.token) == 90_000)
            let listed = try await client.send(.get, "/v1/me/payouts?limit=1", token: bob.token)
            #expect((listed.json["data"] as? [[String: Any]])?.first?["status"] as? String == "failed")
            #expect(listed.json["nextCursor"] as? String != nil)

            // Five a day, failures counted: the sixth is 429.
            #expect(
                try await client.send(
                    .put, "/v1/me/payout-method", body: API.PayoutMethodBody(kind: .bankAccount, token: "ba_test_bob"), token: bob.token
                ).status == .ok)
            #expect(try await payout(client, bob.token, 1_000).status == .created)
            #expect(try await payout(client, bob.token, 1_000).status == .created)
            let sixth = try await payout(client, bob.token, 1_000)
            #expect(sixth.status == .tooManyRequests && sixth.code == "too_many_payout_attempts", "\(sixth)")
            #expect(sixth.headers[.retryAfter] != nil)
            try await auditClean(admin)
        }
    }

    @Test func tenAtOnceOverABalanceForThreeAndOneBesideACheckout() async throws {
        try await withServer { client, admin in
            let ada = try await payee(client, admin, "ada", balance: 30_000)
            let answers = try await withThrowingTaskGroup(of: Reply.self) { group in
                for _ in 0..<10 { group.addTask { try await payout(client, ada.token, 10_000) } }
                return try await group.reduce(into: [Reply]()) { $0.append($1) }
            }
            let statuses = answers.map(\.status.code).sorted()
            #expect(statuses.filter { $0 == 201 }.count == 3, "\(answers)")
            #expect(answers.filter { $0.status.code != 201 }.allSatisfy { $0.code == "insufficient_funds" }, "\(answers)")
            #expect(try await client.balance(ada.token) == 0)
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_transfers") == 3)

            // A payout and a checkout from the balance, at once, over a balance for one.
            let borrower = try await client.user("borrower")
            let loan = try await client.postLoan(borrower.token, amount: 10_000)
            let bob = try await payee(client, admin, "bob", balance: 5_000)
            _ = try await client.addToCart(bob.token, loan, 5_000)
            async let paid = payout(client, bob.token, 5_000)
            async let checkout = client.send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: bob.token)
            let (out, cart) = try await (paid, checkout)
            let codes: [Int] = [out.status.code, cart.status.code]
            let succeeded = codes.filter { $0 == 201 || $0 == 200 }.count
            #expect(succeeded == 1, "\(out) \(cart)")
            #expect(try await client.balance(bob.token) == 0)
            try await auditClean(admin)
        }
    }

    @Test func aRepeatedKeyIsTheSamePayoutAndAnotherAmountIsRefused() async throws {
        try await withServer { client, admin in
            let ada = try await payee(client, admin, "ada", balance: 10_000)
            let first = try await payout(client, ada.token, 4_000, key: "payout-1")
            let again = try await payout(client, ada.token, 4_000, key: "payout-1")
            #expect(first.status == .created && again.status == .created)
            #expect(first.json["id"] as? String == again.json["id"] as? String)
            #expect(try await payout(client, ada.token, 5_000, key: "payout-1").code == "idempotency_key_reused")
            #expect(try await client.balance(ada.token) == 6_000)
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_transfers") == 1)
            // Twins sent at once: one payout, one transfer, the same answer to both.
            async let one = payout(client, ada.token, 3_000, key: "payout-2")
            async let two = payout(client, ada.token, 3_000, key: "payout-2")
            let (first2, second2) = try await (one, two)
            #expect(first2.status == .created && second2.status == .created, "\(first2) \(second2)")
            #expect(first2.json["id"] as? String == second2.json["id"] as? String)
            #expect(first2.json["position"] as? Int != nil && second2.json["position"] as? Int != nil, "a command's answer has its position")
            #expect(try await client.balance(ada.token) == 3_000)
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_transfers") == 2)
        }
    }

    @Test func aBalanceUnderTheSmallestPayoutIsSettledByAnOperatorBeforeForgetting() async throws {
        try await withServer { client, admin in
            let zoe = try await client.user("zoe")
            try await client.fund(zoe.token, 600)
            let closing = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: zoe.token)
            #expect(closing.code == "balance_not_empty", "\(closing)")
            #expect(try await payout(client, zoe.token, 600).fieldCodes == ["amountCents": "invalid_amount"])
            let settled = try runLender(
                ["users", "settle-balance", "zoe", "--by", "carol", "--reason", "bank transfer ref 42"], database: try await ownerURL(admin))
            #expect(settled.contains("600 cents settled by operator:carol"), "\(settled)")
            let history = try await client.send(.get, "/v1/me/balance-history", token: zoe.token).json["data"] as? [[String: Any]] ?? []
            #expect(history.first?["kind"] as? String == "settlement" && history.first?["balanceCents"] as? Int == 0)
            let closed = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: zoe.token)
            #expect(closed.status == .noContent, "\(closed)")
            let audit = try runLender(["audit", "money"], database: try await ownerURL(admin))
            #expect(audit.contains("Money adds up") && audit.contains("settled by operators 600"), "\(audit)")
        }
    }

    @Test func anOwnerPaidForABookingAndALenderRepaidPayOut() async throws {
        try await withServer { client, admin in
            // The owner's earnings from a completed booking.
            let owner = try await payee(client, admin, "owner", balance: 0)
            let ada = try await client.user("ada")
            try await client.fund(ada.token, 10_000)
            let drill = try await client.postRental(owner.token).id
            let bid = try await client.send(
                .post, "/v1/items/\(drill)/bids",
                body: API.BidBody(dailyPriceCents: 1400, from: "2026-12-05", until: "2026-12-07", payWith: .balance), token: ada.token)
            #expect(bid.status == .created, "\(bid)")
            let bidID = try #require(bid.json["id"] as? String)
            #expect(try await client.send(.post, "/v1/bids/\(bidID)/approve", token: owner.token).status == .ok)
            _ = try await runJobs(admin, on: "2026-12-08")
            let earned = try await client.balance(owner.token)
            #expect(earned == 3_780, "4,200 less the owner's 10 %")
            #expect(try await payout(client, owner.token, earned).status == .created)

            // A lender's repaid share.
            let borrower = try await client.user("borrower")
            try await client.fund(borrower.token, 5_000)
            let (loan, lenders) = try await client.fundedLoan(borrower: borrower.token, lenders: 1, amount: 2_500)
            #expect(
                try await client.send(
                    .post, "/v1/loans/\(loan)/repayments", body: API.RepaymentBody(amountCents: 2500, payWith: .balance),
                    token: borrower.token
                ).status.code < 300)
            let lender = try await client.me(lenders[0])
            try await verify(client, admin, lenders[0], lender.id)
            #expect(
                try await client.send(
                    .put, "/v1/me/payout-method", body: API.PayoutMethodBody(kind: .bankAccount, token: "ba_test_lender"), token: lenders[0]
                ).status == .ok)
            #expect(try await payout(client, lenders[0], 2_500).status == .created)
            #expect(try await client.balance(lenders[0]) == 0)
            try await auditClean(admin)
        }
    }
}

/// A crash between the transfer and its record (SPEC §12.3): one transfer, whether the request
/// is retried or reconciliation finishes it.
@Suite("Payouts across crashes", .serialized)
struct PayoutCrashTests {
    func prepared(_ database: PostgresConfiguration, _ admin: PostgresPool) async throws -> String {
        let server = try await ServerProcess(database: database)
        let ada = try await server.user("ada")
        let card = try await server.send(
            .post, "/v1/me/cards",
            body: API.CardBody(number: "4242424242424242", expMonth: 12, expYear: 2031, cvv: "123", holderName: "Ada"), token: ada.token)
        let deposit = try await server.send(
            .post, "/v1/me/deposits",
            body: API.DepositBody(amountCents: 10_000, cardId: UUID(uuidString: try #require(card.json["id"] as? String))!),
            token: ada.token)
        #expect(deposit.status == .created, "\(deposit)")
        #expect(try await server.send(.post, "/v1/me/email-verification", token: ada.token).status == .accepted)
        let subject = try await admin.query("SELECT subject FROM outbox ORDER BY id DESC LIMIT 1").single().decode("subject", as: String.self)
        let code = String(subject.split(separator: " ").last ?? "")
        let confirmed = try await server.send(
            .post, "/v1/me/email-verification/confirm", body: API.VerificationCodeBody(code: code), token: ada.token)
        #expect(confirmed.status == .ok)
        let method = try await server.send(
            .put, "/v1/me/payout-method", body: API.PayoutMethodBody(kind: .bankAccount, token: "ba_test_ada"), token: ada.token)
        #expect(method.status == .ok)
        server.kill(SIGTERM)
        _ = await server.waitForExit()
        return ada.token
    }

    func dieAfterTheTransfer(_ database: PostgresConfiguration, _ token: String, key: String, amount: Int = 4_000) async throws {
        let armed = try await ServerProcess(database: database, environment: ["LENDER_FAILPOINTS": "payout.after"])
        await #expect(throws: (any Error).self) {
            _ = try await armed.send(.post, "/v1/me/payouts", body: API.PayoutBody(amountCents: amount), token: token, idempotencyKey: key)
        }
        #expect(await armed.waitForExit() != nil, "the server died after the transfer")
    }

    @Test func aRetryAfterTheCrashRecordsTheOneTransfer() async throws {
        try await withServerDatabase { database, admin in
            let token = try await prepared(database, admin)
            try await dieAfterTheTransfer(database, token, key: "out-1")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_transfers") == 1)
            #expect(try await count(admin, "SELECT count(*) FROM payouts_view WHERE status = 'pending'") == 1)
            let server = try await ServerProcess(database: database)
            defer { server.kill(SIGTERM) }
            let retried = try await server.send(
                .post, "/v1/me/payouts", body: API.PayoutBody(amountCents: 4_000), token: token, idempotencyKey: "out-1")
            #expect(retried.status == .created && retried.json["status"] as? String == "sent", "\(retried)")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_transfers") == 1, "one transfer")
            #expect(try await server.send(.get, "/v1/me", token: token).json["balanceCents"] as? Int == 6_000)
            let audit = try runLender(["audit", "money"], database: database)
            #expect(audit.contains("Money adds up"), "\(audit)")
        }
    }

    @Test func reconciliationFinishesAPayoutNobodyRetried() async throws {
        try await withServerDatabase { database, admin in
            let token = try await prepared(database, admin)
            try await dieAfterTheTransfer(database, token, key: "out-2", amount: 10_000)
            // On its way meanwhile: counted as paid out, not yet an imbalance (five minutes' grace).
            let before = try runLender(["audit", "money"], database: database)
            #expect(before.contains("Money adds up") && before.contains("paid out 10000 in 1 payouts"), "\(before)")
            // Nor can its owner be forgotten: its outcome may yet credit the balance.
            let server = try await ServerProcess(database: database)
            let closing = try await server.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: token)
            #expect(closing.code == "payout_pending", "\(closing)")
            server.kill(SIGTERM)
            _ = await server.waitForExit()
            let reconciled = try runLender(["payouts", "reconcile", "--older-than", "0"], database: database)
            #expect(reconciled.contains("1 sent"), "\(reconciled)")
            #expect(try runLender(["payouts", "reconcile", "--older-than", "0"], database: database).contains("0 sent"))
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_transfers") == 1, "one transfer")
            #expect(try await count(admin, "SELECT count(*) FROM payouts_view WHERE status = 'sent'") == 1)
            let audit = try runLender(["audit", "money"], database: database)
            #expect(audit.contains("Money adds up"), "\(audit)")
        }
    }
}
