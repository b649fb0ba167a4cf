import EventStore
import Foundation
import HTTPTypes
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import ServerTestSupport
import Testing
import TestSupport
import UseCases

/// Security deposits, claims, disputes and an operator's resolution (SPEC §12.5), over HTTP
/// on a clock the test moves.
@Suite("Deposits and disputes")
struct DisputesTests {
    /// A drill with a deposit of 5,000, booked by Rita for 5 to 7 December (1,400 a day: a
    /// charge of 4,410 and the deposit held, then captured), paid from her balance or a card.
    static func bookedDrill(_ client: any TestClientProtocol, card: Bool = false) async throws
        -> (owner: (id: UserID, token: String), renter: (id: UserID, token: String), item: ItemID, booking: String)
    {
        let owner = try await client.user("owner")
        let renter = try await client.user("rita")
        let posted = try await client.send(
            .post, "/v1/rentals",
            body: API.RentalBody(
                title: "Drill", category: .tools, dailyPriceCents: 1400, location: API.LocationInput(lat: 27.7, lng: 85.3),
                securityDepositCents: 5000), token: owner.token)
        #expect(posted.status == .created, "\(posted)")
        #expect(posted.json["securityDepositCents"] as? Int == 5000, "a renter sees it before bidding: \(posted)")
        let item = try posted.decode(ItemResource.self).id
        let read = try await client.send(.get, "/v1/items/\(item)", token: renter.token)
        #expect(read.json["securityDepositCents"] as? Int == 5000, "\(read)")
        var bid = API.BidBody(dailyPriceCents: 1400, from: "2026-12-05", until: "2026-12-07")
        if !card {
            try await client.fund(renter.token, 20_000)
            bid.payWith = .balance
        }
        let placed = try await client.send(.post, "/v1/items/\(item)/bids", body: bid, token: renter.token)
        let booking = try #require(placed.json["id"] as? String, "\(placed)")
        #expect((placed.json["payment"] as? [String: Any])?["depositCents"] as? Int == 5000, "the bid shows what it holds: \(placed)")
        if !card { #expect(try await client.send(.get, "/v1/me", token: renter.token).json["availableCents"] as? Int == 20_000 - 9_410) }
        let approved = try await client.send(.post, "/v1/bids/\(booking)/approve", token: owner.token)
        #expect(approved.status == .ok, "\(approved)")
        return (owner, renter, item, booking)
    }

    static func balance(_ client: any TestClientProtocol, _ token: String) async throws -> Int? {
        try await client.send(.get, "/v1/me", token: token).json["balanceCents"] as? Int
    }

    static func moneyAddsUp(_ admin: PostgresPool) async throws {
        let database = try await ownerURL(admin)
        let audit = try runLender(["audit", "money"], database: database)
        #expect(audit.contains("Money adds up"), "\(audit)")
        #expect(try runLender(["replay", "--verify"], database: database).contains("no differences"))
    }

    @Test func anOwnerClaimsPartOfTheDepositAndAnOperatorDividesIt() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let (owner, renter, _, booking) = try await Self.bookedDrill(client)
            let desk = try await client.user("desk")
            let claims = "/v1/bookings/\(booking)/claims"
            let claim = API.ClaimBody(amountCents: 2000, text: "The chuck came back cracked")

            clock.set("2026-12-07")
            let early = try await client.send(.post, claims, body: claim, token: owner.token)
            #expect(early.status == .conflict && early.code == "booking_not_ended", "\(early)")
            clock.set("2026-12-08")
            let uncompleted = try await client.send(.post, claims, body: claim, token: owner.token)
            #expect(uncompleted.status == .conflict && uncompleted.code == "booking_not_completed", "a claim is on the deposit alone: \(uncompleted)")
            let completed = try await client.send(.post, "/v1/bookings/\(booking)/complete", token: owner.token)
            #expect(completed.status == .ok && completed.json["depositStatus"] as? String == "held", "\(completed)")
            #expect(try await Self.balance(client, owner.token) == 3_780, "paid at completion; the deposit stays in escrow")

            let byRenter = try await client.send(.post, claims, body: claim, token: renter.token)
            #expect(byRenter.status == .forbidden && byRenter.code == "not_owner", "\(byRenter)")
            let tooMuch = try await client.send(.post, claims, body: API.ClaimBody(amountCents: 5001, text: "All"), token: owner.token)
            #expect(tooMuch.status == .unprocessableContent && tooMuch.fieldCodes["amountCents"] == "invalid_amount", "\(tooMuch)")
            let wordless = try await client.send(.post, claims, json: ["amountCents": 100], token: owner.token)
            #expect(wordless.status == .unprocessableContent && wordless.fieldCodes["text"] == "required", "\(wordless)")
            let claimed = try await client.send(.post, claims, body: claim, token: owner.token)
            #expect(claimed.status == .created, "\(claimed)")
            #expect((claimed.json["claim"] as? [String: Any])?["status"] as? String == "open", "\(claimed)")
            let twice = try await client.send(.post, claims, body: claim, token: owner.token)
            #expect(twice.status == .conflict && twice.code == "claim_exists", "\(twice)")

            // The renter disputes it within the window; the jobs past the window leave the deposit.
            clock.set("2026-12-09")
            let disputes = "/v1/bookings/\(booking)/disputes"
            let bad = try await client.send(.post, disputes, json: ["reason": "bored"], token: renter.token)
            #expect(bad.status == .unprocessableContent && bad.fieldCodes["reason"] == "invalid_reason", "\(bad)")
            let disputed = try await client.send(
                .post, disputes, body: API.DisputeBody(reason: .damaged, text: "It was cracked when I got it"), token: renter.token)
            #expect(disputed.status == .created, "\(disputed)")
            let again = try await client.send(.post, disputes, body: API.DisputeBody(reason: .other), token: owner.token)
            #expect(again.status == .conflict && again.code == "dispute_exists", "\(again)")
            #expect(try await runJobs(admin, on: "2026-12-12").items == 0, "a claimed, disputed deposit waits")

            let resolve = "/v1/admin/bookings/\(booking)/resolve"
            let division = API.ResolutionBody(renterCents: 3000, ownerCents: 2000, reason: "Half the chuck's price")
            let stranger = try await client.send(.post, resolve, body: division, token: renter.token)
            #expect(stranger.status == .forbidden && stranger.code == "not_operator", "\(stranger)")
            _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
            let uneven = try await client.send(
                .post, resolve, body: API.ResolutionBody(renterCents: 3000, ownerCents: 2001, reason: "x"), token: desk.token)
            #expect(uneven.status == .unprocessableContent && uneven.fieldCodes["renterCents"] == "amounts_do_not_add_up", "\(uneven)")
            let negative = try await client.send(
                .post, resolve, body: API.ResolutionBody(renterCents: 6000, ownerCents: -1000, reason: "x"), token: desk.token)
            #expect(negative.status == .unprocessableContent, "\(negative)")
            let huge = try await client.send(
                .post, resolve, raw: #"{"renterCents": 9223372036854775807, "ownerCents": 1, "reason": "x"}"#, token: desk.token)
            #expect(huge.status == .unprocessableContent, "amounts that would overflow are refused, not a crash: \(huge)")
            // Eight at once: one divides the money, the others find nothing left to resolve.
            let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await client.send(
                            .post, resolve, body: API.ResolutionBody(renterCents: 3000, ownerCents: 2000, reason: "Half the chuck's price"),
                            token: desk.token)
                    }
                }
                return try await group.reduce(into: [Reply]()) { $0.append($1) }
            }
            #expect(replies.filter { $0.status == .ok }.count == 1, "\(replies.map(\.status))")
            #expect(replies.allSatisfy { $0.status == .ok || $0.code == "nothing_to_resolve" }, "\(replies.map(\.code))")
            let resolved = try #require(replies.first { $0.status == .ok })
            #expect(resolved.json["depositStatus"] as? String == "divided")
            let dispute = resolved.json["dispute"] as? [String: Any]
            #expect(dispute?["status"] as? String == "resolved" && dispute?["renterCents"] as? Int == 3000, "\(resolved)")
            let done = try await client.send(.post, resolve, body: division, token: desk.token)
            #expect(done.status == .conflict && done.code == "nothing_to_resolve", "\(done)")

            #expect(try await Self.balance(client, renter.token) == 20_000 - 9_410 + 3_000)
            #expect(try await Self.balance(client, owner.token) == 3_780 + 2_000)
            for token in [renter.token, owner.token] {
                let feed = try await client.send(.get, "/v1/me/feed", token: token).json["data"] as? [[String: Any]] ?? []
                #expect(feed.contains { $0["kind"] as? String == "dispute_resolved" }, "\(feed)")
            }
            let act = try await admin.query(
                "SELECT metadata->>'actorID' AS actor FROM events WHERE type = 'DisputeResolved'"
            ).single().decode("actor", as: String.self)
            #expect(act == desk.id.description)
            try await Self.moneyAddsUp(admin)
        }
    }

    @Test func anUnclaimedDepositGoesBackToTheCardSeventyTwoHoursAfterTheLastDay() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let (owner, _, _, booking) = try await Self.bookedDrill(client, card: true)
            clock.set("2026-12-08")
            #expect(try await runJobs(admin, on: "2026-12-08").bookingsCompleted == 1)
            #expect(try await runJobs(admin, on: "2026-12-10").items == 0, "the window is still open")
            #expect(try await runJobs(admin, on: "2026-12-11").items == 1)
            let read = try await client.send(.get, "/v1/bookings/\(booking)", token: owner.token)
            #expect(read.json["depositStatus"] as? String == "released" && read.json["depositCents"] as? Int == 5000, "\(read)")
            clock.set("2026-12-11")
            let late = try await client.send(
                .post, "/v1/bookings/\(booking)/claims", body: API.ClaimBody(amountCents: 100, text: "Late"), token: owner.token)
            #expect(late.status == .conflict && late.code == "claim_window_closed", "\(late)")
            let lateDispute = try await client.send(
                .post, "/v1/bookings/\(booking)/disputes", body: API.DisputeBody(reason: .other), token: owner.token)
            #expect(lateDispute.status == .conflict && lateDispute.code == "dispute_window_closed", "\(lateDispute)")
            // The card's capture was refunded the deposit at the processor: the audit asks it.
            try await Self.moneyAddsUp(admin)
            let refunded = try await admin.query("SELECT coalesce(sum(amount_cents), 0)::int8 AS cents FROM sandbox_refunds")
                .single().decode("cents", as: Int.self)
            #expect(refunded == 5000)
        }
    }

    @Test func aDisputeUnderWayFreezesTheBookingUntilAnOperatorSettlesIt() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let (owner, renter, _, booking) = try await Self.bookedDrill(client)
            let desk = try await client.user("desk")
            _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
            let disputes = "/v1/bookings/\(booking)/disputes"
            clock.set("2026-12-04")
            let early = try await client.send(.post, disputes, body: API.DisputeBody(reason: .noShow), token: renter.token)
            #expect(early.status == .conflict && early.code == "dispute_window_closed", "\(early)")
            let nobody = try await client.send(.post, disputes, body: API.DisputeBody(reason: .noShow), token: desk.token)
            #expect(nobody.status == .notFound, "a stranger learns nothing of it: \(nobody)")
            clock.set("2026-12-05")
            let opened = try await client.send(
                .post, disputes, body: API.DisputeBody(reason: .noShow, text: "Nobody home"), token: renter.token)
            #expect(opened.status == .created, "\(opened)")
            let ownersFeed = try await client.send(.get, "/v1/me/feed", token: owner.token).json["data"] as? [[String: Any]] ?? []
            #expect(ownersFeed.contains { $0["kind"] as? String == "booking_disputed" }, "\(ownersFeed)")

            // Frozen: the jobs leave it, its owner cannot complete it.
            clock.set("2026-12-08")
            #expect(try await runJobs(admin, on: "2026-12-08").bookingsCompleted == 0)
            let complete = try await client.send(.post, "/v1/bookings/\(booking)/complete", token: owner.token)
            #expect(complete.status == .conflict && complete.code == "booking_disputed", "\(complete)")

            // The operator divides all it holds (4,410 and the deposit): the booking ends with it.
            let resolve = "/v1/admin/bookings/\(booking)/resolve"
            let short = try await client.send(
                .post, resolve, body: API.ResolutionBody(renterCents: 5000, ownerCents: 4409, reason: "x"), token: desk.token)
            #expect(short.status == .unprocessableContent && short.fieldCodes["renterCents"] == "amounts_do_not_add_up", "\(short)")
            let resolved = try await client.send(
                .post, resolve, body: API.ResolutionBody(renterCents: 9410, ownerCents: 0, reason: "The owner never came"),
                token: desk.token)
            #expect(resolved.status == .ok && resolved.json["status"] as? String == "completed", "\(resolved)")
            #expect(try await Self.balance(client, renter.token) == 20_000)
            #expect(try await Self.balance(client, owner.token) == 0)
            #expect(try await runJobs(admin, on: "2026-12-20").bookingsCompleted == 0, "a resolved booking is not completed again")
            #expect(try await Self.balance(client, owner.token) == 0, "nothing paid again by the jobs")
            try await Self.moneyAddsUp(admin)
        }
    }

    @Test func aDisputeAndTheJobsCompletionAtOnceNeverBothHoldTheMoney() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let (_, renter, _, booking) = try await Self.bookedDrill(client)
            clock.set("2026-12-08")
            async let disputed = client.send(
                .post, "/v1/bookings/\(booking)/disputes", body: API.DisputeBody(reason: .damaged), token: renter.token)
            async let jobs = runJobs(admin, on: "2026-12-08")
            let (reply, _) = try await (disputed, jobs)
            #expect(reply.status == .created, "the dispute is taken either way, before the completion or on the deposit after it")
            let order = try await admin.query(
                "SELECT type FROM events WHERE type IN ('DisputeOpened', 'BookingCompleted') ORDER BY position"
            ).map { try $0.decode("type", as: String.self) }
            // Either the completion came first (the dispute then holds the deposit), or the
            // dispute did and the booking waits: never a completion after the dispute.
            #expect(order == ["BookingCompleted", "DisputeOpened"] || order == ["DisputeOpened"], "\(order)")
            try await Self.moneyAddsUp(admin)
        }
    }

    @Test func anOperatorCancelsABookingToComeAndTheDepositGoesBackWithTheCharge() async throws {
        try await withServer { client, admin in
            let (owner, renter, _, booking) = try await Self.bookedDrill(client)
            let desk = try await client.user("desk")
            let cancel = "/v1/admin/bookings/\(booking)/cancel"
            let refused = try await client.send(.post, cancel, body: API.ReasonBody(reason: "Stolen drill"), token: owner.token)
            #expect(refused.status == .forbidden && refused.code == "not_operator", "\(refused)")
            _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
            let reasonless = try await client.send(.post, cancel, json: [:], token: desk.token)
            #expect(reasonless.status == .unprocessableContent && reasonless.fieldCodes["reason"] == "reason_required", "\(reasonless)")
            let cancelled = try await client.send(.post, cancel, body: API.ReasonBody(reason: "Stolen drill"), token: desk.token)
            #expect(cancelled.status == .ok, "\(cancelled)")
            #expect(cancelled.json["status"] as? String == "cancelled" && cancelled.json["cancelledBy"] as? String == desk.id.description)
            #expect(cancelled.json["refundCents"] as? Int == 9_410, "the charge and the deposit, all of it: \(cancelled)")
            #expect(try await Self.balance(client, renter.token) == 20_000)
            try await Self.moneyAddsUp(admin)
        }
    }

    @Test func aDepositIsFromNothingToOneThousandUnits() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            for deposit in [-1, 100_001] {
                let posted = try await client.send(
                    .post, "/v1/rentals",
                    body: API.RentalBody(
                        title: "Drill", category: .tools, dailyPriceCents: 1400, location: API.LocationInput(lat: 27.7, lng: 85.3),
                        securityDepositCents: deposit), token: owner.token)
                #expect(posted.status == .unprocessableContent && posted.fieldCodes["securityDepositCents"] == "invalid_deposit", "\(posted)")
            }
        }
    }

    /// A card's booking: the renter's strict-policy cancellation keeps the whole charge but
    /// gives the deposit back whole; another's dispute divided by an operator refunds the card
    /// its share; reconciliation then finds nothing to make again.
    @Test func aCardsDepositComesBackWholeOnCancellationAndByShareOnResolution() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            let rita = try await client.user("rita")
            let desk = try await client.user("desk")
            let database = try await ownerURL(admin)
            _ = try runLender(["users", "grant-operator", "desk"], database: database)
            let posted = try await client.send(
                .post, "/v1/rentals",
                body: API.RentalBody(
                    title: "Kayak", category: .sports, dailyPriceCents: 1000, location: API.LocationInput(lat: 27.7, lng: 85.3),
                    cancellationPolicy: .strict, securityDepositCents: 3000), token: owner.token)
            let item = try posted.decode(ItemResource.self).id
            var bookings = [String]()
            for (from, until) in [("2026-12-02", "2026-12-03"), ("2026-12-10", "2026-12-11")] {
                let placed = try await client.send(
                    .post, "/v1/items/\(item)/bids", body: API.BidBody(dailyPriceCents: 1000, from: from, until: until), token: rita.token)
                let id = try #require(placed.json["id"] as? String, "\(placed)")
                #expect(try await client.send(.post, "/v1/bids/\(id)/approve", token: owner.token).status == .ok)
                bookings.append(id)
            }
            // Strict, four days before: nothing of the charge back, but all of the deposit.
            let cancelled = try await client.send(.post, "/v1/bookings/\(bookings[0])/cancel", token: rita.token)
            #expect(cancelled.json["refundCents"] as? Int == 3_000, "\(cancelled)")

            clock.set("2026-12-11")
            let disputed = try await client.send(
                .post, "/v1/bookings/\(bookings[1])/disputes", body: API.DisputeBody(reason: .notAsDescribed, text: "Leaks"),
                token: rita.token)
            #expect(disputed.status == .created, "\(disputed)")
            let resolved = try await client.send(
                .post, "/v1/admin/bookings/\(bookings[1])/resolve",
                body: API.ResolutionBody(renterCents: 2_100 + 3_000 - 500, ownerCents: 500, reason: "It leaked on day two"),
                token: desk.token)
            #expect(resolved.status == .ok, "\(resolved)")
            let refunded = try await admin.query("SELECT coalesce(sum(amount_cents), 0)::int8 AS cents FROM sandbox_refunds")
                .single().decode("cents", as: Int.self)
            #expect(refunded == 3_000 + 4_600, "both refunds made at the card's processor")
            #expect(try runLender(["payments", "reconcile"], database: database).contains("0 not yet made at the processor"))
            try await Self.moneyAddsUp(admin)
        }
    }
}
