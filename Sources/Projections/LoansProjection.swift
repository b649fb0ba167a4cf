import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres
import UUIDs

/// `loans_view`, `loan_shares_view` and `country_loans_view`: every loan, who lent to it and
/// what they were repaid, and how many loans each country has fundraising.
///
/// Stated once, as a fold over typed rows (`Rows.fold`), as `UsersProjection` is: an append
/// reads the rows its batch touches by key, folds the batch into them, and writes back the
/// rows it changed; a build from the first event holds every row in memory and copies them
/// at its end.
public struct LoansProjection: ReadingProjection {
    public let name = "loans"
    public init() {}

    /// The batch's loans by key (their streams', a posting's) and every loan of a borrower it
    /// forgets; the shares it buys or credits, by key; how many lenders each loan it buys into
    /// has; and the countries of its loans.
    public func reads(_ events: [ProjectedEvent]) -> [PostgresQuery] {
        var loans = Set<LoanID>(), borrowers = Set<UserID>(), buying = Set<LoanID>(), countries = Set<String>()
        var shares = Set<Rows.ShareKey>()
        for event in events {
            if event.type == UserForgotten.eventType, case .forgotten(let forgotten)? = try? Aggregate.user.codec.decode(event) {
                borrowers.insert(forgotten.userID)
                continue
            }
            guard Aggregate.loan.owns(event.streamID) else { continue }
            // A posting names its loan; the fold changes no other loan but the stream's.
            let loan = Aggregate.loan.id(of: event.streamID)
            if let loan { loans.insert(loan) }
            switch try? Aggregate.loan.codec.decode(event) {
            case .posted(let posted):
                loans.insert(posted.loanID)
                countries.insert(posted.countryCode)
            case .sharePurchased(let purchase):
                guard let loan else { break }
                shares.insert(Rows.ShareKey(loan: loan, lender: purchase.lenderID))
                buying.insert(loan)
            case .repaymentRecorded(let recorded):
                guard let loan else { break }
                for credit in recorded.credits { shares.insert(Rows.ShareKey(loan: loan, lender: credit.lenderID)) }
            default:
                break
            }
        }
        guard !loans.isEmpty || !borrowers.isEmpty else { return [] }
        let (touched, forgotten) = (loans.map(\.description), borrowers.map(\.description))
        return [
            """
            SELECT \(unsafeRaw: LoanRow.table.selectList()) FROM loans_view
            WHERE loan_id = ANY (\(touched)::uuid[]) OR borrower_id = ANY (\(forgotten)::uuid[])
            """,
            """
            SELECT \(unsafeRaw: LoanShareRow.table.selectList("s"))
            FROM unnest(\(shares.map(\.loan.description))::uuid[], \(shares.map(\.lender.description))::uuid[]) AS k(loan_id, lender_id)
            JOIN loan_shares_view s ON s.loan_id = k.loan_id AND s.lender_id = k.lender_id
            """,
            """
            SELECT loan_id, count(*)::int AS lenders FROM loan_shares_view
            WHERE loan_id = ANY (\(buying.map(\.description))::uuid[]) GROUP BY loan_id
            """,
            """
            SELECT \(unsafeRaw: CountryLoansRow.table.selectList()) FROM country_loans_view
            WHERE country_code = ANY (\(Array(countries))::text[] || array(SELECT country_code FROM loans_view WHERE loan_id = ANY (\(touched)::uuid[])))
            """,
        ]
    }

