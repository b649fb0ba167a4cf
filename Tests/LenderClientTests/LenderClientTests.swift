import Crypto
import Foundation
import HTTPTypes
import LenderClient
import OpenAPIRuntime
import Postgres
import ServerTestSupport
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

@Suite("LenderClient, the generated Swift client")
struct LenderClientTests {
    /// The committed code is what `scripts/generate-client` makes of the document and the
    /// configuration as they are now: a changed route without a new client fails here.
    @Test func theCommittedClientWasGeneratedFromTheDocumentAsItIs() throws {
        func digest(_ path: String) throws -> String {
            let data = try Data(contentsOf: root.appendingPathComponent(path))
            return SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
        }
        #expect(
            try digest("Sources/Server/Resources/openapi.json") == GeneratedFrom.documentSHA256,
            "openapi.json changed since LenderClient was generated: run scripts/generate-client")
        #expect(
            try digest("Sources/LenderClient/openapi-generator-config.yaml") == GeneratedFrom.configurationSHA256,
            "the generator's configuration changed since LenderClient was generated: run scripts/generate-client")
        let generated = root.appendingPathComponent("Sources/LenderClient/Generated")
        let files = try FileManager.default.contentsOfDirectory(atPath: generated.path)
            .filter { $0.hasSuffix(".swift") && $0 != "GeneratedFrom.swift" }.sorted()
        let text = try files.reduce(into: Data()) { $0 += try Data(contentsOf: generated.appendingPathComponent($1)) }
        #expect(files.count >= 3)
        #expect(
            SHA256.hash(data: text).map { String(format: "%02x", $0) }.joined() == GeneratedFrom.generatedSHA256,
            "the generated code was edited by hand: run scripts/generate-client")
    }

    /// The commands the retries leave alone are exactly the ones the document gives no key.
    @Test func theUnkeyedCommandsAreTheDocumentsCommandsWithoutAnIdempotencyKey() throws {
        let data = try Data(contentsOf: root.appendingPathComponent("Sources/Server/Resources/openapi.json"))
        let document = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        var unkeyed: Set<String> = []
        for case let (_, operations as [String: Any]) in document["paths"] as? [String: Any] ?? [:] {
            for (method, operation) in operations where ["post", "put", "patch", "delete"].contains(method) {
                let operation = operation as? [String: Any] ?? [:]
                let parameters = operation["parameters"] as? [[String: Any]] ?? []
                if !parameters.contains(where: { $0["name"] as? String == "Idempotency-Key" }) {
                    unkeyed.insert(operation["operationId"] as? String ?? "?")
                }
            }
        }
        #expect(unkeyed == IdempotentRetries.unkeyedOperations)
    }

    @Test func aCalendarDayIsTheDayInTheGivenTimeZone() throws {
        let instant = try #require(ISO8601DateFormatter().date(from: "2026-05-09T20:00:00Z"))
        #expect(CalendarDay.string(from: instant, in: TimeZone(identifier: "UTC")!) == "2026-05-09")
        #expect(CalendarDay.string(from: instant, in: TimeZone(identifier: "Asia/Kathmandu")!) == "2026-05-10")
        let kathmandu = TimeZone(identifier: "Asia/Kathmandu")!
        let start = try #require(CalendarDay.date(from: "2026-05-10", in: kathmandu))
        #expect(CalendarDay.string(from: start, in: kathmandu) == "2026-05-10")
        for wrong in ["2026-1-5", "+2026-01-05", "2026-02-30", "2026-01-05T00:00", ""] {
            #expect(CalendarDay.date(from: wrong) == nil, "\(wrong)")
        }
    }

    /// The main flows of the apps, through `LenderClient` only, against a real `lender serve`.
    @Test func anAppDrivesEveryMainFlowThroughTheTypedClient() async throws {
        try await withServerDatabase { database, admin in
            let server = try await ServerProcess(database: database)
            defer { server.kill(SIGTERM) }
            let url = URL(string: "http://127.0.0.1:\(server.port)")!
            let anonymous = Client.lender(at: url)

            // Register and log in.
            func signUp(_ handle: String) async throws -> (id: UUID, client: Client) {
                let created = try await anonymous.registerUser(
                    body: .json(
                        .init(
                            handle: handle, displayName: handle.capitalized, email: "\(handle)@example.org",
                            password: "correct horse battery", country: "NP"))
                ).created.body.json
                #expect(created.handle == handle)
                #expect(created.position > 0)
                let session = try await anonymous.logIn(
                    body: .json(.init(handle: handle, password: "correct horse battery"))
                ).created.body.json
                #expect(session.userId == created.id)
                #expect(session.expiresAt > Date())
                return (created.id, Client.lender(at: url, token: session.token))
            }
            let (adaID, ada) = try await signUp("ada")
            let (bobID, bob) = try await signUp("bob")
            let (_, rita) = try await signUp("rita")

            // A wrong password is a typed problem, not a thrown decoding error.
            let refused = try await anonymous.logIn(body: .json(.init(handle: "ada", password: "wrong password")))
            #expect(try refused.unauthorized.body.applicationProblemJson.code == "invalid_credentials")

            // Profile.
            let profile = try await ada.updateProfile(
                body: .json(.init(displayName: "Ada Lovelace", defaultShareCents: 5000))
            ).ok.body.json
            #expect(profile.displayName == "Ada Lovelace")
            #expect(profile.defaultShareCents == 5000)
            #expect(profile.position != nil)
            let me = try await ada.getMyProfile().ok.body.json
            #expect(me.id == adaID)
            #expect(me.position == nil)
            #expect(try await bob.getUser(path: .init(userID: adaID)).ok.body.json.handle == "ada")

            // A rental and a request, then the market near them.
            let kathmandu = Components.Schemas.LocationInput(lat: 27.7, lng: 85.3, place: "Kathmandu")
            let from = CalendarDay.fromToday(10)
            let until = CalendarDay.fromToday(40)
            let rental = try await ada.postRental(
                body: .json(
                    .init(
                        title: "Road bike", description: "Fast", category: .bikes, dailyPriceCents: 1500,
                        location: kathmandu, availableFrom: from, availableUntil: until))
            ).created.body.json
            #expect(rental.kind == .rental)
            #expect(rental.status == .available)
            #expect(rental.ownerId == adaID)
            #expect(rental.availableFrom == from)
            #expect(CalendarDay.date(from: rental.availableFrom ?? "") != nil)
            let request = try await bob.postRequest(
                body: .json(
                    .init(
                        title: "A tent", category: .sports, maxDailyPriceCents: 900, location: kathmandu,
                        neededFrom: from, neededUntil: until))
            ).created.body.json
            #expect(request.kind == .request)
            let market = try await bob.listMarket(query: .init(near: "27.7,85.3", radiusKm: 5)).ok.body.json
            #expect(Set(market.data.map(\.id)) == [rental.id, request.id])
            #expect(market.data.allSatisfy { $0.distanceKm != nil })
            let bikes = try await bob.listMarket(query: .init(category: .bikes, sort: .newest)).ok.body.json
            #expect(bikes.data.map(\.id) == [rental.id])

            // Bid by card (its charge authorised), approve (captured): a booking of the bid's
            // days, the rental still in the market.
            let bobsCard = try await bob.addPaymentCard(
                body: .json(.init(number: "4242 4242 4242 4242", expMonth: 12, expYear: 2030, cvv: "123", holderName: "Bob"))
            ).card
            let lastDay = CalendarDay.fromToday(12)
            let bid = try await bob.placeBid(
                path: .init(itemID: rental.id),
                body: .json(.init(dailyPriceCents: 1400, from: from, until: lastDay, payWith: .card, cardId: bobsCard.id))
            ).created.body.json
            #expect(bid.status == .pending)
            #expect(bid.payment?.chargeCents == 3 * 1400 + 210, "3 days and a 5 % fee")
            #expect(bid.bidderId == bobID)
            let notHis = try await bob.approveBid(path: .init(bidID: bid.id))
            #expect(try notHis.forbidden.body.applicationProblemJson.code == "not_owner")
            let approved = try await ada.approveBid(path: .init(bidID: bid.id)).ok.body.json
            #expect(approved.status == .approved)
            let booked = try await bob.getItem(path: .init(itemID: rental.id)).ok.body.json
            #expect(booked.status == .available)
            let booking = try await bob.getBooking(path: .init(bookingID: bid.id)).ok.body.json
            #expect(booking.status == .confirmed)
            #expect(booking.contactEmail == "ada@example.org")
            #expect(booking.totalCents == booking.days * 1400)
            let upcoming = try await ada.listMyBookings(query: .init(role: .owner)).ok.body.json
            #expect(upcoming.data.map(\.id) == [bid.id])
            let calendar = try await bob.getAvailability(path: .init(itemID: rental.id), query: .init(from: from, until: lastDay))
                .ok.body.json
            #expect(calendar.ranges.map(\.state) == [.booked])
            let taken = try await rita.placeBid(
                path: .init(itemID: rental.id), body: .json(.init(dailyPriceCents: 1400, from: from, until: from)))
            #expect(try taken.conflict.body.applicationProblemJson.code == "dates_unavailable")
            let early = try await ada.completeBooking(path: .init(bookingID: bid.id))
            #expect(try early.conflict.body.applicationProblemJson.code == "booking_not_ended")
            // Its days over, the jobs complete it; then each side reviews the other.
            _ = try runLender(["jobs", "run", "--as-of", CalendarDay.fromToday(13)], database: database)
            let completed = try await bob.getBooking(path: .init(bookingID: bid.id)).ok.body.json
            #expect(completed.status == .completed)
            // The owner is paid the total less the owner's 10 % fee, and sees it in the statement.
            let statement = try await ada.balanceHistory().ok.body.json
            #expect(statement.data.first?.kind == .rentalEarnings)
            #expect(statement.data.first?.amountCents == 3 * 1400 - 420)
            let earned = 3 * 1400 - 420
            #expect(try await ada.getMyProfile().ok.body.json.availableCents == earned)

            let review = try await bob.reviewBooking(path: .init(bookingID: bid.id), body: .json(.init(stars: 5, text: "Smooth ride")))
            #expect(try review.created.body.json.published == false, "held until ada reviews too")
            let answer = try await ada.reviewBooking(path: .init(bookingID: bid.id), body: .json(.init(stars: 4)))
            #expect(try answer.created.body.json.published == true)
            let shown = try await rita.listItemReviews(path: .init(itemID: rental.id)).ok.body.json
            #expect(shown.data.map(\.stars) == [5])
            let bids = try await ada.listBids(path: .init(itemID: rental.id)).ok.body.json
            #expect(bids.data.map(\.id) == [bid.id])
            #expect(bids.data.first?.itemTitle == rental.title && bids.data.first?.itemKind == .rental, "a row draws its item")
            let received = try await ada.listBidsReceived(query: .init(status: .approved)).ok.body.json
            #expect(received.data.map(\.id) == [bid.id])
            let adaNow = try await ada.getMyProfile().ok.body.json
            #expect(adaNow.posts.map(\.id) == [rental.id])
            #expect(adaNow.links.posts == nil)

            // A loan, funded through a card, a deposit, the cart and its checkout.
            let loan = try await rita.postLoan(
                body: .json(
                    .init(
                        title: "Sewing machine", description: "A second machine", sector: "Manufacturing",
                        activity: "Tailoring", country: "NP", location: .init(lat: 28.2, lng: 83.99, place: "Pokhara"),
                        amountCents: 5000, deadline: CalendarDay.fromToday(30)))
            ).created.body.json
            #expect(loan.status == .fundraising)
            let card = try await ada.addPaymentCard(
                body: .json(.init(number: "4242 4242 4242 4242", expMonth: 12, expYear: 2030, cvv: "123", holderName: "Ada"))
            ).card
            #expect(card.network == .visa)
            let again = try await ada.addPaymentCard(
                body: .json(.init(number: "4242 4242 4242 4242", expMonth: 11, expYear: 2031, cvv: "123", holderName: "Ada"))
            ).card
            #expect(again.id == card.id)
            let deposit = try await ada.deposit(
                headers: .init(idempotencyKey: "first-deposit"), body: .json(.init(amountCents: 10_000, cardId: card.id))
            ).created.body.json
            #expect(deposit.balanceCents == earned + 10_000)
            let replayed = try await ada.deposit(
                headers: .init(idempotencyKey: "first-deposit"), body: .json(.init(amountCents: 10_000, cardId: card.id))
            ).created.body.json
            #expect(replayed.position == deposit.position)
            #expect(replayed.chargeId == deposit.chargeId)
            _ = try await ada.addToCart(body: .json(.init(loanId: loan.id))).created.body.json
            let cart = try await ada.getCart().ok.body.json
            #expect(cart.lines.map(\.loanId) == [loan.id])
            #expect(cart.totalCents == 5000)
            let paid = try await ada.checkout(body: .json(.init(payWith: .balance))).ok.body.json
            #expect(paid.purchases.map(\.loanId) == [loan.id])
            let funded = try await rita.getLoan(path: .init(loanID: loan.id)).ok.body.json
            #expect(funded.status == .funded)
            #expect(funded.fundedCents == 5000)
            let loans = try await ada.listLoans(query: .init(near: "28.2,83.99", radiusKm: 5)).ok.body.json
            #expect(loans.data.map(\.id) == [loan.id])
            let lent = try await ada.listMyLoans().ok.body.json
            #expect(lent.data.map(\.loanId) == [loan.id])
            #expect(lent.nextCursor == nil)
            #expect(lent.data.first?.country == "NP" && lent.data.first?.borrowerHandle == funded.borrowerHandle)
            #expect(loans.data.first?.borrowerHandle == "rita" && cart.lines.first?.photo == nil)
            // The feed: newest first, paged by cursor as every list is.
            let newest = try await ada.myFeed(query: .init(limit: 1)).ok.body.json
            let older = try await ada.myFeed(query: .init(cursor: try #require(newest.nextCursor), limit: 1)).ok.body.json
            #expect(newest.data.first!.position > older.data.first!.position)

            // The borrower repays with a card of her own; the lender is credited.
            let ritasCard = try await rita.addPaymentCard(
                body: .json(.init(number: "5555 5555 5555 4444", expMonth: 1, expYear: 2031, cvv: "321", holderName: "Rita"))
            ).card
            let repayment = try await rita.recordRepayment(
                path: .init(loanID: loan.id), body: .json(.init(amountCents: 1000, payWith: .card, cardId: ritasCard.id))
            ).created.body.json
            #expect(repayment.credits.map(\.lenderId) == [adaID])
            #expect(repayment.paidWith.method == .card)
            #expect(try await ada.getMyProfile().ok.body.json.balanceCents == earned + 10_000 - 5000 + 1000)

            let countries = try await ada.listCountries(query: .init(q: "nep")).ok.body.json
            #expect(countries.data.map(\.code) == ["NP"])
            #expect(countries.data.first?.fundraisingLoans == 0)

            // A renter who cancels six days before, under `moderate`, is refunded half.
            let tent = try await ada.postRental(
                body: .json(
                    .init(
                        title: "Tent", description: "For two", category: .sports, dailyPriceCents: 1000, location: kathmandu,
                        cancellationPolicy: .moderate))
            ).created.body.json
            let sixDays = CalendarDay.fromToday(6)
            let camping = try await bob.placeBid(
                path: .init(itemID: tent.id),
                body: .json(.init(dailyPriceCents: 1000, from: sixDays, until: sixDays, payWith: .card, cardId: bobsCard.id))
            ).created.body.json
            #expect(try await ada.approveBid(path: .init(bidID: camping.id)).ok.body.json.status == .approved)
            let cancelled = try await bob.cancelBooking(
                path: .init(bookingID: camping.id), body: .json(.init(reason: "Rain"))
            ).ok.body.json
            #expect(cancelled.status == .cancelled)
            #expect(cancelled.refundCents == 500 + 25, "half the total and half the fee")

            // Ada, an owner paid for a booking and a lender repaid, pays out to her bank account:
            // once her address is verified (the code read from the mail waiting in the outbox).
            let unverified = try await ada.requestPayout(body: .json(.init(amountCents: earned)))
            #expect(try unverified.forbidden.body.applicationProblemJson.code == "email_unverified")
            _ = try await ada.requestEmailVerification().accepted
            let subject = try await admin.query("SELECT subject FROM outbox WHERE kind = 'email_verification'").single()
                .decode("subject", as: String.self)
            let code = String(subject.split(separator: " ").last ?? "")
            #expect(try await ada.confirmEmailVerification(body: .json(.init(code: code))).ok.body.json.emailVerified)
            let account = try await ada.setPayoutMethod(body: .json(.init(kind: .bankAccount, token: "ba_test_ada"))).ok.body.json
            #expect(account.tokenEnding == "_ada")
            let out = try await ada.requestPayout(body: .json(.init(amountCents: earned + 1000))).created.body.json
            #expect(out.status == .sent && out.amountCents == earned + 1000)
            #expect(try await ada.listPayouts().ok.body.json.data.map(\.id) == [out.id])

            // Logged out, the token is refused.
            _ = try await ada.logOut().noContent
            #expect(try await ada.getMyProfile().unauthorized.body.applicationProblemJson.code == "unauthenticated")
        }
    }
}

extension LenderClientTests {
    /// Trust and safety through the typed client (SPEC §12.5): a renter reports a listing and
    /// an operator takes it down; a booking with a deposit, disputed from its first day, is
    /// divided by the operator; a suspended user's writes are refused as a typed problem.
    @Test func anOperatorActsThroughTheTypedClient() async throws {
        try await withServerDatabase { database, admin in
            let server = try await ServerProcess(database: database)
            defer { server.kill(SIGTERM) }
            let url = URL(string: "http://127.0.0.1:\(server.port)")!
            let anonymous = Client.lender(at: url)
            func signUp(_ handle: String) async throws -> (id: UUID, client: Client) {
                let created = try await anonymous.registerUser(
                    body: .json(.init(handle: handle, displayName: handle, email: "\(handle)@example.org", password: "correct horse battery"))
                ).created.body.json
                let session = try await anonymous.logIn(body: .json(.init(handle: handle, password: "correct horse battery")))
                    .created.body.json
                return (created.id, Client.lender(at: url, token: session.token))
            }
            let (_, owner) = try await signUp("owner")
            let (renterID, renter) = try await signUp("renter")
            let (_, desk) = try await signUp("desk")
            _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
            let kathmandu = Components.Schemas.LocationInput(lat: 27.7, lng: 85.3)

            // A scam listing, reported and taken down.
            let scam = try await owner.postRental(
                body: .json(.init(title: "Cheap phones", category: .electronics, dailyPriceCents: 100, location: kathmandu))
            ).created.body.json
            let report = try await renter.fileReport(
                body: .json(.init(subjectType: .item, subjectId: scam.id, reason: .scam, text: "Asks for cash first"))
            ).created.body.json
            let notYours = try await renter.takeDownItem(path: .init(itemID: scam.id), body: .json(.init(reason: "Scam")))
            #expect(try notYours.forbidden.body.applicationProblemJson.code == "not_operator")
            let taken = try await desk.takeDownItem(path: .init(itemID: scam.id), body: .json(.init(reason: "Scam"))).ok.body.json
            #expect(taken.status == .takenDown)
            let resolved = try await desk.resolveReport(
                path: .init(reportID: report.id), body: .json(.init(action: .takenDown, reason: "Taken down"))
            ).ok.body.json
            #expect(resolved.status == .resolved)

            // A drill with a deposit, booked from today and disputed at once; the operator divides it.
            let drill = try await owner.postRental(
                body: .json(
                    .init(title: "Drill", category: .tools, dailyPriceCents: 1000, location: kathmandu, securityDepositCents: 2000))
            ).created.body.json
            let card = try await renter.addPaymentCard(
                body: .json(.init(number: "4242 4242 4242 4242", expMonth: 12, expYear: 2030, cvv: "123", holderName: "Renter"))
            ).card
            let today = CalendarDay.fromToday(0)
            let bid = try await renter.placeBid(
                path: .init(itemID: drill.id),
                body: .json(.init(dailyPriceCents: 1000, from: today, until: today, payWith: .card, cardId: card.id))
            ).created.body.json
            #expect(bid.payment?.depositCents == 2000)
            _ = try await owner.approveBid(path: .init(bidID: bid.id)).ok
            let disputed = try await renter.openDispute(
                path: .init(bookingID: bid.id), body: .json(.init(reason: .notAsDescribed, text: "No drill bits"))
            ).created.body.json
            #expect(disputed.dispute?.status == .open && disputed.depositStatus == .held)
            let uneven = try await desk.resolveBooking(
                path: .init(bookingID: bid.id), body: .json(.init(renterCents: 1, ownerCents: 1, reason: "x")))
            #expect(try uneven.unprocessableContent.body.applicationProblemJson.code == "validation_failed")
            let held = 1000 + 50 + 2000
            let divided = try await desk.resolveBooking(
                path: .init(bookingID: bid.id), body: .json(.init(renterCents: held - 500, ownerCents: 500, reason: "Half a day")))
                .ok.body.json
            #expect(divided.dispute?.status == .resolved && divided.dispute?.ownerCents == 500 && divided.status == .completed)

            // Suspended: the renter reads, writes nothing.
            _ = try await desk.suspendUser(path: .init(userID: renterID), body: .json(.init(reason: "Chargebacks"))).ok
            let again = Client.lender(
                at: url,
                token: try await anonymous.logIn(body: .json(.init(handle: "renter", password: "correct horse battery")))
                    .created.body.json.token)
            _ = try await again.getMyProfile().ok
            let refused = try await again.updateProfile(body: .json(.init(displayName: "R")))
            #expect(try refused.forbidden.body.applicationProblemJson.code == "account_suspended")
            #expect(try runLender(["audit", "money"], database: try await ownerURL(admin)).contains("Money adds up"))
        }
    }
}

/// `IdempotentRetries` against a stand-in for the transport: what goes out on each send.
@Suite("LenderClient's idempotent retries")
struct IdempotentRetriesTests {
    /// The sends one request made: their keys, in order.
    final class Sends: @unchecked Sendable {
        private let lock = NSLock()
        private var keys: [String?] = []
        func record(_ request: HTTPRequest) {
            lock.withLock { keys.append(request.headerFields[IdempotentRetries.keyField]) }
        }
        var all: [String?] { lock.withLock { keys } }
    }

    /// Sends one request through the middleware to a transport that gives `answers` in turn,
    /// nil standing for a lost connection (wrapped as the runtime wraps it) or `failure`.
    func send(
        _ method: HTTPRequest.Method, operation: String = "deposit", key: String? = nil, body: HTTPBody? = HTTPBody("{}"),
        answers: [HTTPResponse.Status?], failure: URLError = URLError(.networkConnectionLost),
        retries: IdempotentRetries = .init(attempts: 3, maximumDelay: .milliseconds(10))
    ) async -> (Result<HTTPResponse.Status, any Error>, [String?]) {
        let sends = Sends()
        var request = HTTPRequest(method: method, scheme: "http", authority: "lender", path: "/v1/me/deposits")
        if let key { request.headerFields[IdempotentRetries.keyField] = key }
        do {
            let (response, _) = try await retries.intercept(
                request, body: body, baseURL: URL(string: "http://lender")!, operationID: operation
            ) { request, _, _ in
                sends.record(request)
                guard let status = answers[min(sends.all.count - 1, answers.count - 1)] else {
                    throw ClientError(
                        operationID: operation, operationInput: "", causeDescription: "Transport threw error.",
                        underlyingError: failure)
                }
                return (HTTPResponse(status: status), nil)
            }
            return (.success(response.status), sends.all)
        } catch {
            return (.failure(error), sends.all)
        }
    }

    @Test func aCommandIsSentAgainWithTheSameKeyAfterA503OrALostConnection() async throws {
        let (result, keys) = await send(.post, answers: [.serviceUnavailable, nil, .created])
        #expect(try result.get() == .created)
        #expect(keys.count == 3)
        #expect(keys[0] != nil && UUID(uuidString: keys[0]!) != nil)
        #expect(Set(keys).count == 1, "every send carries the first key: \(keys)")
    }

    @Test func theCallersKeyIsKeptAndTheLastAnswerReturnedWhenRetriesRunOut() async throws {
        let (result, keys) = await send(.patch, key: "mine", answers: [.serviceUnavailable])
        #expect(try result.get() == .serviceUnavailable)
        #expect(keys == ["mine", "mine", "mine", "mine"])
        let (failed, failedKeys) = await send(.delete, answers: [nil])
        #expect(throws: ClientError.self) { try failed.get() }
        #expect(failedKeys.count == 4)
    }

    @Test func aFailureOfTheRequestItselfAndAnUnkeyedCommandAreSentOnce() async throws {
        let (refused, refusedKeys) = await send(.post, answers: [nil], failure: URLError(.badURL))
        #expect(throws: ClientError.self) { try refused.get() }
        #expect(refusedKeys.count == 1)
        let (logout, logoutKeys) = await send(.post, operation: "logOut", answers: [.serviceUnavailable])
        #expect(try logout.get() == .serviceUnavailable)
        #expect(logoutKeys == [nil])
    }

    /// Registering, logging in and photo uploads are sent again after a 503 (the server did
    /// nothing), with no key; after a lost connection, once.
    @Test func theCommandsA503LeavesUndoneAreSentAgainWithoutAKey() async throws {
        for operation in ["registerUser", "logIn", "addItemPhoto", "addLoanPhoto", "setProfilePhoto"] {
            let (result, keys) = await send(.post, operation: operation, answers: [.serviceUnavailable, .serviceUnavailable, .created])
            #expect(try result.get() == .created, "\(operation)")
            #expect(keys == [nil, nil, nil], "\(operation)")
            let (lost, lostKeys) = await send(.post, operation: operation, answers: [nil, .created])
            #expect(throws: ClientError.self, "\(operation)") { try lost.get() }
            #expect(lostKeys == [nil], "\(operation)")
        }
    }

    @Test func readsGetNoKeyAndAStreamedBodyIsSentOnce() async throws {
        let (read, readKeys) = await send(.get, body: nil, answers: [.serviceUnavailable])
        #expect(try read.get() == .serviceUnavailable)
        #expect(readKeys == [nil])
        let stream = HTTPBody(AsyncStream<ArraySlice<UInt8>> { $0.finish() }, length: .unknown, iterationBehavior: .single)
        let (once, onceKeys) = await send(.post, body: stream, answers: [.serviceUnavailable])
        #expect(try once.get() == .serviceUnavailable)
        #expect(onceKeys.count == 1)
    }
}
