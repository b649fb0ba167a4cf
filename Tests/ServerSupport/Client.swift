import Foundation
import HTTPTypes
import HummingbirdTesting
import Marketplace
import NIOCore
import Projections
import Synchronization
import Testing
import UseCases

extension TestClientProtocol {
    /// Sends JSON (or raw text) and hands back the whole answer.
    public func send(
        _ method: HTTPRequest.Method, _ uri: String, json: [String: Any]? = nil, raw: String? = nil, token: String? = nil,
        idempotencyKey: String? = nil
    ) async throws -> Reply {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let token { headers[.authorization] = "Bearer \(token)" }
        if let idempotencyKey { headers[HTTPField.Name("Idempotency-Key")!] = idempotencyKey }
        var json = json
        if method == .post, uri.hasPrefix("/v1/items/"), uri.hasSuffix("/bids"), let body = json, body["payWith"] == nil,
            let token
        {
            json = try await paying(body, token)
        }
        let text = try raw ?? json.map { String(decoding: try jsonBody($0), as: UTF8.self) }
        return try await execute(uri: uri, method: method, headers: headers, body: text.map { ByteBuffer(string: $0) }) {
            Reply(status: $0.status, headers: $0.headers, data: Data(buffer: $0.body))
        }
    }

    /// A bid's body that says nothing of payment, paid by the bidder's card (SPEC §12.2: a
    /// rental's bid holds its charge; a request's ignores it), the card added at their first
    /// bid. A test of payment itself says `payWith` (null to leave it out).
    func paying(_ body: [String: Any], _ token: String) async throws -> [String: Any] {
        var body = body
        let card: String
        if let known = TestCards.known.withLock({ $0[token] }) {
            card = known
        } else {
            let added = try await addCard(token)
            guard added.status == .created || added.status == .ok, let id = added.json["id"] as? String else { return body }
            card = id
            TestCards.known.withLock { $0[token] = card }
        }
        body["payWith"] = "card"
        body["cardId"] = card
        return body
    }

    public func register(_ handle: String, password: String = "correct horse battery") async throws -> RegisteredUser {
        let reply = try await send(
            .post, "/v1/users",
            body: API.RegisterBody(handle: handle, displayName: "User \(handle)", email: "\(handle)@example.org", password: password))
        #expect(reply.status == .created, "\(reply)")
        return try reply.decode()
    }

    /// Logs in; the session's token.
    public func login(_ handle: String, password: String = "correct horse battery") async throws -> String {
        let reply = try await send(.post, "/v1/sessions", body: API.LoginBody(handle: handle, password: password))
        #expect(reply.status == .created, "\(reply)")
        return try reply.decode(Session.self).token
    }

    /// A registered, logged-in user: their id and token.
    public func user(_ handle: String) async throws -> (id: UserID, token: String) {
        let id = try await register(handle).id
        return (id, try await login(handle))
    }

    public func postRental(_ token: String, title: String = "Road bike") async throws -> ItemResource {
        let reply = try await send(
            .post, "/v1/rentals",
            body: API.RentalBody(
                title: title, description: "Fast", category: .bikes, dailyPriceCents: 1500,
                location: API.LocationInput(lat: 27.7, lng: 85.3, place: "Kathmandu"), availableFrom: "2026-12-01",
                availableUntil: "2026-12-31"
            ), token: token)
        #expect(reply.status == .created, "\(reply)")
        return try reply.decode()
    }

    /// A request for all of December, so that `bid(_:_:)` falls inside it.
    public func postRequest(_ token: String, title: String = "Tent") async throws -> ItemResource {
        let reply = try await send(
            .post, "/v1/requests",
            body: API.RequestBody(
                title: title, description: "For a trek", category: .sports,
                location: API.LocationInput(lat: 27.7, lng: 85.3, place: "Kathmandu"), neededFrom: "2026-12-01",
                neededUntil: "2026-12-31"
            ), token: token)
        #expect(reply.status == .created, "\(reply)")
        return try reply.decode()
    }

    /// `POST /v1/items/{item}/complete` as `token` on 2 January 2027, after every test deal's
    /// days (a request's deal completes only then), with `clock` moved for the call and back.
    public func complete(_ item: ItemID, _ token: String, clock: TestClock) async throws -> Reply {
        try await clock.on("2027-01-02") { try await send(.post, "/v1/items/\(item)/complete", token: token) }
    }

