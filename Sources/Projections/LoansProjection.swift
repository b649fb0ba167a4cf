import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// `loans_view`, `loan_shares_view` and `country_loans_view`: every loan, who lent to it and
/// what they were repaid, and how many loans each country has fundraising.
public struct LoansProjection: InlineProjection {
    public let name = "loans"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        var plan = WritePlan()
        for event in events {
            if event.type == UserForgotten.eventType, case .forgotten(let forgotten) = try Aggregate.user.codec.decode(event) {
                // A forgotten borrower's loans stay (lenders' money is in them) without the place,
                // the texts or the photos.
                plan.barrier([
                    """
                    UPDATE loans_view SET lat = 0, lng = 0, place = \(Redacted.text), title = \(Redacted.text),
                           description = \(Redacted.text), photos = '{}', updated_at = \(event.recordedAt),
                           position = \(event.position)
                    WHERE borrower_id = \(forgotten.userID.rawValue)
                    """
                ])
                continue
            }
            guard Aggregate.loan.owns(event.streamID) else { continue }
            let loan = Aggregate.loan.id(of: event.streamID)?.rawValue
            let row = [WritePlan.Row(.loan, loan)]
            let shares = [WritePlan.Row(.loanShares, loan)]
            let at = event.recordedAt
            switch try Aggregate.loan.codec.decode(event) {
            case .posted(let posted):
                plan.add(
                    Self.postLoans, LoanRow.table.values(LoanRow(posted: posted, at: at, position: event.position)),
                    writes: [WritePlan.Row(.loan, posted.loanID.rawValue)])
            case .sharePurchased(let purchase):
                plan.add(Self.buyShares, [loan, purchase.lenderID.rawValue, purchase.amountCents, at], writes: shares)
                // Counts the lenders once the share is written.
                plan.add(Self.fundLoans, [loan, purchase.amountCents, at, event.position], reads: shares, writes: row)
            case .funded:
                plan.add(Self.leaveFundraising, [loan, LoanStatus.funded.rawValue, at, event.position], writes: row)
            case .expired:
                plan.add(Self.leaveFundraising, [loan, LoanStatus.expired.rawValue, at, event.position], writes: row)
            case .takenDown:
                plan.add(Self.leaveFundraising, [loan, LoanStatus.takenDown.rawValue, at, event.position], writes: row)
            case .suspended:
                plan.add(Self.leaveFundraising, [loan, LoanStatus.suspended.rawValue, at, event.position], writes: row)
            case .reinstated:
                plan.add(Self.returnToFundraising, [loan, at, event.position], writes: row)
            case .photoAdded(let added):
                // No digest: a forgotten borrower's photo, as a replay reads it.
                if let digest = added.digest { plan.add([Gallery.loans.add(digest, to: loan, event)], writes: row) }
            case .photoRemoved(let removed):
                if let digest = removed.digest { plan.add([Gallery.loans.remove(digest, from: loan, event)], writes: row) }
            case .repaymentRecorded(let recorded):
                plan.add(Self.recordRepayments, [loan, recorded.amountCents, at, event.position], writes: row)
                if !recorded.credits.isEmpty {
                    plan.add(
                        Self.creditShares, rows: recorded.credits.map { [loan, $0.lenderID.rawValue, $0.amountCents] }, writes: shares)
                }
            case .repaid:
                plan.add(
                    [
                        """
                        UPDATE loans_view SET status = \(LoanStatus.repaid.rawValue), updated_at = \(at), position = \(event.position)
                        WHERE loan_id = \(loan)
                        """
                    ], writes: row)
            }
        }
        try plan.run(&session)
    }

    /// A build from the first event holds each loan, share and country's count as its row
    /// stands, changed in memory as the statements above change it, and writes them once by
    /// `COPY` at its end: each share bought and each repayment was an insert or an update of
    /// a share and of its loan (1.6 s of the writer's 7 s in a 1.0M-event build,
    /// `pg_stat_statements`).
    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Memory()) { known in
            for event in events { try known.fold(event) }
        }
    }

    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Memory()) { known in
            // In the order the log wrote them, as the appends insert them.
            let loans = LoanRow.table.copy(known.loans.values.sorted(by: { $0.created < $1.created }).lazy.map(\.row))
            let shares = LoanShareRow.table.copy(known.shares.values.sorted(by: { $0.bought < $1.bought }).lazy.map(\.row))
            let countries = CountryLoansRow.table.copy(
                known.fundraising.sorted(by: { $0.key < $1.key }).lazy.map { CountryLoansRow(country: $0.key, fundraising: $0.value) })
            known = Memory()
            try session.copy(loans)
            try session.copy(shares)
            try session.copy(countries)
        }
    }

    /// What a build holds until its end.
    struct Memory: Sendable {
        var loans: [UUID: HeldLoan] = [:]
        /// Each borrower's loans, for their forgetting.
        var loansByBorrower: [UUID: [UUID]] = [:]
        var shares: [ShareKey: HeldShare] = [:]
        /// How many lenders each loan has: its shares, bought before its posting or after.
        var lenders: [UUID: Int] = [:]
        /// Each country's fundraising loans.
        var fundraising: [String: Int] = [:]

        struct ShareKey: Hashable, Sendable {
            var loan: UUID
            var lender: UUID
        }

        /// `event` made to the rows, as `apply`'s statements make it.
        mutating func fold(_ event: ProjectedEvent) throws {
            if event.type == UserForgotten.eventType, case .forgotten(let forgotten) = try Aggregate.user.codec.decode(event) {
                for id in loansByBorrower[forgotten.userID.rawValue] ?? [] {
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
            let id = Aggregate.loan.id(of: event.streamID)?.rawValue
            switch try Aggregate.loan.codec.decode(event) {
            case .posted(let posted):
                // Counted in its country even when its id was posted before, as the insert's
                // `ON CONFLICT DO NOTHING` beside the count's upsert.
                fundraising[posted.countryCode, default: 0] += 1
                let loan = posted.loanID.rawValue
                guard loans[loan] == nil else { return }
                loans[loan] = HeldLoan(row: LoanRow(posted: posted, at: event.recordedAt, position: event.position), created: event.position)
                loansByBorrower[posted.borrowerID.rawValue, default: []].append(loan)
            case .sharePurchased(let purchase):
                guard let id else { return }
                let key = ShareKey(loan: id, lender: purchase.lenderID.rawValue)
                if shares[key] == nil {
                    shares[key] = HeldShare(
                        row: LoanShareRow(loan: id, lender: purchase.lenderID.rawValue, firstBoughtAt: event.recordedAt), bought: event.position)
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
                    shares[ShareKey(loan: id, lender: credit.lenderID.rawValue)]?.row.repaidCents += credit.amountCents
                }
            case .repaid:
                change(id, event) { $0.status = .repaid }
            }
        }

        /// Out of its country's fundraising count if it was in it, then the new status.
        private mutating func leaveFundraising(_ id: UUID?, _ status: LoanStatus, _ event: ProjectedEvent) {
            guard let id, let loan = loans[id]?.row else { return }
            if loan.status == .fundraising { fundraising[loan.countryCode, default: 0] -= 1 }
            change(id, event) { $0.status = status }
        }

        /// `body` made to the loan's row, if the log posted it: an update of the appends finds
        /// no row otherwise. Every change of a row sets its time and position.
        private mutating func change(_ id: UUID?, _ event: ProjectedEvent, _ body: (inout LoanRow) -> Void) {
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

    // MARK: Set-based writes, each row found by key (see `ItemsProjection`).

    /// New loans (`LoanRow(posted:)`), fundraising, each counted in its country's fundraising
    /// loans, even one whose id was posted before (beside the insert's `DO NOTHING`).
    static let postLoans = LoanRow.table.insert("post loans") { insert in
        """
        WITH inserted AS (
            \(insert)
            ON CONFLICT (loan_id) DO NOTHING
        )
        INSERT INTO country_loans_view AS c (country_code, fundraising_loans)
        SELECT country, count(*) FROM unnest(\(LoanRow.table.parameter("country_code"))) AS r(country) GROUP BY country
        ON CONFLICT (country_code) DO UPDATE SET fundraising_loans = c.fundraising_loans + excluded.fundraising_loans
        """
    }

    /// Shares bought: a lender's first, or more of the same loan.
    static let buyShares = SetWrite("buy shares", width: 4) { c in
        """
        INSERT INTO loan_shares_view AS s (loan_id, lender_id, amount_cents, first_bought_at)
        SELECT * FROM unnest(\(c[0])::uuid[], \(c[1])::uuid[], \(c[2])::int4[], \(c[3])::timestamptz[])
        ON CONFLICT (loan_id, lender_id) DO UPDATE SET amount_cents = s.amount_cents + excluded.amount_cents
        """
    }

    /// What a share bought adds to its loan, and the loan's lenders counted again.
    static let fundLoans = SetWrite("fund loans", width: 4) { c in
        """
        UPDATE loans_view l
        SET funded_cents = l.funded_cents + r.amount,
            lender_count = (SELECT count(*) FROM loan_shares_view s WHERE s.loan_id = r.loan),
            updated_at = r.at, position = r.position
        FROM unnest(\(c[0])::uuid[], \(c[1])::int4[], \(c[2])::timestamptz[], \(c[3])::int8[]) AS r(loan, amount, at, position)
        WHERE l.loan_id = r.loan AND l.loan_id = ANY (\(c[0])::uuid[])
        """
    }

    /// Loans funded or expired: out of their country's fundraising count (if they were in it),
    /// read in the statement's snapshot, before the new status.
    static let leaveFundraising = SetWrite("leave fundraising", width: 4) { c in
        """
        WITH r AS (
            SELECT * FROM unnest(\(c[0])::uuid[], \(c[1])::text[], \(c[2])::timestamptz[], \(c[3])::int8[])
                 AS r(loan, status, at, position)
        ),
        leaving AS (
            SELECT l.country_code, count(*) AS n
            FROM r, LATERAL (SELECT country_code FROM loans_view WHERE loan_id = r.loan AND status = 'fundraising' OFFSET 0) l
            GROUP BY l.country_code
        ),
        counted AS (
            UPDATE country_loans_view c SET fundraising_loans = c.fundraising_loans - leaving.n
            FROM leaving WHERE c.country_code = leaving.country_code
        )
        UPDATE loans_view l SET status = r.status, updated_at = r.at, position = r.position
        FROM r WHERE l.loan_id = r.loan AND l.loan_id = ANY (\(c[0])::uuid[])
        """
    }

    /// A suspended borrower's loans back in their countries' counts and lists.
    static let returnToFundraising = SetWrite("return to fundraising", width: 3) { c in
        """
        WITH r AS (
            SELECT * FROM unnest(\(c[0])::uuid[], \(c[1])::timestamptz[], \(c[2])::int8[]) AS r(loan, at, position)
        ),
        coming AS (
            SELECT l.country_code, count(*) AS n
            FROM r, LATERAL (SELECT country_code FROM loans_view WHERE loan_id = r.loan AND status = 'suspended' OFFSET 0) l
            GROUP BY l.country_code
        ),
        counted AS (
            INSERT INTO country_loans_view (country_code, fundraising_loans)
            SELECT country_code, n FROM coming
            ON CONFLICT (country_code) DO UPDATE SET fundraising_loans = country_loans_view.fundraising_loans + excluded.fundraising_loans
        )
        UPDATE loans_view l SET status = 'fundraising', updated_at = r.at, position = r.position
        FROM r WHERE l.loan_id = r.loan AND l.status = 'suspended' AND l.loan_id = ANY (\(c[0])::uuid[])
        """
    }

    static let recordRepayments = SetWrite("record repayments", width: 4) { c in
        """
        UPDATE loans_view l SET repaid_cents = l.repaid_cents + r.amount, status = 'repaying', updated_at = r.at, position = r.position
        FROM unnest(\(c[0])::uuid[], \(c[1])::int4[], \(c[2])::timestamptz[], \(c[3])::int8[]) AS r(loan, amount, at, position)
        WHERE l.loan_id = r.loan AND l.loan_id = ANY (\(c[0])::uuid[])
        """
    }

    /// Each lender's part of a repayment.
    static let creditShares = SetWrite("credit shares", width: 3) { c in
        """
        UPDATE loan_shares_view s SET repaid_cents = s.repaid_cents + r.amount
        FROM unnest(\(c[0])::uuid[], \(c[1])::uuid[], \(c[2])::int8[]) AS r(loan, lender, amount)
        WHERE s.loan_id = r.loan AND s.lender_id = r.lender AND s.loan_id = ANY (\(c[0])::uuid[])
        """
    }
}