    /// The rows `reads` found, the batch folded into them, and what it made or changed of
    /// loans, shares and countries' counts written back (`ViewTable.writeBack`).
    public func apply(_ events: [ProjectedEvent], read: [PostgresRows], _ session: inout PostgresSession) throws {
        guard !read.isEmpty else { return }
        guard read.count == 4 else { throw PostgresError(.decoding, message: "the loans' fold read \(read.count) answers, not 4") }
        let loans = try read[0].map(LoanRow.table.decode)
        let shares = try read[1].map(LoanShareRow.table.decode)
        let countries = try read[3].map(CountryLoansRow.table.decode)
        var rows = Rows()
        for loan in loans {
            rows.loans[loan.id] = HeldLoan(row: loan, created: 0)
            rows.loansByBorrower[loan.borrower, default: []].append(loan.id)
        }
        for share in shares { rows.shares[Rows.ShareKey(loan: share.loan, lender: share.lender)] = HeldShare(row: share, bought: 0) }
        for counted in read[2] { rows.lenders[try counted.decode(0, as: LoanID.self)] = try counted.decode(1, as: Int.self) }
        for country in countries { rows.fundraising[country.country] = country.fundraising }
        for event in events { try rows.fold(event) }

        try LoanRow.table.writeBack(
            rows.loans.values.lazy.map(\.row), before: Dictionary(uniqueKeysWithValues: loans.map { ($0.id, $0) }), key: \.id,
            keyColumns: "loan_id", insert: Self.insertLoans, &session)
        try LoanShareRow.table.writeBack(
            rows.shares.values.lazy.map(\.row),
            before: Dictionary(uniqueKeysWithValues: shares.map { (Rows.ShareKey(loan: $0.loan, lender: $0.lender), $0) }),
            key: { Rows.ShareKey(loan: $0.loan, lender: $0.lender) }, keyColumns: "loan_id", "lender_id", insert: Self.insertShares,
            &session)
        try CountryLoansRow.table.writeBack(
            rows.fundraising.lazy.map { CountryLoansRow(country: $0.key, fundraising: $0.value) },
            before: Dictionary(uniqueKeysWithValues: countries.map { ($0.country, $0) }), key: \.country,
            keyColumns: "country_code", insert: Self.insertCounts, &session)
    }

