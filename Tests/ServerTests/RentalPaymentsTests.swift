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

/// A rental paid on the platform (SPEC §12.2), over HTTP: prices fixed in the bid, holds on
/// the balance or a card, capture into escrow, settlement, cancellation by policy.
@Suite("Rental payments over HTTP")
struct RentalPaymentsTests {
    /// A bid of 1400 a day paid as `payWith` says (a card's id, or `balance`).
    func bid(
        _ client: any TestClientProtocol, _ item: ItemID, _ token: String, _ from: String = "2026-12-05",
        _ until: String = "2026-12-07", paying: String, price: Int = 1400, key: String? = nil
    ) async throws -> Reply {
        var body = API.BidBody(dailyPriceCents: price, from: from, until: until)
        if paying == "balance" {
            body.payWith = .balance
        } else {
            body.payWith = .card
            body.cardId = try #require(UUID(uuidString: paying), "a card's id: \(paying)")
        }
        return try await client.send(.post, "/v1/items/\(item)/bids", body: body, token: token, idempotencyKey: key)
    }

    func card(_ client: any TestClientProtocol, _ token: String, number: String = "4242424242424242") async throws -> String {
        let added = try await client.addCard(token, number: number)
        #expect(added.status == .created, "\(added)")
        return try #require(added.json["id"] as? String)
    }

    func rental(_ client: any TestClientProtocol, _ token: String, policy: String = "flexible", price: Int = 1500) async throws
        -> ItemID
    {
        let posted = try await client.send(
            .post, "/v1/rentals",
            body: API.RentalBody(
                title: "Drill", description: "Cordless", category: .tools, dailyPriceCents: price,
                location: API.LocationInput(lat: 27.7, lng: 85.3, place: "Kathmandu"),
                cancellationPolicy: try #require(API.CancellationPolicy(rawValue: policy), "a policy: \(policy)")
            ), token: token)
        #expect(posted.status == .created, "\(posted)")
        return try posted.decode(ItemResource.self).id
    }

    func me(_ client: any TestClientProtocol, _ token: String) async throws -> (balance: Int, available: Int) {
        let me = try await client.send(.get, "/v1/me", token: token).json
        return (me["balanceCents"] as? Int ?? -1, me["availableCents"] as? Int ?? -1)
    }

    func auditClean(_ admin: PostgresPool) async throws {
        let audit = try runLender(["audit", "money"], database: try await ownerURL(admin))
        #expect(audit.contains("Money adds up"), "\(audit)")
    }

    @Test func theBidFixesItsPricesAndTheBookingShowsThem() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let drill = try await rental(client, owner.token)
            let placed = try await bid(client, drill, ada.token, paying: try await card(client, ada.token))
            #expect(placed.status == .created, "\(placed)")
            let payment = try #require(placed.json["payment"] as? [String: Any], "\(placed)")
            // 3 days at 1400: 4200; 5 % renter fee 210, 10 % owner fee 420.
            #expect(payment["days"] as? Int == 3)
            #expect(payment["totalCents"] as? Int == 4200)
            #expect(payment["renterFeeCents"] as? Int == 210)
            #expect(payment["ownerFeeCents"] as? Int == 420)
            #expect(payment["chargeCents"] as? Int == 4410)
            #expect(payment["payoutCents"] as? Int == 3780)
            #expect(payment["cancellationPolicy"] as? String == "flexible")
            #expect(payment["payWith"] as? String == "card")
            let bidID = try #require(placed.json["id"] as? String)
            let listed = try await client.send(.get, "/v1/items/\(drill)/bids", token: owner.token).json["data"] as? [[String: Any]]
            #expect((listed?.first?["payment"] as? [String: Any])?["chargeCents"] as? Int == 4410, "in the item's bids list")
            let mine = try await client.send(.get, "/v1/me/bids", token: ada.token).json["data"] as? [[String: Any]]
            #expect((mine?.first?["payment"] as? [String: Any])?["payoutCents"] as? Int == 3780, "in the renter's own bids")

