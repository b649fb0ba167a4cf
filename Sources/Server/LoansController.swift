import EventStore
import Foundation
import Hummingbird
import Marketplace
import Postgres

/// Loans: `POST /v1/loans`, `GET /v1/loans`, `GET /v1/loans/{loanId}`, and
/// `POST /v1/loans/{loanId}/repayments`. Shares are bought only by checkout (`CartController`).
struct LoansController<Context: AuthenticatedRequestContext>: Sendable {
    let gateway: CommandGateway
    let cardPayments: CardPayments
    /// Lists may come from a replica; a loan answered after a command comes from the primary.
    let reads: PostgresPool
    var pool: PostgresPool { gateway.store.pool }

    struct LoanBody: Decodable {
        var title: String?
        var description: String?
        var sector: String?
        var activity: String?
        var country: String?
        var location: LocationBody?
        var amountCents: Int?
        var deadline: String?
    }

    struct RepaymentBody: Decodable {
        var amountCents: Int?
        var payWith: String?
        var cardId: String?
    }

    struct Repayment: ResponseEncodable {
        var amountCents: Int
        var paidWith: PaidWith
        var credits: [Credit]
        /// The borrower's balance after the repayment.
        var balanceCents: Int
        var loan: LoanResource
        var position: Int64?
    }

    /// What a repayment decided, recorded with its events for a repeat to answer again.
    struct RepaymentOutcome: Codable {
        var amountCents: Int
        var paidWith: PaidWith
        var credits: [Credit]
        var balanceCents: Int
    }

    struct Credit: Codable {
        var lenderId: UserID
        var amountCents: Int
    }

    func addRoutes(
        to router: Router<Context>, authentication: AuthenticationMiddleware<Context>, idempotency: IdempotencyMiddleware<Context>,
        limiter: WriteLimiter
    ) {
        let loans = router.group("/v1/loans").add(middleware: authentication).add(middleware: idempotency)
        loans.group().add(middleware: WriteLimitMiddleware(limiter: limiter, kind: .postings)).post(use: postLoan)
        loans.get(use: list)
        loans.get(":loanID", use: loan)
        loans.post(":loanID/repayments", use: recordRepayment)
    }

    @Sendable func postLoan(_ request: Request, context: Context) async throws -> EditedResponse<LoanResource> {
        let me = try context.requireIdentity()
        let body = try await request.decodeBody(LoanBody.self, context: context)
        var fields = FieldCheck()
        let location = fields.location(body.location)
        let deadline = fields.day(body.deadline, "deadline", required: true)
        fields.require(
            ("title", body.title), ("sector", body.sector), ("activity", body.activity), ("country", body.country),
            ("amountCents", body.amountCents))
        fields.alongside(
            LoanDecider.givenFieldProblems(
                title: body.title, description: body.description, country: body.country, amountCents: body.amountCents))
        try fields.throwIfAny()
        let posted = LoanPosted(
            loanID: LoanID(), borrowerID: me, title: body.title!, description: body.description ?? "", sector: body.sector!,
            activity: body.activity!, countryCode: body.country!, location: location!, amountCents: body.amountCents!,
            deadline: deadline!)
        let handled = try await gateway.handle(
            .post(posted, today: Day(Date())), on: .loan, id: posted.loanID, actor: me, newStream: true)
        // Named by the state: a repeated request answers the first one's loan.
        guard let loanID = handled.state.loanID else { throw LoanDecider.loanNotFound }
        return EditedResponse(
            status: .created, response: try await loanResource(loanID.rawValue, position: handled.append?.lastPosition))
    }

