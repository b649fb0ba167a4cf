import Aggregates
import Foundation
import HTTPTypes
import Marketplace
import Postgres
import Projections
import ServerTestSupport
import Testing
import TestSupport
import UseCases

/// Reports and the operators who resolve them (SPEC §12.5).
@Suite("Reports")
struct ReportsTests {
    static func report(
        _ type: API.ReportBody.SubjectTypePayload, _ id: UUID, reason: API.ReportBody.ReasonPayload = .scam, text: String? = nil
    ) -> API.ReportBody {
        API.ReportBody(subjectType: type, subjectId: id, reason: reason, text: text)
    }

    @Test func aRenterReportsAListingAndAnOperatorResolvesItOnTheLog() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let renter = try await client.user("renter")
            let stranger = try await client.user("stranger")
            let desk = try await client.user("desk")
            let item = try await client.postRental(owner.token).id

            let filed = try await client.send(
                .post, "/v1/reports", body: Self.report(.item, item.rawValue, text: "Asked me to pay outside the app"), token: renter.token)
            #expect(filed.status == .created, "\(filed)")
            let report = try filed.decode(ReportResource.self)
            #expect(report.status == "open" && report.subjectType == "item" && report.subjectId == item.rawValue)
            #expect(report.reporterId == renter.id && report.text == "Asked me to pay outside the app")
            // Theirs to see; nobody else's.
            let mine = try await client.send(.get, "/v1/me/reports", token: renter.token).decode(Page<ReportResource>.self)
            #expect(mine.data.map(\.id) == [report.id])
            #expect(try await client.send(.get, "/v1/me/reports", token: stranger.token).decode(Page<ReportResource>.self).data.isEmpty)

            // Once while it is open; a subject that is not there; words that are not reasons.
            let again = try await client.send(.post, "/v1/reports", body: Self.report(.item, item.rawValue), token: renter.token)
            #expect(again.status == .conflict && again.code == "already_reported", "\(again)")
            let nothing = try await client.send(.post, "/v1/reports", body: Self.report(.loan, UUID()), token: renter.token)
            #expect(nothing.status == .notFound && nothing.code == "subject_not_found", "\(nothing)")
            let bad = try await client.send(
                .post, "/v1/reports", json: ["subjectType": "bid", "subjectId": "nope", "reason": "boring"], token: renter.token)
            #expect(bad.status == .unprocessableContent, "\(bad)")
            #expect(bad.fieldCodes["subjectType"] == "invalid_subject_type" && bad.fieldCodes["reason"] == "invalid_reason")
            #expect(bad.fieldCodes["subjectId"] == "invalid_id")

            // Only an operator reads the desk's list and resolves.
            let refused = try await client.send(.get, "/v1/admin/reports", token: desk.token)
            #expect(refused.status == .forbidden && refused.code == "not_operator", "\(refused)")
            let early = try await client.send(
                .post, "/v1/admin/reports/\(report.id)/resolve", body: API.ResolveReportBody(action: .takenDown, reason: "scam"),
                token: desk.token)
            #expect(early.status == .forbidden && early.code == "not_operator", "\(early)")
            #expect(try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin)).contains("desk is an operator"))

            let open = try await client.send(.get, "/v1/admin/reports?status=open", token: desk.token).decode(Page<ReportResource>.self)
            #expect(open.data.map(\.id) == [report.id])
            let reasonless = try await client.send(
                .post, "/v1/admin/reports/\(report.id)/resolve", body: API.ResolveReportBody(action: .takenDown, reason: "  "),
                token: desk.token)
            #expect(reasonless.status == .unprocessableContent && reasonless.fieldCodes["reason"] == "reason_required", "\(reasonless)")
            let absent = try await client.send(.post, "/v1/admin/reports/\(report.id)/resolve", json: ["action": "none"], token: desk.token)
            #expect(absent.status == .unprocessableContent && absent.fieldCodes["reason"] == "reason_required", "\(absent)")
            let unknown = try await client.send(
                .post, "/v1/admin/reports/\(UUID())/resolve", body: API.ResolveReportBody(action: .none, reason: "x"), token: desk.token)
            #expect(unknown.status == .notFound && unknown.code == "report_not_found", "\(unknown)")