            #expect(try await client.send(.post, "/v1/bids/\(bidID)/approve", token: owner.token).status == .ok)
            let booking = try await client.send(.get, "/v1/bookings/\(bidID)", token: ada.token).json
            #expect((booking["payment"] as? [String: Any])?["chargeCents"] as? Int == 4410, "\(booking)")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges WHERE amount_cents = 4410") == 1, "captured")
            try await auditClean(admin)
        }
    }

    @Test func aRentalBidNeedsPayWithAndRefusesAnotherUsersCardAndHugeCharges() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            let drill = try await rental(client, owner.token)
            let before = try await eventCount(admin)
            let unpaid = try await client.send(
                .post, "/v1/items/\(drill)/bids",
                json: ["dailyPriceCents": 1400, "from": "2026-12-05", "until": "2026-12-07", "payWith": NSNull()], token: ada.token)
            #expect(unpaid.status == .unprocessableContent, "\(unpaid)")
            #expect(unpaid.fieldCodes["payWith"] == "payment_required")
            let bobsCard = try await card(client, bob.token)
            let stolen = try await bid(client, drill, ada.token, paying: bobsCard)
            #expect(stolen.status == .notFound, "\(stolen)")
            #expect(stolen.code == "card_not_found")
            // 365 days at the top daily price: far past what one payment may be.
            let adasCard = try await card(client, ada.token)
            let huge = try await bid(client, drill, ada.token, "2027-01-01", "2027-12-31", paying: adasCard, price: 999_999)
            #expect(huge.status == .unprocessableContent, "\(huge)")
            #expect(huge.code == "amount_too_large")
            let declined = try await bid(client, drill, ada.token, paying: try await card(client, ada.token, number: "4000000000000002"))
            #expect(declined.status.code == 402, "\(declined)")
            #expect(declined.code == "card_declined")
            // Two cards added (bob's, ada's two); nothing else written.
            #expect(try await eventCount(admin) == before + 3)
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_authorizations") == 0)
        }
    }

    @Test func aOneCentRentalRoundsItsFeesHalfUp() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let drill = try await rental(client, owner.token, price: 1)
            let card = try await card(client, ada.token)
            let one = try await bid(client, drill, ada.token, "2026-12-05", "2026-12-05", paying: card, price: 1)
            let payment = try #require(one.json["payment"] as? [String: Any], "\(one)")
            #expect(payment["renterFeeCents"] as? Int == 0)
            #expect(payment["chargeCents"] as? Int == 1)
            #expect(payment["payoutCents"] as? Int == 1)
            // 10 days at 1: total 10, renter fee 0.5 → 1, owner fee 1.
            let ten = try await bid(client, drill, try await client.user("bea").token, "2026-12-10", "2026-12-19", paying: "balance", price: 1)
            #expect(ten.code == "insufficient_funds")
            let bea = try await client.user("cid")
            try await client.fund(bea.token, 500)
            let held = try await bid(client, drill, bea.token, "2026-12-10", "2026-12-19", paying: "balance", price: 1)
            let fees = try #require(held.json["payment"] as? [String: Any], "\(held)")
            #expect((fees["renterFeeCents"] as? Int, fees["ownerFeeCents"] as? Int, fees["chargeCents"] as? Int) == (1, 1, 11))
        }
    }

    @Test func tenBidsFromABalanceThatCoversThreeHoldThreeAndWriteNothingElse() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            try await client.fund(ada.token, 15_000)  // three charges of 4410, not four
            var rentals = [ItemID]()
            for index in 0..<10 { rentals.append(try await rental(client, try await client.user("owner\(index)").token)) }
            let before = try await eventCount(admin)
            let answers = try await withThrowingTaskGroup(of: Reply.self) { group in
                for item in rentals { group.addTask { try await bid(client, item, ada.token, paying: "balance") } }
                return try await group.reduce(into: [Reply]()) { $0.append($1) }
            }
            #expect(answers.filter { $0.status == .created }.count == 3, "\(answers.map(\.status))")
            #expect(answers.filter { $0.code == "insufficient_funds" }.count == 7, "\(answers)")
            // Three bids, each with its hold: six events.
            #expect(try await eventCount(admin) == before + 6)
            let balance = try await me(client, ada.token)
            #expect(balance == (15_000, 15_000 - 3 * 4410))
            // What is held is not spent elsewhere: a checkout of the whole balance is refused.
            let history = try await client.send(.get, "/v1/me/balance-history?limit=2", token: ada.token)
            let page = try #require(history.json["data"] as? [[String: Any]], "\(history)")
            #expect(page.map { $0["kind"] as? String } == ["hold", "hold"])
            #expect(page.first?["availableCents"] as? Int == 15_000 - 3 * 4410)
            let cursor = try #require(history.json["nextCursor"] as? String)
            let rest = try await client.send(.get, "/v1/me/balance-history?cursor=\(cursor)", token: ada.token).json["data"]
                as? [[String: Any]]
            #expect(rest?.map { $0["kind"] as? String } == ["hold", "deposit"])
            #expect(try await client.send(.get, "/v1/me/balance-history?cursor=x", token: ada.token).status == .unprocessableContent)
            try await auditClean(admin)
        }
    }

    @Test func rejectionWithdrawalAndExpiryReleaseTheHoldOnce() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            try await client.fund(ada.token, 10_000)
            let drill = try await rental(client, owner.token)
            let saw = try await rental(client, owner.token)
            let withdrawn = try await bid(client, drill, ada.token, paying: "balance").json["id"] as! String
            let rejected = try await bid(client, saw, ada.token, paying: "balance").json["id"] as! String
            #expect(try await me(client, ada.token) == (10_000, 10_000 - 2 * 4410))
            let deposit = try await client.send(
                .post, "/v1/me/deposits",
                body: API.DepositBody(
                    amountCents: 500, cardId: UUID(uuidString: try await card(client, ada.token, number: "5555555555554444"))!),
                token: ada.token)
            #expect(deposit.json["availableCents"] as? Int == 10_500 - 2 * 4410, "\(deposit)")
            #expect(try await client.send(.post, "/v1/bids/\(withdrawn)/withdraw", token: ada.token).status == .ok)
            #expect(try await client.send(.post, "/v1/bids/\(rejected)/reject", token: owner.token).status == .ok)
            #expect(try await me(client, ada.token) == (10_500, 10_500))
            #expect(try await client.send(.post, "/v1/bids/\(rejected)/reject", token: owner.token).code == "bid_not_pending")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'RentalHoldReleased'") == 2)

            // A card's hold is an authorisation, voided when its bid expires.
            let bobsCard = try await card(client, bob.token)
            let expiring = try await bid(client, drill, bob.token, "2026-12-03", "2026-12-04", paying: bobsCard).json["id"] as! String
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_authorizations WHERE voided_at IS NULL") == 1)
            clock.set("2026-12-03")
            #expect(try await runJobs(admin, on: "2026-12-03").bidsExpired == 1)
            let bobs = try await client.send(.get, "/v1/items/\(drill)/bids", token: bob.token).decode(Page<BidResource>.self)
            #expect(bobs.data.first { $0.id.description == expiring }?.reason == "expired")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_authorizations WHERE voided_at IS NOT NULL") == 1, "voided")
            try await auditClean(admin)
        }
    }

    @Test func approvalCapturesIntoEscrowAndCompletionPaysTheOwner() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let eve = try await client.user("eve")
            try await client.fund(eve.token, 10_000)
            let drill = try await rental(client, owner.token)
            let adas = try await bid(client, drill, ada.token, paying: try await card(client, ada.token)).json["id"] as! String
            let eves = try await bid(client, drill, eve.token, "2026-12-06", "2026-12-08", paying: "balance").json["id"] as! String
            #expect(try await client.send(.post, "/v1/bids/\(adas)/approve", token: owner.token).status == .ok)
            // The overlapping bid is rejected and its hold released in the same append.
            #expect(try await me(client, eve.token) == (10_000, 10_000))
            #expect(try await client.send(.get, "/v1/items/\(drill)/bids", token: eve.token).json["data"].map { "\($0)" }?
                .contains("dates_taken") == true)
            _ = eves
            #expect(try await me(client, owner.token).balance == 0, "not paid before the booking ends")

            clock.set("2026-12-08")
            let completed = try await client.send(.post, "/v1/bookings/\(adas)/complete", token: owner.token)
            #expect(completed.status == .ok, "\(completed)")
            #expect(completed.json["settledPayoutCents"] as? Int == 3780)
            #expect(completed.json["settledFeesCents"] as? Int == 630)
            #expect(try await me(client, owner.token) == (3780, 3780))
            let history = try await client.send(.get, "/v1/me/balance-history", token: owner.token).json["data"] as? [[String: Any]]
            #expect(history?.first?["kind"] as? String == "rental_earnings")
            #expect(history?.first?["bookingId"] as? String == adas)
            #expect(history?.first?["amountCents"] as? Int == 3780)
            try await auditClean(admin)
            #expect(try runLender(["replay", "--verify"], database: try await ownerURL(admin)).contains("no differences"))
        }
    }

    @Test func aCaptureTheProcessorRefusesRejectsTheBid() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let drill = try await rental(client, owner.token)
            let blocked = try await card(client, ada.token, number: "4000000000000341")
            let placed = try await bid(client, drill, ada.token, paying: blocked)
            #expect(placed.status == .created, "authorised: \(placed)")
            let bidID = try #require(placed.json["id"] as? String)
            let approved = try await client.send(.post, "/v1/bids/\(bidID)/approve", token: owner.token, idempotencyKey: "ok-1")
            #expect(approved.status == .conflict, "\(approved)")
            #expect(approved.code == "payment_failed")
            // The same request again is refused again (the rejection is not the approval's to answer).
            let again = try await client.send(.post, "/v1/bids/\(bidID)/approve", token: owner.token, idempotencyKey: "ok-1")
            #expect(again.status == .conflict, "\(again)")
            let bids = try await client.send(.get, "/v1/items/\(drill)/bids", token: ada.token).decode(Page<BidResource>.self)
            #expect(bids.data.first?.status == "rejected")
            #expect(bids.data.first?.reason == "payment_failed")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_authorizations WHERE voided_at IS NOT NULL") == 1)
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'BookingConfirmed'") == 0)
            try await auditClean(admin)
        }
    }

    @Test func cancellationRefundsByPolicyAndTheOwnersRefundsAll() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            let eve = try await client.user("eve")
            try await client.fund(bob.token, 10_000)
            let drill = try await rental(client, owner.token, policy: "moderate")
            let adaCard = try await card(client, ada.token)
            let adas = try await bid(client, drill, ada.token, "2026-12-10", "2026-12-12", paying: adaCard).json["id"] as! String
            let bobs = try await bid(client, drill, bob.token, "2026-12-20", "2026-12-22", paying: "balance").json["id"] as! String
            for id in [adas, bobs] { #expect(try await client.send(.post, "/v1/bids/\(id)/approve", token: owner.token).status == .ok) }
            #expect(try await me(client, bob.token) == (10_000 - 4410, 10_000 - 4410))

            // Someone else: no such booking.
            let stranger = try await client.send(.post, "/v1/bookings/\(adas)/cancel", token: eve.token)
            #expect(stranger.status == .notFound)
            #expect(stranger.code == "booking_not_found")

            // Ada cancels six days before, under `moderate`: half of 4200 and half of 210 back.
            clock.set("2026-12-04")
            let cancelled = try await client.send(
                .post, "/v1/bookings/\(adas)/cancel", body: API.CancellationBody(reason: "Plans changed"), token: ada.token)
            #expect(cancelled.status == .ok, "\(cancelled)")
            #expect(cancelled.json["status"] as? String == "cancelled")
            #expect(cancelled.json["refundCents"] as? Int == 2100 + 105)
            // The rest settled: 2100 kept, the owner's 10 % of it (210) earned, 1890 paid.
            #expect(cancelled.json["settledPayoutCents"] as? Int == 1890)
            #expect(cancelled.json["settledFeesCents"] as? Int == 105 + 210)
            let charge = try await admin.query("SELECT charge_id FROM sandbox_charges WHERE amount_cents = 4410").single()
                .decode(0, as: String.self)
            #expect(try await count(admin, "SELECT coalesce(sum(amount_cents), 0)::int8 FROM sandbox_refunds WHERE charge_id = \(charge)") == 2205)
            let twice = try await client.send(.post, "/v1/bookings/\(adas)/cancel", token: owner.token)
            #expect(twice.code == "booking_cancelled")
            #expect(try await me(client, owner.token) == (1890, 1890))
            // The days are free again.
            let again = try await bid(client, drill, eve.token, "2026-12-10", "2026-12-12", paying: try await card(client, eve.token))
            #expect(again.status == .created, "\(again)")

            // The owner cancels bob's: all of it back, and counted on the owner's profile.
            let byOwner = try await client.send(.post, "/v1/bookings/\(bobs)/cancel", token: owner.token)
            #expect(byOwner.json["refundCents"] as? Int == 4410, "\(byOwner)")
            #expect(try await me(client, bob.token) == (10_000, 10_000))
            let profile = try await client.send(.get, "/v1/users/\(owner.id)", token: ada.token).json
            #expect(profile["ownerCancellations"] as? Int == 1)

            // On its first day it has begun.
            let eves = try #require(again.json["id"] as? String)
            #expect(try await client.send(.post, "/v1/bids/\(eves)/approve", token: owner.token).status == .ok)
            clock.set("2026-12-10")
            let started = try await client.send(.post, "/v1/bookings/\(eves)/cancel", token: eve.token)
            #expect(started.status == .conflict)
            #expect(started.code == "booking_started")
            try await auditClean(admin)
            // The views the appends wrote are the ones a rebuild writes.
            #expect(try runLender(["replay", "--verify"], database: try await ownerURL(admin)).contains("no differences"))
        }
    }

    @Test func strictPolicyKeepsEverythingInTheLastWeekAndHalfBefore() async throws {
        // The table, as the domain states it: each share of the charge goes somewhere.
        let price = try #require(
            RentalPrice(
                dailyPriceCents: 999, period: Period(from: Day("2026-12-10")!, until: Day("2026-12-16")!), fees: .standard,
                policy: .strict))
        let lastWeek = price.settlement(cancelledByOwner: false, daysBefore: 6)
        #expect(lastWeek.refundCents == 0)
        let early = price.settlement(cancelledByOwner: false, daysBefore: 7)
        #expect(early.refundCents == (6993 + 1) / 2 + (350 + 1) / 2)
        for settled in [lastWeek, early, price.settlement(), price.settlement(cancelledByOwner: true, daysBefore: 1)] {
            #expect(settled.refundCents + settled.payoutCents + settled.feesCents == price.chargeCents, "\(settled)")
        }
    }

    @Test func approveAndWithdrawAtOnceCaptureOrReleaseNeverBoth() async throws {
        try await withServer { client, admin in
            for round in 0..<4 {
                let owner = try await client.user("owner\(round)")
                let ada = try await client.user("ada\(round)")
                let drill = try await rental(client, owner.token)
                let bidID = try await bid(client, drill, ada.token, paying: try await card(client, ada.token)).json["id"] as! String
                async let approve = client.send(.post, "/v1/bids/\(bidID)/approve", token: owner.token)
                async let withdraw = client.send(.post, "/v1/bids/\(bidID)/withdraw", token: ada.token)
                let (approved, withdrawn) = try await (approve, withdraw)
                #expect([approved.status, withdrawn.status].filter { $0 == .ok }.count == 1, "\(approved) \(withdrawn)")
                let captured = try await count(
                    admin, "SELECT count(*) FROM events WHERE type = 'RentalPaid' AND data->>'bookingID' = \(bidID)")
                let released = try await count(
                    admin, "SELECT count(*) FROM events WHERE type = 'RentalHoldReleased' AND data->>'bidID' = \(bidID)")
                #expect(captured + released == 1, "round \(round)")
            }
            // A capture whose approval lost is refunded whole; none is left unrefunded outside the log.
            #expect(
                try await count(
                    admin,
                    """
                    SELECT count(*) FROM sandbox_charges c WHERE refunded_at IS NULL
                      AND NOT EXISTS (SELECT 1 FROM events WHERE type = 'RentalPaid' AND data->>'chargeID' = c.charge_id)
                    """) == 0)
            try await auditClean(admin)
        }
    }

    @Test func cancelAndCompleteAtOnceOneWins() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            try await client.fund(ada.token, 10_000)
            let drill = try await rental(client, owner.token)
            let bidID = try await bid(client, drill, ada.token, paying: "balance").json["id"] as! String
            #expect(try await client.send(.post, "/v1/bids/\(bidID)/approve", token: owner.token).status == .ok)
            // Before its first day it cannot complete: the cancel wins.
            async let cancel = client.send(.post, "/v1/bookings/\(bidID)/cancel", token: ada.token)
            async let complete = client.send(.post, "/v1/bookings/\(bidID)/complete", token: owner.token)
            let (cancelled, completed) = try await (cancel, complete)
            #expect(cancelled.status == .ok, "\(cancelled)")
            #expect(completed.code == "booking_not_ended" || completed.code == "booking_not_confirmed", "\(completed)")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'RentalEarned'") == 0, "flexible: all back")
            #expect(try await me(client, ada.token) == (10_000, 10_000))
            try await auditClean(admin)
        }
    }

    @Test func aForgottenRentersCardHoldIsVoidedWithTheirBid() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let drill = try await rental(client, owner.token)
            #expect(try await bid(client, drill, ada.token, paying: try await card(client, ada.token)).status == .created)
            let closed = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: ada.token)
            #expect(closed.status == .noContent, "\(closed)")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'RentalHoldReleased'") == 1)
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_authorizations WHERE voided_at IS NOT NULL") == 1)
            try await auditClean(admin)
        }
    }

    @Test func aForgottenOwnersUpcomingBookingsAreCancelledAndRefundedInFull() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            try await client.fund(ada.token, 10_000)
            let drill = try await rental(client, owner.token, policy: "strict")
            let bidID = try await bid(client, drill, ada.token, dayFromToday(20), dayFromToday(21), paying: "balance").json["id"] as! String
            #expect(try await client.send(.post, "/v1/bids/\(bidID)/approve", token: owner.token).status == .ok)
            let closed = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: owner.token)
            #expect(closed.status == .noContent, "\(closed)")
            let booking = try await client.send(.get, "/v1/bookings/\(bidID)", token: ada.token).json
            #expect(booking["status"] as? String == "cancelled", "\(booking)")
            #expect(try await me(client, ada.token) == (10_000, 10_000), "strict, but the owner cancelled: all of it back")
            #expect(try await client.send(.get, "/v1/items/\(drill)", token: ada.token).json["status"] as? String == "withdrawn")
            try await auditClean(admin)
        }
    }

    @Test func aReleasedCardHoldLeftOpenAtTheProcessorIsNamedThenVoidedByReconciliation() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            let drill = try await rental(client, owner.token)
            let bidID = try await bid(client, drill, ada.token, paying: try await card(client, ada.token)).json["id"] as! String
            #expect(try await client.send(.post, "/v1/bids/\(bidID)/withdraw", token: ada.token).status == .ok)
            // The void lost (as if the server died after the release's commit), five minutes ago.
            try await admin.query("UPDATE sandbox_authorizations SET voided_at = NULL")
            try await admin.query("ALTER TABLE events DISABLE TRIGGER events_no_update_or_delete")
            try await admin.query("UPDATE events SET recorded_at = now() - interval '10 minutes' WHERE type = 'RentalHoldReleased'")
            try await admin.query("ALTER TABLE events ENABLE TRIGGER events_no_update_or_delete")
            let database = try await ownerURL(admin)
            let audit = try runLender(["audit", "money"], database: database, expectedStatus: 1)
            #expect(audit.contains("IMBALANCE bid \(bidID)") && audit.contains("open at the processor"), "\(audit)")
            let reconciled = try runLender(["payments", "reconcile", "--older-than", "0"], database: database)
            #expect(reconciled.contains("1 not held by the log"), "\(reconciled)")
            try await auditClean(admin)
        }
    }

    @Test func theMoneyAuditNamesTheBookingWhoseAmountWasAltered() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let ada = try await client.user("ada")
            try await client.fund(ada.token, 10_000)
            let drill = try await rental(client, owner.token)
            let bidID = try await bid(client, drill, ada.token, paying: "balance").json["id"] as! String
            #expect(try await client.send(.post, "/v1/bids/\(bidID)/approve", token: owner.token).status == .ok)
            #expect(try await client.send(.post, "/v1/bookings/\(bidID)/cancel", token: owner.token).status == .ok)
            try await auditClean(admin)
            try await admin.query("ALTER TABLE events DISABLE TRIGGER events_no_update_or_delete")
            try await admin.query("UPDATE events SET data = jsonb_set(data, '{amountCents}', '4000') WHERE type = 'RentalRefunded'")
            try await admin.query("ALTER TABLE events ENABLE TRIGGER events_no_update_or_delete")
            let output = try runLender(["audit", "money"], database: try await ownerURL(admin), expectedStatus: 1)
            #expect(output.contains("IMBALANCE booking \(bidID)"), "\(output)")
        }
    }
}

