import Aggregates
import Foundation
import Marketplace
import Postgres

/// Reads of `loans_view`, which `LoansProjection` writes.
public struct LoansView: Sendable {
    let pool: PostgresPool

    public init(_ pool: PostgresPool) { self.pool = pool }

    /// The loan; `loan_not_found` when there is none.
    public func loan(_ id: LoanID, position: Int64? = nil) async throws -> LoanResource {
        let rows = try await pool.query(
            """
            SELECT \(unsafeRaw: LoanResource.columns), NULL::float8 AS distance_km FROM \(unsafeRaw: LoanResource.source)
            WHERE loan_id = \(id.rawValue)
            """, prepared: true)
        guard let row = rows.first else { throw DomainError.loanNotFound }
        return try LoanResource(row, position: position)
    }

    /// Fundraising loans (and suspended borrowers') whose deadline is before `today`, the earliest first.
    public func overdue(today: Day) async throws -> [LoanID] {
        try await pool.query(
            """
            SELECT loan_id, deadline FROM loans_view WHERE status = 'fundraising' AND deadline < \(today.sql)::date
            UNION ALL  -- a suspended borrower's too (few: by their partial index)
            SELECT loan_id, deadline FROM loans_view WHERE status = 'suspended' AND deadline < \(today.sql)::date
            ORDER BY deadline, loan_id
            """
        ).map { LoanID(try $0.decode("loan_id", as: UUID.self)) }
    }

    /// Loans, filtered, newest first or nearest first, in keyset pages.
    public func list(_ filter: LoanFilter) async throws -> Page<LoanResource> {
        var filter = filter
        try await filter.listing.resolveSearch(on: pool)
        var filters: [PostgresQuery] = []
        if let country = filter.country { filters.append("country_code = \(country)") }
        if let sector = filter.sector { filters.append("lower(sector) = lower(\(sector))") }
        // A loan an operator took down, or whose borrower is suspended, is in no list (SPEC §12.5).
        filters.append(filter.status.map { "status = \($0.rawValue)" } ?? "status NOT IN ('taken_down', 'suspended')")
        let rows = try await pool.query(
            filter.listing.statement(select: LoanResource.columns, from: LoanResource.source, id: "loan_id", where: filters),
            prepared: filter.listing.isPreparable)
        return try filter.listing.page(rows, at: \.createdAt, id: \.id.rawValue) { try LoanResource($0, position: nil) }
    }
}

/// The loans' own filters, on top of the shared ones.
public struct LoanFilter: Sendable {
    public var listing: MapListing
    /// ISO 3166-1 alpha-2.
    public var country: String?
    public var sector: String?
    public var status: LoanStatus?

    public init(listing: MapListing) { self.listing = listing }
}

/// A loan as clients read it (SPEC §6).
public struct LoanResource: Codable, Sendable {
    public var id: LoanID
    public var borrowerId: UserID
    public var title: String
    public var description: String
    public var sector: String
    public var activity: String
    public var country: String
    public var location: Location
    public var amountCents: Int
    public var fundedCents: Int
    public var repaidCents: Int
    public var stillNeededCents: Int
    public var lenderCount: Int
    public var status: String
    public var deadline: String
    /// The borrower's pictures, in the order added.
    public var photos: [PhotoResource]
    public var createdAt: Date
    public var updatedAt: Date
    public var distanceKm: Double?
    /// Who borrows, as a loan's card shows them: `former user` and no photo once forgotten.
    public var borrowerHandle: String
    public var borrowerDisplayName: String
    public var borrowerPhoto: PhotoResource?
    public var position: Int64?

    static let columns = """
        loan_id, borrower_id, title, description, sector, activity, country_code, lat, lng, place, amount_cents,
        funded_cents, repaid_cents, lender_count, status, deadline::text AS deadline, photos, created_at, updated_at,
        coalesce(borrower_handle, '') AS borrower_handle, coalesce(borrower_display_name, '') AS borrower_display_name,
        borrower_photo
        """

    /// `loans_view` with its borrower joined under names of their own, so that a statement's
    /// other columns (`created_at`, `status`, `earth`) stay the loans'.
    static let source = """
        loans_view LEFT JOIN LATERAL (
            SELECT CASE WHEN u.forgotten_at IS NULL THEN u.handle ELSE '\(Redacted.name)' END AS borrower_handle,
                   u.display_name AS borrower_display_name, CASE WHEN u.forgotten_at IS NULL THEN u.photo END AS borrower_photo
            FROM users_view u WHERE u.user_id = loans_view.borrower_id
        ) borrower ON true
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
        photos = try row.decode("photos", as: [String].self).map(PhotoResource.init)
        createdAt = try row.decode("created_at")
        updatedAt = try row.decode("updated_at")
        distanceKm = try row.decode("distance_km", as: Double?.self)
        borrowerHandle = try row.decode("borrower_handle")
        borrowerDisplayName = try row.decode("borrower_display_name")
        borrowerPhoto = try row.decode("borrower_photo", as: String?.self).map(PhotoResource.init)
        self.position = position
    }
}