    /// A repayment paid by the borrower, from the balance or by card, and each lender's credit
    /// on their own stream, in one append (SPEC §11.1): it moves money, it never makes any.
    @Sendable func recordRepayment(_ request: Request, context: Context) async throws -> EditedResponse<Repayment> {
        let me = try context.requireIdentity()
        let loanID = LoanID(try context.parameters.requireUUID("loanID"))
        let body = try await request.decodeBody(RepaymentBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("amountCents", body.amountCents), ("payWith", body.payWith))
        let cardID = fields.payingCard(body.payWith, body.cardId)
        try fields.throwIfAny()
        let amount = body.amountCents!
        let today = Day(Date())
        let (outcome, append): (RepaymentOutcome, AppendResult?)
        if let replayed = try gateway.replayedOutcome(RepaymentOutcome.self) {
            (outcome, append) = replayed
        } else if let cardID {
            // Decided once with no charge yet: nothing is charged for a repayment that would fail.
            var reads = StreamReads(gateway: gateway)
            let borrower = try await reads.load(.user, id: me)
            _ = try RepaymentDecider.decide(
                amountCents: amount, loanID: loanID, loan: try await reads.load(.loan, id: loanID), borrower: borrower,
                payment: .card(cardID, chargeID: ""), actor: me, today: today)
            let card = try UserDecider.chargeableCard(cardID, in: borrower, today: today)
            (outcome, append) = try await cardPayments.pay(amount, with: card, for: me, purpose: "repayment") { charge in
                try await repay(amount, loanID, me, .card(cardID, chargeID: charge.id), today)
            }
        } else {
            (outcome, append) = try await repay(amount, loanID, me, .balance, today)
        }
        return EditedResponse(
            status: .created,
            response: Repayment(
                amountCents: outcome.amountCents, paidWith: outcome.paidWith, credits: outcome.credits,
                balanceCents: outcome.balanceCents,
                loan: try await loanResource(loanID.rawValue, position: append?.lastPosition), position: append?.lastPosition))
    }

    /// The repayment's one append across the loan, the borrower and every lender credited.
    func repay(_ amount: Int, _ loanID: LoanID, _ me: UserID, _ payment: Payment, _ today: Day) async throws
        -> (outcome: RepaymentOutcome, append: AppendResult?)
    {
        try await gateway.handleAcross("recordRepayment", actor: me) { reads in
            let loan = try await reads.load(.loan, id: loanID)
            let borrower = try await reads.load(.user, id: me)
            let decision = try RepaymentDecider.decide(
                amountCents: amount, loanID: loanID, loan: loan, borrower: borrower, payment: payment, actor: me, today: today)
            let writes =
                try [StreamWrite(decision.loan, to: .loan, id: loanID), StreamWrite(decision.borrower, to: .user, id: me)]
                + decision.credits.map { try StreamWrite([.balanceCredited($0.credit)], to: .user, id: $0.lender, checked: false) }
            let outcome = RepaymentOutcome(
                amountCents: amount, paidWith: PaidWith(payment.paidWith),
                credits: decision.credits.map { Credit(lenderId: $0.lender, amountCents: $0.credit.amountCents) },
                balanceCents: decision.borrower.reduce(borrower, UserDecider.evolve).balanceCents)
            return (writes, outcome)
        }
    }

    @Sendable func loan(_ request: Request, context: Context) async throws -> LoanResource {
        try await loanResource(try context.parameters.requireUUID("loanID"), position: nil)
    }

    func loanResource(_ id: UUID, position: Int64?) async throws -> LoanResource {
        let rows = try await pool.query(
            "SELECT \(unsafeRaw: LoanResource.columns), NULL::float8 AS distance_km FROM loans_view WHERE loan_id = \(id)")
        guard let row = rows.first else { throw Problem(LoanDecider.loanNotFound) }
        return try LoanResource(row, position: position)
    }

    /// The loans' own filters, on top of the shared ones.
    struct Query {
        var list: ListQuery
        var country: String?
        var sector: String?
        var status: LoanStatus?

        init(_ request: Request) throws {
            list = ListQuery(request)
            if let value = list.text("country") {
                country = value.uppercased()
                if !Countries.alpha2.contains(value.uppercased()) {
                    list.bad("country", "invalid_country", "an ISO 3166-1 alpha-2 code, like NP")
                }
            }
            sector = list.text("sector")
            if let value = list.text("status") {
                status = LoanStatus(rawValue: value)
                if status == nil { list.bad("status", "invalid_status", "fundraising, funded, repaying, repaid or expired") }
            }
            try list.throwIfAny()
        }
    }