/// Crashes at the worst moments of a rental's money (SPEC §12.2), in a real server process:
/// after the card's authorisation, after its capture, each then retried or reconciled.
@Suite("Rental payments across crashes", .serialized)
struct RentalPaymentCrashTests {
    /// A rental of `owner`'s and a card of `renter`'s, made on a server that is then stopped.
    func setUp(_ database: PostgresConfiguration) async throws -> (owner: String, renter: String, item: ItemID, card: String) {
        let server = try await ServerProcess(database: database)
        let owner = try await server.user("owner")
        let renter = try await server.user("ada")
        let item = try await server.send(
            .post, "/v1/rentals",
            body: API.RentalBody(
                title: "Drill", category: .tools, dailyPriceCents: 1500, location: API.LocationInput(lat: 27.7, lng: 85.3)),
            token: owner.token
        ).decode(ItemResource.self).id
        let card = try await server.send(
            .post, "/v1/me/cards",
            body: API.CardBody(number: "4242424242424242", expMonth: 12, expYear: 2031, cvv: "123", holderName: "Ada"), token: renter.token)
        server.kill(SIGTERM)
        _ = await server.waitForExit()
        return (owner.token, renter.token, item, try #require(card.json["id"] as? String))
    }

    func bid(_ card: String) -> API.BidBody {
        API.BidBody(dailyPriceCents: 1400, from: dayFromToday(10), until: dayFromToday(12), payWith: .card, cardId: UUID(uuidString: card)!)
    }

    /// Sends to a server armed with `failpoint`, which must die before answering.
    func sendAndDie(_ database: PostgresConfiguration, _ failpoint: String, _ path: String, _ body: API.BidBody?, token: String, key: String)
        async throws
    {
        let armed = try await ServerProcess(database: database, environment: ["LENDER_FAILPOINTS": failpoint])
        await #expect(throws: (any Error).self) {
            if let body {
                _ = try await armed.send(.post, path, body: body, token: token, idempotencyKey: key)
            } else {
                _ = try await armed.send(.post, path, token: token, idempotencyKey: key)
            }
        }
        #expect(await armed.waitForExit() != nil, "the server died at \(failpoint)")
    }