    /// A bid of 1400 a day for 5 to 7 December; the answer, which may be a refusal.
    public func bid(_ item: ItemID, _ token: String) async throws -> Reply {
        try await send(
            .post, "/v1/items/\(item)/bids", body: API.BidBody(dailyPriceCents: 1400, from: "2026-12-05", until: "2026-12-07"),
            token: token)
    }

    public func postLoan(
        _ token: String, amount: Int = 10_000, country: String = "NP", title: String = "Sewing machine",
        sector: String = "Manufacturing", lat: Double = 28.2, lng: Double = 83.99, deadlineDays: Int = 30
    ) async throws -> LoanID {
        let reply = try await send(
            .post, "/v1/loans",
            body: API.LoanBody(
                title: title, description: "A second machine for the workshop", sector: sector,
                activity: "Tailoring", country: country, location: API.LocationInput(lat: lat, lng: lng, place: "Pokhara"),
                amountCents: amount, deadline: dayFromToday(deadlineDays)
            ), token: token)
        #expect(reply.status == .created, "\(reply)")
        return try reply.decode(LoanResource.self).id
    }

    /// Adds a card; the answer, which may be a refusal.
    public func addCard(
        _ token: String, number: String = "4242 4242 4242 4242", expMonth: Int = 12, expYear: Int = 2030, cvv: String = "123"
    ) async throws -> Reply {
        try await send(
            .post, "/v1/me/cards",
            body: API.CardBody(number: number, expMonth: expMonth, expYear: expYear, cvv: cvv, holderName: "Ada Lovelace"),
            token: token)
    }

    /// Adds an approved card and deposits `amount` with it.
    public func fund(_ token: String, _ amount: Int) async throws {
        let card = try await addCard(token).decode(CardResource.self)
        let deposit = try await send(
            .post, "/v1/me/deposits", body: API.DepositBody(amountCents: amount, cardId: card.id.rawValue), token: token)
        #expect(deposit.status == .created, "\(deposit)")
    }

    /// Puts `amount` of a loan in the cart (the default share without one); the answer.
    public func addToCart(_ token: String, _ loan: LoanID, _ amount: Int? = nil) async throws -> Reply {
        try await send(.post, "/v1/cart/items", body: API.CartLineBody(loanId: loan.rawValue, amountCents: amount), token: token)
    }

    public func me(_ token: String) async throws -> PrivateProfile {
        let reply = try await send(.get, "/v1/me", token: token)
        #expect(reply.status == .ok, "\(reply)")
        return try reply.decode()
    }

    public func balance(_ token: String) async throws -> Int { try await me(token).balanceCents }

    public func loan(_ id: LoanID, _ token: String) async throws -> LoanResource {
        let reply = try await send(.get, "/v1/loans/\(id)", token: token)
        #expect(reply.status == .ok, "\(reply)")
        return try reply.decode()
    }

    /// Funds a loan of `amount` with one 2500-share per lender; the loan and the lenders' tokens.
    public func fundedLoan(borrower: String, lenders count: Int, amount: Int) async throws -> (loan: LoanID, lenders: [String]) {
        let loan = try await postLoan(borrower, amount: amount)
        var lenders = [String]()
        for index in 0..<count {
            let lender = try await user("lender\(index)")
            try await fund(lender.token, 2500)
            _ = try await addToCart(lender.token, loan, 2500)
            let checkout = try await send(.post, "/v1/cart/checkout", body: API.CartPayment(payWith: .balance), token: lender.token)
            #expect(checkout.status == .ok, "\(checkout)")
            lenders.append(lender.token)
        }
        return (loan, lenders)
    }
}

/// The JSON of a request body; throws, rather than trap, on a value JSON has no form for (a
/// typed id passed where its text belongs).
func jsonBody(_ json: [String: Any]) throws -> Data {
    guard JSONSerialization.isValidJSONObject(json) else { throw NotJSON(value: "\(json)") }
    return try JSONSerialization.data(withJSONObject: json)
}

/// A request body with a value that JSON cannot hold.
public struct NotJSON: Error, CustomStringConvertible {
    public var value: String
    public var description: String { "not a JSON object: \(value)" }
}

/// Each test token's card, added at its first bid that said nothing of payment.
enum TestCards {
    static let known = Mutex<[String: String]>([:])
}