    @Sendable func list(_ request: Request, context: Context) async throws -> Page<LoanResource> {
        let filters = try Query(request)
        let query = filters.list
        let point = query.nearPoint
        let after = query.cursor
        let rows = try await reads.query(
            """
            WITH candidates AS (
                SELECT \(unsafeRaw: LoanResource.columns),
                       CASE WHEN \(point)::cube IS NULL THEN NULL
                            ELSE 2 * \(unsafeRaw: Earth.radiusSQL)
                                 * asin(least(1.0, cube_distance(earth, \(point)::cube) / (2 * \(unsafeRaw: Earth.radiusSQL))))
                       END AS distance_km
                FROM loans_view
                WHERE (\(filters.country)::text IS NULL OR country_code = \(filters.country))
                  AND (\(filters.sector)::text IS NULL OR lower(sector) = lower(\(filters.sector)))
                  AND (\(filters.status?.rawValue)::text IS NULL OR status = \(filters.status?.rawValue))
                  AND (\(query.updatedSince)::timestamptz IS NULL OR updated_at > \(query.updatedSince))
                  AND NOT EXISTS (SELECT FROM unnest(\(query.titlePatterns)::text[]) AS p WHERE title NOT ILIKE p)
                  AND (\(query.radiusBox)::cube IS NULL OR earth <@ \(query.radiusBox)::cube)
            )
            SELECT * FROM candidates
            WHERE (\(query.radiusKm)::float8 IS NULL OR distance_km <= \(query.radiusKm))
              AND (\(after?.id)::uuid IS NULL
                   OR (\(query.byDistance) AND (distance_km, loan_id) > (\(after?.km), \(after?.id)))
                   OR (NOT \(query.byDistance) AND (created_at, loan_id) < (\(after?.at), \(after?.id))))
            ORDER BY
                CASE WHEN \(query.byDistance) THEN distance_km END ASC,
                CASE WHEN \(query.byDistance) THEN loan_id END ASC,
                created_at DESC, loan_id DESC
            LIMIT \(query.limit + 1)
            """)
        let loans = try rows.prefix(query.limit).map { try LoanResource($0, position: nil) }
        return Page(
            data: loans,
            nextCursor: query.nextCursor(loans, fetched: rows.count, at: \.createdAt, id: \.id.rawValue, km: \.distanceKm))
    }
}

/// A loan as clients read it (SPEC §6).
struct LoanResource: ResponseEncodable {
    var id: LoanID
    var borrowerId: UserID
    var title: String
    var description: String
    var sector: String
    var activity: String
    var country: String
    var location: Location
    var amountCents: Int
    var fundedCents: Int
    var repaidCents: Int
    var stillNeededCents: Int
    var lenderCount: Int
    var status: String
    var deadline: String
    var createdAt: Date
    var updatedAt: Date
    var distanceKm: Double?
    var position: Int64?

    static let columns = """
        loan_id, borrower_id, title, description, sector, activity, country_code, lat, lng, place, amount_cents,
        funded_cents, repaid_cents, lender_count, status, deadline::text AS deadline, created_at, updated_at
        """

    init(_ row: PostgresRow, position: Int64?) throws {
        id = LoanID(try row.decode("loan_id", as: UUID.self))
        borrowerId = UserID(try row.decode("borrower_id", as: UUID.self))
        title = try row.decode("title")
        description = try row.decode("description")
        sector = try row.decode("sector")
        activity = try row.decode("activity")
        country = try row.decode("country_code")
        location = Location(lat: try row.decode("lat"), lng: try row.decode("lng"), place: try row.decode("place"))
        amountCents = try row.decode("amount_cents")
        fundedCents = try row.decode("funded_cents")
        repaidCents = try row.decode("repaid_cents")
        stillNeededCents = max(0, amountCents - fundedCents)
        lenderCount = try row.decode("lender_count")
        status = try row.decode("status")
        deadline = try row.decode("deadline")
        createdAt = try row.decode("created_at")
        updatedAt = try row.decode("updated_at")
        distanceKm = try row.decode("distance_km", as: Double?.self)
        self.position = position
    }
}