            let resolved = try await client.send(
                .post, "/v1/admin/reports/\(report.id)/resolve",
                body: API.ResolveReportBody(action: .warned, reason: "Told the owner the rules"),
                token: desk.token)
            #expect(resolved.status == .ok, "\(resolved)")
            let done = try resolved.decode(ReportResource.self)
            #expect(done.status == "resolved" && done.action == "warned" && done.resolvedBy == desk.id)
            #expect(done.resolution == "Told the owner the rules")
            let twice = try await client.send(
                .post, "/v1/admin/reports/\(report.id)/resolve", body: API.ResolveReportBody(action: .none, reason: "again"),
                token: desk.token)
            #expect(twice.status == .conflict && twice.code == "report_resolved", "\(twice)")
            // The log says who did it.
            let actor = try await admin.query(
                "SELECT metadata->>'actorID' AS actor FROM events WHERE stream_id = \("report-\(report.id)") AND type = 'ReportResolved'"
            ).single().decode("actor", as: String.self)
            #expect(actor == desk.id.description)
            // The reporter sees what became of it, and may report again.
            let seen = try await client.send(.get, "/v1/me/reports", token: renter.token).decode(Page<ReportResource>.self)
            #expect(seen.data.first?.status == "resolved" && seen.data.first?.action == "warned")
            #expect(seen.data.first?.resolvedBy == nil && seen.data.first?.resolution == nil, "not which operator, nor their notes")
            #expect(
                try await client.send(.post, "/v1/reports", body: Self.report(.item, item.rawValue), token: renter.token).status
                    == .created)
            #expect(try await client.send(.get, "/v1/admin/reports?status=closed", token: desk.token).status == .unprocessableContent)

            // A forgotten reporter's words go with them; the report stays for the desk.
            #expect(
                try await client.send(.delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: renter.token)
                    .status == .noContent)
            let texts = try await admin.query("SELECT text FROM reports_view WHERE reporter_id = \(renter.id.rawValue) AND text IS NOT NULL")
                .map { try $0.decode("text", as: String.self) }
            #expect(texts == [Redacted.text])
            let log = try await admin.query("SELECT string_agg(data::text, ' ') AS t FROM events WHERE type = 'ReportFiled'").single()
                .decode("t", as: String.self)
            #expect(!log.contains("pay outside"), "sealed with the reporter's key")
            #expect(try runLender(["replay", "--verify"], database: try await ownerURL(admin)).contains("no differences"))
        }
    }

    @Test func messagesAndReviewsAreReportedOnlyByWhoCanSeeThem() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            let renter = try await client.user("renter")
            let stranger = try await client.user("stranger")
            let deal = try await client.completedDeal(owner: owner.token, bidder: renter.token, clock: clock)
            let sent = try await client.send(
                .post, "/v1/bids/\(deal.bid)/messages", body: API.MessageBody(text: "You idiot"), token: renter.token)
            #expect(sent.status == .created, "\(sent)")
            let message = try #require(sent.json["id"] as? String)
            let outsider = try await client.send(
                .post, "/v1/reports", body: Self.report(.message, UUID(uuidString: message)!, reason: .offensive), token: stranger.token)
            #expect(outsider.status == .notFound && outsider.code == "subject_not_found", "\(outsider)")
            let recipient = try await client.send(
                .post, "/v1/reports", body: Self.report(.message, UUID(uuidString: message)!, reason: .offensive), token: owner.token)
            #expect(recipient.status == .created, "\(recipient)")
            // An operator hides it: both its people read that it was hidden, not what it said.
            let hide = "/v1/admin/messages/\(message)/hide"
            #expect(try await client.send(.post, hide, body: API.ReasonBody(reason: "Abuse"), token: owner.token).code == "not_operator")
            let desk = try await client.user("desk")
            _ = try await admin.query("INSERT INTO operators (user_id) VALUES (\(desk.id.rawValue))")
            let hidden = try await client.send(.post, hide, body: API.ReasonBody(reason: "Abuse"), token: desk.token)
            #expect(hidden.status == .ok && hidden.json["text"] as? String == MessageHidden.hiddenText, "\(hidden)")
            let thread = try await client.send(.get, "/v1/bids/\(deal.bid)/messages", token: owner.token).json["data"] as? [[String: Any]]
            #expect(thread?.first { $0["id"] as? String == message }?["text"] as? String == MessageHidden.hiddenText, "\(thread ?? [])")
            let twice = try await client.send(.post, hide, body: API.ReasonBody(reason: "Abuse"), token: desk.token)
            #expect(twice.status == .conflict && twice.code == "message_hidden", "\(twice)")
            let nothing = try await client.send(
                .post, "/v1/admin/messages/\(UUID())/hide", body: API.ReasonBody(reason: "x"), token: desk.token)
            #expect(nothing.status == .notFound && nothing.code == "message_not_found", "\(nothing)")
            #expect(try runLender(["replay", "--verify"], database: try await ownerURL(admin)).contains("no differences"))

            let reviewed = try await client.send(
                .post, "/v1/items/\(deal.item)/reviews", body: API.ReviewBody(stars: 1, text: "Never again"), token: renter.token)
            #expect(reviewed.status == .created, "\(reviewed)")
            let reviews = try await client.send(.get, "/v1/users/\(owner.id)/reviews", token: stranger.token)
            let review = try #require((reviews.json["data"] as? [[String: Any]])?.first?["id"] as? String, "\(reviews)")
            let fake = try await client.send(
                .post, "/v1/reports", body: Self.report(.review, UUID(uuidString: review)!, reason: .fakeReview), token: stranger.token)
            #expect(fake.status == .created, "\(fake)")
            // The operator hides it: out of the owner's reviews and rating.
            let rated = try await client.send(.get, "/v1/users/\(owner.id)", token: stranger.token).json
            let hideReview = "/v1/admin/reviews/\(review)/hide"
            #expect(
                try await client.send(.post, hideReview, body: API.ReasonBody(reason: "Fake"), token: stranger.token).code
                    == "not_operator")
            #expect(try await client.send(.post, hideReview, body: API.ReasonBody(reason: "Fake"), token: desk.token).status == .noContent)
            let after = try await client.send(.get, "/v1/users/\(owner.id)/reviews", token: stranger.token)
            #expect((after.json["data"] as? [[String: Any]])?.isEmpty == true, "\(after)")
            let unrated = try await client.send(.get, "/v1/users/\(owner.id)", token: stranger.token).json
            #expect((unrated["reviewCount"] as? Int) == ((rated["reviewCount"] as? Int) ?? 0) - 1, "\(rated) then \(unrated)")
            let hiddenTwice = try await client.send(.post, hideReview, body: API.ReasonBody(reason: "Fake"), token: desk.token)
            #expect(hiddenTwice.status == .conflict && hiddenTwice.code == "review_hidden", "\(hiddenTwice)")
            #expect(
                try await client.send(.post, "/v1/admin/reviews/\(UUID())/hide", body: API.ReasonBody(reason: "x"), token: desk.token).code
                    == "review_not_found")
            #expect(try runLender(["replay", "--verify"], database: try await ownerURL(admin)).contains("no differences"))
            #expect(
                try await client.send(.post, "/v1/reports", body: Self.report(.user, renter.id.rawValue), token: owner.token).status
                    == .created)
        }
    }

    @Test func twentyADayAndOneOfTwoAtOnce() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let reporter = try await client.user("reporter")
            let item = try await client.postRental(owner.token).id
            // Two at once on one subject: one is filed.
            let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        try await client.send(.post, "/v1/reports", body: Self.report(.item, item.rawValue), token: reporter.token)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(replies.map(\.status.code).sorted() == [201, 409], "\(replies)")
            // Nineteen more today, as if filed: the next is refused.
            _ = try await admin.query(
                """
                INSERT INTO reports_view (report_id, reporter_id, subject_type, subject_id, reason, status, created_at, filed_position, position)
                SELECT gen_random_uuid(), \(reporter.id.rawValue), 'user', gen_random_uuid(), 'spam', 'open', now(), 0, 0
                FROM generate_series(1, 19)
                """)
            let tooMany = try await client.send(.post, "/v1/reports", body: Self.report(.user, owner.id.rawValue), token: reporter.token)
            #expect(tooMany.status == .tooManyRequests && tooMany.code == "too_many_reports", "\(tooMany)")
        }
    }

    /// Issue 53's story: a renter reports a listing, an operator takes it down with a reason,
    /// and the log shows who did it; the money of its bids and bookings goes back.
    @Test func anOperatorTakesAReportedListingDownAndTheMoneyGoesBack() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let renter = try await client.user("renter")
            let bidder = try await client.user("bidder")
            let desk = try await client.user("desk")
            let item = try await client.postRental(owner.token).id
            // A booking to come (the renter's, approved) and a bid pending (another's).
            let booked = try await client.bid(item, renter.token)
            let booking = try #require(booked.json["id"] as? String, "\(booked)")
            #expect(try await client.send(.post, "/v1/bids/\(booking)/approve", token: owner.token).status == .ok)
            let pending = try await client.send(
                .post, "/v1/items/\(item)/bids", body: API.BidBody(dailyPriceCents: 1400, from: "2026-12-10", until: "2026-12-12"),
                token: bidder.token)
            let pendingID = try #require(pending.json["id"] as? String, "\(pending)")
            let report = try await client.send(.post, "/v1/reports", body: Self.report(.item, item.rawValue), token: renter.token)
                .decode(ReportResource.self)

            let path = "/v1/admin/items/\(item)/takedown"
            let refused = try await client.send(.post, path, body: API.ReasonBody(reason: "Scam"), token: owner.token)
            #expect(refused.status == .forbidden && refused.code == "not_operator", "\(refused)")
            _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
            let reasonless = try await client.send(.post, path, json: [:], token: desk.token)
            #expect(reasonless.status == .unprocessableContent && reasonless.fieldCodes["reason"] == "reason_required", "\(reasonless)")
            let missing = try await client.send(
                .post, "/v1/admin/items/\(UUID())/takedown", body: API.ReasonBody(reason: "x"), token: desk.token)
            #expect(missing.status == .notFound, "\(missing)")

            let taken = try await client.send(
                .post, path, body: API.ReasonBody(reason: "Asks for payment outside the app"), token: desk.token)
            #expect(taken.status == .ok, "\(taken)")
            #expect(try taken.decode(ItemResource.self).status == "taken_down")
            let again = try await client.send(.post, path, body: API.ReasonBody(reason: "Twice"), token: desk.token)
            #expect(again.status == .conflict && again.code == "item_taken_down", "\(again)")

            // Out of the market; the bid rejected with why; the booking cancelled as by the owner.
            let market = try await client.send(.get, "/v1/market", token: bidder.token).json["data"] as? [[String: Any]]
            #expect(market?.contains { $0["id"] as? String == item.description } == false, "\(market ?? [])")
            let bids = try await client.send(.get, "/v1/items/\(item)/bids", token: owner.token).json["data"] as? [[String: Any]]
            let rejected = bids?.first { $0["id"] as? String == pendingID }
            #expect(rejected?["status"] as? String == "rejected" && rejected?["reason"] as? String == "item_taken_down", "\(bids ?? [])")
            let cancelled = try await client.send(.get, "/v1/bookings/\(booking)", token: renter.token).json
            // Refunded by the owner's rule, in the operator's name (not an owner's cancellation).
            #expect(cancelled["status"] as? String == "cancelled" && cancelled["cancelledBy"] as? String == desk.id.description, "\(cancelled)")
            // No one but its owner reads it; its owner changes nothing of it.
            #expect(try await client.send(.get, "/v1/items/\(item)", token: bidder.token).status == .notFound)
            #expect(try await client.send(.get, "/v1/items/\(item)", token: owner.token).status == .ok)
            let revised = try await client.send(
                .patch, "/v1/items/\(item)", body: API.RevisionBody(title: "Still here"), token: owner.token)
            #expect(revised.status == .conflict && revised.code == "item_taken_down", "\(revised)")
            // The log says who: the operator, with the reason.
            let act = try await admin.query(
                """
                SELECT metadata->>'actorID' AS actor, data->>'reason' AS reason FROM events
                WHERE stream_id = \("item-\(item)") AND type = 'ItemTakenDown'
                """
            ).single()
            #expect(try act.decode("actor", as: String.self) == desk.id.description)
            #expect(try act.decode("reason", as: String.self) == "Asks for payment outside the app")
            let resolved = try await client.send(
                .post, "/v1/admin/reports/\(report.id)/resolve", body: API.ResolveReportBody(action: .takenDown, reason: "Taken down"),
                token: desk.token)
            #expect(resolved.status == .ok, "\(resolved)")
            // Every hold released, the booking refunded: the money adds up, and a replay agrees.
            let database = try await ownerURL(admin)
            let table = try runLender(["audit", "bids", "--item", item.description], database: database)
            let acts = table.components(separatedBy: "operator acts:").last ?? ""
            #expect(acts.contains("ItemTakenDown") && acts.contains(desk.id.description), "\(table)")
            #expect(acts.contains("BookingCancelled") && acts.contains(booking), "the cancellation in the operator's name: \(table)")
            #expect(try runLender(["audit", "money"], database: database).contains("Money adds up"))
            #expect(try runLender(["replay", "--verify"], database: database).contains("no differences"))
        }
    }

    @Test func anOperatorTakesAFundraisingLoanDownAndItsLendersAreRefunded() async throws {
        try await withServer { client, admin in
            let borrower = try await client.user("borrower")
            let lender = try await client.user("lender")
            let desk = try await client.user("desk")
            let loan = try await client.postLoan(borrower.token)
            try await client.fund(lender.token, 5_000)
            #expect(try await client.addToCart(lender.token, loan, 5_000).status == .created)
            #expect(
                try await client.send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: lender.token).status
                    == .ok)
            let funded = try await client.fundedLoan(borrower: borrower.token, lenders: 1, amount: 2_500).loan

            let path = "/v1/admin/loans/\(loan)/takedown"
            let refused = try await client.send(.post, path, body: API.ReasonBody(reason: "Fake"), token: borrower.token)
            #expect(refused.status == .forbidden && refused.code == "not_operator", "\(refused)")
            let database = try await ownerURL(admin)
            _ = try runLender(["users", "grant-operator", "desk"], database: database)
            let reasonless = try await client.send(.post, path, body: API.ReasonBody(reason: "  "), token: desk.token)
            #expect(reasonless.status == .unprocessableContent && reasonless.fieldCodes["reason"] == "reason_required", "\(reasonless)")
            let missing = try await client.send(
                .post, "/v1/admin/loans/\(UUID())/takedown", body: API.ReasonBody(reason: "x"), token: desk.token)
            #expect(missing.status == .notFound, "\(missing)")
            let late = try await client.send(
                .post, "/v1/admin/loans/\(funded)/takedown", body: API.ReasonBody(reason: "x"), token: desk.token)
            #expect(late.status == .conflict && late.code == "loan_not_fundraising", "a funded loan's money is its borrower's: \(late)")

            let taken = try await client.send(
                .post, path, body: API.ReasonBody(reason: "A business that does not exist"), token: desk.token)
            #expect(taken.status == .ok && taken.json["status"] as? String == "taken_down", "\(taken)")
            let again = try await client.send(.post, path, body: API.ReasonBody(reason: "Twice"), token: desk.token)
            #expect(again.status == .conflict && again.code == "loan_not_fundraising", "\(again)")
            // Its lender has their money back; it is in no list; nobody can lend to it.
            #expect(try await client.send(.get, "/v1/me", token: lender.token).json["availableCents"] as? Int == 5_000)
            let listed = try await client.send(.get, "/v1/loans", token: lender.token).json["data"] as? [[String: Any]] ?? []
            #expect(!listed.contains { $0["id"] as? String == loan.description }, "\(listed)")
            let filtered = try await client.send(.get, "/v1/loans?status=taken_down", token: lender.token)
            #expect(filtered.status == .unprocessableContent, "\(filtered)")
            #expect(try await client.addToCart(lender.token, loan, 2_500).status == .conflict)
            let act = try await admin.query(
                "SELECT metadata->>'actorID' AS actor FROM events WHERE stream_id = \("loan-\(loan)") AND type = 'LoanTakenDown'"
            ).single()
            #expect(try act.decode("actor", as: String.self) == desk.id.description)
            #expect(try runLender(["audit", "money"], database: database).contains("Money adds up"))
            #expect(try runLender(["replay", "--verify"], database: database).contains("no differences"))
        }
    }

    /// Anyone but an operator, on every operator route of the document: 403, nothing written.
    @Test func everyAdminRouteIsForOperatorsOnly() async throws {
        try await withServer { client, admin in
            let user = try await client.user("user")
            let paths = OpenAPITests.repositoryDocument["paths"] as? [String: [String: Any]] ?? [:]
            let before = try await eventCount(admin)
            var checked = 0
            for (path, operations) in paths where path.hasPrefix("/v1/admin/") {
                let filled = path.split(separator: "/").map { $0.hasPrefix("{") ? UUID().uuidString.lowercased() : String($0) }
                    .joined(separator: "/")
                for method in operations.keys {
                    let verb: HTTPRequest.Method = method == "get" ? .get : method == "delete" ? .delete : .post
                    let body: [String: Any]? =
                        verb != .post ? nil : ["reason": "x", "action": "none", "renterCents": 0, "ownerCents": 0]
                    let reply = try await client.send(verb, "/" + filled, json: body, token: user.token)
                    #expect(reply.status == .forbidden && reply.code == "not_operator", "\(method) \(path): \(reply)")
                    checked += 1
                }
            }
            #expect(checked >= 10, "\(checked) routes")
            // Nor does a key or a broken body get a stranger anything but the 403.
            let keyed = try await client.send(
                .post, "/v1/admin/items/\(UUID())/takedown", raw: "{", token: user.token, idempotencyKey: "k")
            #expect(keyed.status == .forbidden && keyed.code == "not_operator", "\(keyed)")
            #expect(try await eventCount(admin) == before)
        }
    }

    /// An approval and a takedown of the same rental at once: one stream, one winner. Either
    /// way no booking is left on the taken-down item and no hold is left held.
    @Test func aTakedownRacingAnApprovalLeavesNoBookingAndNoHold() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let renter = try await client.user("renter")
            let desk = try await client.user("desk")
            let database = try await ownerURL(admin)
            _ = try runLender(["users", "grant-operator", "desk"], database: database)
            try await client.fund(renter.token, 10_000)
            for round in 0..<3 {
                let item = try await client.postRental(owner.token, title: "Drill \(round)").id
                let bid = try await client.send(
                    .post, "/v1/items/\(item)/bids",
                    body: API.BidBody(dailyPriceCents: 1400, from: "2026-12-05", until: "2026-12-07", payWith: .balance),
                    token: renter.token)
                let bidID = try #require(bid.json["id"] as? String, "\(bid)")
                async let approval = client.send(.post, "/v1/bids/\(bidID)/approve", token: owner.token)
                async let takedown = client.send(
                    .post, "/v1/admin/items/\(item)/takedown", body: API.ReasonBody(reason: "Scam"), token: desk.token)
                let (approved, taken) = try await (approval, takedown)
                #expect(taken.status == .ok, "\(taken)")
                #expect([.ok, .conflict].contains(approved.status), "\(approved)")
                let live = try await count(
                    admin, "SELECT count(*) FROM bookings_view WHERE item_id = \(item.rawValue) AND status <> 'cancelled'")
                #expect(live == 0, "no booking on a taken-down item")
            }
            #expect(try await client.send(.get, "/v1/me", token: renter.token).json["availableCents"] as? Int == 10_000)
            #expect(try runLender(["audit", "money"], database: database).contains("Money adds up"))
        }
    }
}