    /// A build from the first event holds each loan, share and country's count as its row
    /// stands, folded as an append folds it, and writes them once by
    /// `COPY` at its end: each share bought and each repayment was an insert or an update of
    /// a share and of its loan (1.6 s of the writer's 7 s in a 1.0M-event build,
    /// `pg_stat_statements`).
    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Rows()) { known in
            for event in events { try known.fold(event) }
        }
    }

    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Rows()) { known in
            // In the order the log wrote them, as the appends insert them.
            let loans = LoanRow.table.copy(known.loans.values.sorted(by: { $0.created < $1.created }).lazy.map(\.row))
            let shares = LoanShareRow.table.copy(known.shares.values.sorted(by: { $0.bought < $1.bought }).lazy.map(\.row))
            let countries = CountryLoansRow.table.copy(
                known.fundraising.sorted(by: { $0.key < $1.key }).lazy.map { CountryLoansRow(country: $0.key, fundraising: $0.value) })
            known = Rows()
            try session.copy(loans)
            try session.copy(shares)
            try session.copy(countries)
        }
    }

    /// The loans', shares' and countries' rows a fold holds: a batch's, read by key, in an
    /// append; every one, until its end, in a build from the first event.
    struct Rows: Sendable {
        var loans: [LoanID: HeldLoan] = [:]
        /// Each borrower's loans, for their forgetting.
        var loansByBorrower: [UserID: [LoanID]] = [:]
        var shares: [ShareKey: HeldShare] = [:]
        /// How many lenders each loan has: its shares, bought before its posting or after.
        var lenders: [LoanID: Int] = [:]
        /// Each country's fundraising loans.
        var fundraising: [String: Int] = [:]

        struct ShareKey: Hashable, Sendable {
            var loan: LoanID
            var lender: UserID
        }

        /// `event` made to the rows: the projection's one statement of what each event does.
        mutating func fold(_ event: ProjectedEvent) throws {
            if event.type == UserForgotten.eventType, case .forgotten(let forgotten) = try Aggregate.user.codec.decode(event) {
                for id in loansByBorrower[forgotten.userID] ?? [] {
                    change(id, event) { loan in
                        loan.location = Location(lat: 0, lng: 0, place: Redacted.text)
                        loan.title = Redacted.text
                        loan.description = Redacted.text
                        loan.photos = []
                    }
                }
                return
            }
            guard Aggregate.loan.owns(event.streamID) else { return }
            let id = Aggregate.loan.id(of: event.streamID)
            switch try Aggregate.loan.codec.decode(event) {
            case .posted(let posted):
                // Counted in its country even when its id was posted before; the first
                // posting's row stays.
                fundraising[posted.countryCode, default: 0] += 1
                let loan = posted.loanID
                guard loans[loan] == nil else { return }
                loans[loan] = HeldLoan(row: LoanRow(posted: posted, at: event.recordedAt, position: event.position), created: event.position)
                loansByBorrower[posted.borrowerID, default: []].append(loan)
            case .sharePurchased(let purchase):
                guard let id else { return }
                let key = ShareKey(loan: id, lender: purchase.lenderID)
                if shares[key] == nil {
                    shares[key] = HeldShare(
                        row: LoanShareRow(loan: id, lender: purchase.lenderID, firstBoughtAt: event.recordedAt), bought: event.position)
                    lenders[id, default: 0] += 1
                }
                shares[key]!.row.amountCents += purchase.amountCents
                let count = lenders[id] ?? 0
                change(id, event) { loan in
                    loan.fundedCents += purchase.amountCents
                    loan.lenderCount = count
                }
            case .funded:
                leaveFundraising(id, .funded, event)
            case .expired:
                leaveFundraising(id, .expired, event)
            case .takenDown:
                leaveFundraising(id, .takenDown, event)
            case .suspended:
                leaveFundraising(id, .suspended, event)
            case .reinstated:
                guard let id, let loan = loans[id]?.row, loan.status == .suspended else { return }
                fundraising[loan.countryCode, default: 0] += 1
                change(id, event) { $0.status = .fundraising }
            case .photoAdded(let added):
                // No digest: a forgotten borrower's photo, as a replay reads it.
                guard let digest = added.digest else { return }
                guard var photos = id.flatMap({ loans[$0]?.row.photos }), Gallery.add(digest, to: &photos) else { return }
                change(id, event) { $0.photos = photos }
            case .photoRemoved(let removed):
                guard let digest = removed.digest else { return }
                change(id, event) { Gallery.remove(digest, from: &$0.photos) }
            case .repaymentRecorded(let recorded):
                change(id, event) { loan in
                    loan.repaidCents += recorded.amountCents
                    loan.status = .repaying
                }
                guard let id else { return }
                for credit in recorded.credits {
                    shares[ShareKey(loan: id, lender: credit.lenderID)]?.row.repaidCents += credit.amountCents
                }
            case .repaid:
                change(id, event) { $0.status = .repaid }
            }
        }

        /// Out of its country's fundraising count if it was in it, then the new status.
        private mutating func leaveFundraising(_ id: LoanID?, _ status: LoanStatus, _ event: ProjectedEvent) {
            guard let id, let loan = loans[id]?.row else { return }
            if loan.status == .fundraising { fundraising[loan.countryCode, default: 0] -= 1 }
            change(id, event) { $0.status = status }
        }

        /// `body` made to the loan's row, if the log posted it: an update of the appends finds
        /// no row otherwise. Every change of a row sets its time and position.
        private mutating func change(_ id: LoanID?, _ event: ProjectedEvent, _ body: (inout LoanRow) -> Void) {
            guard let id, loans[id] != nil else { return }
            body(&loans[id]!.row)
            loans[id]!.row.updatedAt = event.recordedAt
            loans[id]!.row.position = event.position
        }
    }

    /// A loan of a build as its row stands, and where the log posted it: the order
    /// `finishRebuild` copies the loans in.
    struct HeldLoan: Sendable {
        var row: LoanRow
        let created: Int64
    }

    /// A lender's share of a build, and where the log bought it first.
    struct HeldShare: Sendable {
        var row: LoanShareRow
        let bought: Int64
    }

    /// A loan, share or country's count the fold made.
    static let insertLoans = LoanRow.table.insert("insert loans") { $0 }
    static let insertShares = LoanShareRow.table.insert("insert shares") { $0 }
    static let insertCounts = CountryLoansRow.table.insert("insert country counts") { $0 }
}
