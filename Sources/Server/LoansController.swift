import Aggregates
import Foundation
import Hummingbird
import Marketplace
import Projections
import UseCases

/// Loans: `POST /v1/loans`, `GET /v1/loans`, `GET /v1/loans/{loanId}`, and
/// `POST /v1/loans/{loanId}/repayments`. Shares are bought only by checkout (`CartController`).
struct LoansController: Sendable {
    let gateway: CommandGateway
    let repayments: Repayments
    /// A loan answered after a command comes from the primary.
    let loans: LoansView
    /// Lists may come from a replica.
    let lists: Replicated<LoansView>
    /// The server's day, as every controller decides on it (`buildApplication`'s `today`): a
    /// repayment's card is checked on it. A loan's deadline is not: loans expire on the
    /// machine's day (`lender loans expire` refuses an earlier one), so it is counted from it.
    let today: @Sendable () -> Day

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
        var credits: [Repayments.Credit]
        /// The borrower's balance after the repayment.
        var balanceCents: Int
        var availableCents: Int?
        var loan: LoanResource
        var position: Int64?
    }

    @Sendable func postLoan(_ request: Request, context: UserContext) async throws -> EditedResponse<LoanResource> {
        let body = try await request.decodeBody(LoanBody.self, context: context)
        var fields = FieldCheck()
        let parsedLocation = fields.location(body.location)
        let parsedDeadline = fields.day(body.deadline, "deadline", required: true)
        fields.require(
            ("title", body.title), ("sector", body.sector), ("activity", body.activity), ("country", body.country),
            ("amountCents", body.amountCents))
        fields.alongside(
            LoanDecider.givenFieldProblems(
                title: body.title, description: body.description, country: body.country, amountCents: body.amountCents))
        let (title, sector, activity, country, location, amountCents, deadline) = try fields.checked(
            body.title, body.sector, body.activity, body.country, parsedLocation, body.amountCents, parsedDeadline)
        let posted = LoanPosted(
            loanID: LoanID(), borrowerID: context.user, title: title, description: body.description ?? "",
            sector: sector, activity: activity, countryCode: country, location: location,
            amountCents: amountCents, deadline: deadline)
        let handled = try await gateway.handle(
            .post(posted, today: Day(Date())), on: .loan, id: posted.loanID, actor: context.user, first: .newStream)
        // Named by the state: a repeated request answers the first one's loan.
        guard let loanID = handled.state.loanID else { throw DomainError.loanNotFound }
        return EditedResponse(status: .created, response: try await loans.loan(loanID, position: handled.append?.lastPosition))
    }

    @Sendable func recordRepayment(_ request: Request, context: UserContext) async throws -> EditedResponse<Repayment> {
        let loanID = LoanID(try context.parameters.requireUUID("loanID"))
        let body = try await request.decodeBody(RepaymentBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("amountCents", body.amountCents), ("payWith", body.payWith))
        let cardID = fields.payingCard(body.payWith, body.cardId)
        let amountCents = try fields.checked(body.amountCents)
        let (outcome, append) = try await repayments.repay(
            amountCents, on: loanID, by: context.user, paying: cardID, today: today())
        return EditedResponse(
            status: .created,
            response: Repayment(
                amountCents: outcome.amountCents, paidWith: outcome.paidWith, credits: outcome.credits,
                balanceCents: outcome.balanceCents, availableCents: outcome.availableCents, loan: try await loans.loan(loanID, position: append?.lastPosition),
                position: append?.lastPosition))
    }

    @Sendable func loan(_ request: Request, context: UserContext) async throws -> LoanResource {
        try await loans.loan(LoanID(try context.parameters.requireUUID("loanID")))
    }

    @Sendable func list(_ request: Request, context: UserContext) async throws -> Page<LoanResource> {
        var query = ListQuery(request)
        query.allowSorts([.newest, .distance, .relevance])
        var filter = LoanFilter(listing: query.listing)
        filter.country = query.country("country")
        filter.sector = query.text("sector")
        if let value = query.text("status") {
            filter.status = LoanStatus(rawValue: value).flatMap { [.takenDown, .suspended].contains($0) ? nil : $0 }
            if filter.status == nil { query.bad("status", "invalid_status", "fundraising, funded, repaying, repaid or expired") }
        }
        try query.throwIfAny()
        return try await lists.on(context).list(filter)
    }
}
