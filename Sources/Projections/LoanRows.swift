import Foundation
import Marketplace
import Postgres

/// A row of `loans_view`: a loan as the log leaves it. `table` is its one declaration.
struct LoanRow: Sendable, Equatable {
    var id = LoanID.none
    var borrower = UserID.none
    var title = ""
    var description = ""
    var sector = ""
    var activity = ""
    var countryCode = ""
    var location = Location(lat: 0, lng: 0, place: "")
    var amountCents = 0
    var fundedCents = 0
    var repaidCents = 0
    var lenderCount = 0
    var status = LoanStatus.fundraising
    var deadline = Day(year: 2000, month: 1, day: 1)!
    var createdAt = Date(timeIntervalSince1970: 0)
    var updatedAt = Date(timeIntervalSince1970: 0)
    var position: Int64 = 0
    var photos: [String] = []

    static let table = ViewTable<LoanRow>(
        "loans_view", blank: LoanRow(),
        [
            ViewColumn("loan_id", "uuid", \.id),
            ViewColumn("borrower_id", "uuid", \.borrower),
            ViewColumn("title", "text", \.title),
            ViewColumn("description", "text", \.description),
            ViewColumn("sector", "text", \.sector),
            ViewColumn("activity", "text", \.activity),
            ViewColumn("country_code", "text", \.countryCode),
            ViewColumn("lat", "double precision", \.location.lat),
            ViewColumn("lng", "double precision", \.location.lng),
            ViewColumn("place", "text", \.location.place),
            ViewColumn("amount_cents", "integer", \.amountCents),
            ViewColumn("funded_cents", "integer", \.fundedCents),
            ViewColumn("repaid_cents", "integer", \.repaidCents),
            ViewColumn("lender_count", "integer", \.lenderCount),
            ViewColumn("status", \.status),
            ViewColumn("deadline", day: \.deadline),
            ViewColumn("created_at", "timestamp with time zone", \.createdAt),
            ViewColumn("updated_at", "timestamp with time zone", \.updatedAt),
            ViewColumn("position", "bigint", \.position),
            ViewColumn("photos", "text[]", \.photos),
        ])

    /// A loan as its posting makes it, fundraising: what the appends insert and a rebuild holds.
    init(posted: LoanPosted, at recordedAt: Date, position: Int64) {
        (id, borrower, title, description) = (posted.loanID, posted.borrowerID, posted.title, posted.description)
        (sector, activity, countryCode, location) = (posted.sector, posted.activity, posted.countryCode, posted.location)
        (amountCents, deadline) = (posted.amountCents, posted.deadline)
        (createdAt, updatedAt, self.position) = (recordedAt, recordedAt, position)
    }

    init() {}
}

/// A row of `loan_shares_view`: what one lender lent a loan, and was repaid.
struct LoanShareRow: Sendable, Equatable {
    var loan = LoanID.none
    var lender = UserID.none
    var amountCents = 0
    var repaidCents = 0
    var firstBoughtAt = Date(timeIntervalSince1970: 0)

    static let table = ViewTable<LoanShareRow>(
        "loan_shares_view", blank: LoanShareRow(),
        [
            ViewColumn("loan_id", "uuid", \.loan),
            ViewColumn("lender_id", "uuid", \.lender),
            ViewColumn("amount_cents", "integer", \.amountCents),
            ViewColumn("repaid_cents", "integer", \.repaidCents),
            ViewColumn("first_bought_at", "timestamp with time zone", \.firstBoughtAt),
        ])
}

/// A row of `country_loans_view`: a country's fundraising loans.
struct CountryLoansRow: Sendable, Equatable {
    var country = ""
    var fundraising = 0

    static let table = ViewTable<CountryLoansRow>(
        "country_loans_view", blank: CountryLoansRow(),
        [
            ViewColumn("country_code", "text", \.country),
            ViewColumn("fundraising_loans", "integer", \.fundraising),
        ])
}
