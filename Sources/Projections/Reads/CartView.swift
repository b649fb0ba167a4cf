import Foundation
import Marketplace
import Postgres

/// Reads of `cart_lines_view`, which `CartsProjection` writes, beside `loans_view`.
public struct CartView: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    /// The cart: each line with what its loan still needs and, when the line no longer fits,
    /// why (the same rule checkout applies). Prepared: every cart command answers with it, and
    /// unprepared it was planned at every call, 118 µs (`pg_stat_statements`, cart_checkout).
    public func cart(of user: UserID, position: Int64? = nil) async throws -> CartResource {
        let rows = try await pool.query(
            """
            SELECT c.loan_id, c.amount_cents, l.title, l.status, l.amount_cents - l.funded_cents AS still_needed,
                   l.photos[1] AS photo
            FROM cart_lines_view c LEFT JOIN loans_view l USING (loan_id)
            WHERE c.user_id = \(user.rawValue)
            ORDER BY c.position, c.loan_id
            """, prepared: true)
        let lines = try rows.map { row in
            let amount: Int = try row.decode("amount_cents")
            let status = try row.decode("status", as: String?.self).flatMap(LoanStatus.init(rawValue:))
            let stillNeeded = try row.decode("still_needed", as: Int?.self) ?? 0
            return CartResource.Line(
                loanId: LoanID(try row.decode("loan_id", as: UUID.self)), title: try row.decode("title", as: String?.self) ?? "",
                amountCents: amount, stillNeededCents: max(0, stillNeeded),
                photo: try row.decode("photo", as: String?.self).map(PhotoResource.init),
                problem: status.map { CartDecider.problem(amountCents: amount, status: $0, stillNeededCents: stillNeeded) }
                    ?? DomainError.loanNotFound.code)
        }
        return CartResource(lines: lines, totalCents: lines.reduce(0) { $0 + $1.amountCents }, position: position)
    }
}

/// A cart as clients read it (SPEC §6).
public struct CartResource: Codable, Sendable {
    public struct Line: Codable, Sendable {
        public var loanId: LoanID
        public var title: String
        public var amountCents: Int
        public var stillNeededCents: Int
        /// The loan's first photo, for the line's thumbnail.
        public var photo: PhotoResource?
        public var problem: String?

        // `problem` is always present, null when the line fits.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(loanId, forKey: .loanId)
            try container.encode(title, forKey: .title)
            try container.encode(amountCents, forKey: .amountCents)
            try container.encode(stillNeededCents, forKey: .stillNeededCents)
            try container.encode(photo, forKey: .photo)
            try container.encode(problem, forKey: .problem)
        }
    }

    public var lines: [Line]
    public var totalCents: Int
    public var position: Int64?
}