    @Test func aBidKilledAfterTheAuthorisationIsHeldOnceOnRetryAndVoidedByReconciliationElse() async throws {
        try await withServerDatabase { database, admin in
            let (_, renter, item, card) = try await setUp(database)
            try await sendAndDie(database, "authorize.after", "/v1/items/\(item)/bids", bid(card), token: renter, key: "bid-1")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_authorizations") == 1, "authorised before the crash")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'BidPlaced'") == 0)

            // Retried with its key: the same authorisation, held once.
            let server = try await ServerProcess(database: database)
            defer { server.kill(SIGTERM) }
            let retry = try await server.send(.post, "/v1/items/\(item)/bids", body: bid(card), token: renter, idempotencyKey: "bid-1")
            #expect(retry.status == .created, "\(retry)")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_authorizations") == 1, "one authorisation")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'RentalHoldPlaced'") == 1)
            let held = try await admin.query(
                "SELECT data->'hold'->>'authorizationID' FROM events WHERE type = 'RentalHoldPlaced'"
            ).single().decode(0, as: String.self)
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_authorizations WHERE authorization_id = \(held)") == 1)

            // Another renter's bid killed there and never retried: the log lacks it, reconciliation voids it.
            let second = try await ServerProcess(database: database)
            let eve = try await second.user("eve")
            let eves = try await second.send(
                .post, "/v1/me/cards",
                body: API.CardBody(number: "4242424242424242", expMonth: 12, expYear: 2031, cvv: "123", holderName: "Eve"),
                token: eve.token)
            second.kill(SIGTERM)
            _ = await second.waitForExit()
            let evesCard = try #require(eves.json["id"] as? String)
            var late = bid(evesCard)
            late.from = dayFromToday(20)
            late.until = dayFromToday(21)
            try await sendAndDie(database, "authorize.after", "/v1/items/\(item)/bids", late, token: eve.token, key: "bid-2")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_authorizations WHERE voided_at IS NULL") == 2)
            let reconciled = try runLender(["payments", "reconcile", "--older-than", "0"], database: database)
            #expect(reconciled.contains("2 open authorisations checked, 1 not held by the log"), "\(reconciled)")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_authorizations WHERE voided_at IS NOT NULL") == 1)
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_authorizations WHERE authorization_id = \(held) AND voided_at IS NULL") == 1, "the held one stays")
            let again = try runLender(["payments", "reconcile", "--older-than", "0"], database: database)
            #expect(again.contains("1 open authorisations checked, 0 not held by the log"), "\(again)")
            #expect(try runLender(["audit", "money"], database: database).contains("Money adds up"))
        }
    }

    @Test func anApprovalKilledAfterTheCaptureIsCapturedOnceOnRetryAndRefundedByReconciliationElse() async throws {
        try await withServerDatabase { database, admin in
            let (owner, renter, item, card) = try await setUp(database)
            let server = try await ServerProcess(database: database)
            let placed = try await server.send(.post, "/v1/items/\(item)/bids", body: bid(card), token: renter)
            #expect(placed.status == .created, "\(placed)")
            let bidID = try #require(placed.json["id"] as? String)
            server.kill(SIGTERM)
            _ = await server.waitForExit()

            try await sendAndDie(database, "capture.after", "/v1/bids/\(bidID)/approve", nil, token: owner, key: "ap-1")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges") == 1, "captured before the crash")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'BookingConfirmed'") == 0)

            let retried = try await ServerProcess(database: database)
            defer { retried.kill(SIGTERM) }
            let approved = try await retried.send(.post, "/v1/bids/\(bidID)/approve", token: owner, idempotencyKey: "ap-1")
            #expect(approved.status == .ok, "\(approved)")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges") == 1, "one capture")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'RentalPaid'") == 1)
            let charge = try await admin.query("SELECT charge_id FROM sandbox_charges").single().decode(0, as: String.self)
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'RentalPaid' AND data->>'chargeID' = \(charge)") == 1)
            let reconciled = try runLender(["payments", "reconcile", "--older-than", "0"], database: database)
            #expect(reconciled.contains("1 unrefunded charges checked, 0 not in the log"), "\(reconciled)")
            #expect(try runLender(["audit", "money"], database: database).contains("Money adds up"))
        }
    }

    @Test func aCaptureWhoseApprovalNeverCameIsRefundedOnceByReconciliation() async throws {
        try await withServerDatabase { database, admin in
            let (owner, renter, item, card) = try await setUp(database)
            let server = try await ServerProcess(database: database)
            let bidID = try #require(
                try await server.send(.post, "/v1/items/\(item)/bids", body: bid(card), token: renter).json["id"] as? String)
            server.kill(SIGTERM)
            _ = await server.waitForExit()
            try await sendAndDie(database, "capture.after", "/v1/bids/\(bidID)/approve", nil, token: owner, key: "ap-2")

            // The renter withdraws meanwhile: the hold released, the void a no-op on a captured one.
            let after = try await ServerProcess(database: database)
            defer { after.kill(SIGTERM) }
            #expect(try await after.send(.post, "/v1/bids/\(bidID)/withdraw", token: renter).status == .ok)
            let first = try runLender(["payments", "reconcile", "--older-than", "0"], database: database)
            #expect(first.contains("1 unrefunded charges checked, 1 not in the log"), "\(first)")
            #expect(try await count(admin, "SELECT count(*) FROM sandbox_charges WHERE refunded_at IS NOT NULL") == 1)
            let second = try runLender(["payments", "reconcile", "--older-than", "0"], database: database)
            #expect(second.contains("0 unrefunded charges checked"), "\(second)")
            // The approval retried now: the bid is no longer pending.
            let late = try await after.send(.post, "/v1/bids/\(bidID)/approve", token: owner, idempotencyKey: "ap-2")
            #expect(late.code == "bid_not_pending", "\(late)")
            #expect(try runLender(["audit", "money"], database: database).contains("Money adds up"))
        }
    }
}
