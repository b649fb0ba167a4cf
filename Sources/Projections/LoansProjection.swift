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
        for event in events {
            if event.type == UserForgotten.eventType, case .forgotten(let forgotten) = try Aggregate.user.codec.decode(event) {
                // A forgotten borrower's loans stay (lenders' money is in them) without the place
                // or the photos.
                try session.query(
                    """
                    UPDATE loans_view SET lat = 0, lng = 0, place = \(Redacted.text), photos = '{}', updated_at = \(event.recordedAt),
                           position = \(event.position)
                    WHERE borrower_id = \(forgotten.userID.rawValue)
                    """, prepared: true)
                continue
            }
            guard Aggregate.loan.owns(event.streamID) else { continue }
            let loan = UUID(uuidString: String(event.streamID.rawValue.dropFirst("loan-".count)))
            let at = event.recordedAt
            switch try Aggregate.loan.codec.decode(event) {
            case .posted(let posted):
                try session.query(
                    """
                    INSERT INTO loans_view (loan_id, borrower_id, title, description, sector, activity, country_code,
                                            lat, lng, place, amount_cents, status, deadline, created_at, updated_at, position)
                    VALUES (\(posted.loanID.rawValue), \(posted.borrowerID.rawValue), \(posted.title), \(posted.description),
                            \(posted.sector), \(posted.activity), \(posted.countryCode), \(posted.location.lat),
                            \(posted.location.lng), \(posted.location.place), \(posted.amountCents), 'fundraising',
                            \(posted.deadline.description)::date, \(at), \(at), \(event.position))
                    ON CONFLICT (loan_id) DO NOTHING
                    """, prepared: true)
                try session.query(
                    """
                    INSERT INTO country_loans_view (country_code, fundraising_loans) VALUES (\(posted.countryCode), 1)
                    ON CONFLICT (country_code) DO UPDATE SET fundraising_loans = country_loans_view.fundraising_loans + 1
                    """, prepared: true)
            case .sharePurchased(let purchase):
                try session.query(
                    """
                    INSERT INTO loan_shares_view (loan_id, lender_id, amount_cents, first_bought_at)
                    VALUES (\(loan), \(purchase.lenderID.rawValue), \(purchase.amountCents), \(at))
                    ON CONFLICT (loan_id, lender_id)
                    DO UPDATE SET amount_cents = loan_shares_view.amount_cents + excluded.amount_cents
                    """, prepared: true)
                try session.query(
                    """
                    UPDATE loans_view
                    SET funded_cents = funded_cents + \(purchase.amountCents),
                        lender_count = (SELECT count(*) FROM loan_shares_view WHERE loan_id = \(loan)),
                        updated_at = \(at), position = \(event.position)
                    WHERE loan_id = \(loan)
                    """, prepared: true)
            case .funded:
                try leaveFundraising(&session, loan, to: .funded, event)
            case .expired:
                try leaveFundraising(&session, loan, to: .expired, event)
            case .photoAdded(let added):
                // No digest: a forgotten borrower's photo, as a replay reads it.
                if let digest = added.digest { try session.query(Gallery.loans.add(digest, to: loan, event), prepared: true) }
            case .photoRemoved(let removed):
                if let digest = removed.digest { try session.query(Gallery.loans.remove(digest, from: loan, event), prepared: true) }
            case .repaymentRecorded(let recorded):
                try session.query(
                    """
                    UPDATE loans_view SET repaid_cents = repaid_cents + \(recorded.amountCents), status = 'repaying',
                        updated_at = \(at), position = \(event.position)
                    WHERE loan_id = \(loan)
                    """, prepared: true)
                try session.query(
                    """
                    UPDATE loan_shares_view s SET repaid_cents = s.repaid_cents + c.amount
                    FROM unnest(\(recorded.credits.map { $0.lenderID.description })::uuid[],
                                \(recorded.credits.map(\.amountCents))::int8[]) AS c(lender, amount)
                    WHERE s.loan_id = \(loan) AND s.lender_id = c.lender
                    """, prepared: true)
            case .repaid:
                try setStatus(&session, loan, .repaid, event)
            }
        }
    }

    private func leaveFundraising(_ session: inout PostgresSession, _ loan: UUID?, to status: LoanStatus, _ event: ProjectedEvent) throws {
        try session.query(
            """
            UPDATE country_loans_view SET fundraising_loans = fundraising_loans - 1
            WHERE country_code = (SELECT country_code FROM loans_view WHERE loan_id = \(loan) AND status = 'fundraising')
            """, prepared: true)
        try setStatus(&session, loan, status, event)
    }

    private func setStatus(_ session: inout PostgresSession, _ loan: UUID?, _ status: LoanStatus, _ event: ProjectedEvent) throws {
        try session.query(
            """
            UPDATE loans_view SET status = \(status.rawValue), updated_at = \(event.recordedAt), position = \(event.position)
            WHERE loan_id = \(loan)
            """, prepared: true)
    }
}

/// `cart_lines_view`: each user's cart, line by line.
public struct CartsProjection: InlineProjection {
    public let name = "carts"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        for event in events where Aggregate.cart.owns(event.streamID) {
            let user = UUID(uuidString: String(event.streamID.rawValue.dropFirst("cart-".count)))
            switch try Aggregate.cart.codec.decode(event) {
            case .itemAdded(let added):
                try session.query(
                    """
                    INSERT INTO cart_lines_view (user_id, loan_id, amount_cents, added_at, position)
                    VALUES (\(user), \(added.loanID.rawValue), \(added.amountCents), \(event.recordedAt), \(event.position))
                    ON CONFLICT (user_id, loan_id) DO NOTHING
                    """, prepared: true)
            case .amountChanged(let changed):
                try session.query(
                    """
                    UPDATE cart_lines_view SET amount_cents = \(changed.amountCents)
                    WHERE user_id = \(user) AND loan_id = \(changed.loanID.rawValue)
                    """, prepared: true)
            case .itemRemoved(let removed):
                try session.query(
                    "DELETE FROM cart_lines_view WHERE user_id = \(user) AND loan_id = \(removed.loanID.rawValue)",
                    prepared: true)
            case .cleared, .checkedOut:
                try session.query("DELETE FROM cart_lines_view WHERE user_id = \(user)", prepared: true)
            }
        }
    }
}
