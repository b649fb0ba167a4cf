import Foundation
import Hummingbird
import Marketplace
import Projections

/// Reads the query parameters every list of things on the map shares (SPEC §5): `q`, `near`,
/// `radiusKm`, `bbox`, `sort`, `updatedSince`, `limit`, `cursor`. Every bad one is collected in
/// `problems`, so that a list answers one 422 naming them all.
struct ListQuery {
    var listing = MapListing()
    var problems: [FieldError] = []

    private let parameters: [String: String]

    init(_ request: Request) { self.init(request.uri.formParameters) }

    /// The parameters as a query string carries them (the first of a name counts).
    init(_ pairs: [(name: String, value: String)]) {
        var parameters = [String: String]()
        for (name, value) in pairs where parameters[name] == nil {
            // Composed (NFC), as every text is stored: `café` typed either way finds the other.
            parameters[name] = value.utf8.contains(where: { $0 >= 0x80 }) ? value.precomposedStringWithCanonicalMapping : value
        }
        self.parameters = parameters
        if let q = text("q") {
            if q.count > Self.maxQueryLength {
                bad("q", "q_too_long", "at most \(Self.maxQueryLength) characters")
            } else {
                listing.words = Self.words(q)
            }
        }
        if let value = text("near") {
            let parts = value.split(separator: ",").map { Double($0.trimmingWhiteSpace(newlines: false)) }
            if parts.count == 2, let lat = parts[0], let lng = parts[1], (-90...90).contains(lat), (-180...180).contains(lng) {
                listing.near = (lat, lng)
            } else {
                bad("near", "invalid_point", "lat,lng with lat -90..90 and lng -180..180")
            }
        }
        if let value = text("radiusKm") {
            if let radius = Double(value), radius >= 0.001, radius <= 20_000 { listing.radiusKm = radius } else {
                bad("radiusKm", "invalid_radius", "kilometres, from 0.001 to 20000")
            }
            if text("near") == nil { bad("radiusKm", "needs_near", "radiusKm needs near") }
        }
        if let value = text("bbox") {
            // Plain decimals only, as the document's pattern says (no exponents, no spaces).
            let parts = value.split(separator: ",", omittingEmptySubsequences: false).map { part in
                part.allSatisfy { "-.0123456789".contains($0) } ? Double(part) : nil
            }
            if parts.count == 4, let minLng = parts[0], let minLat = parts[1], let maxLng = parts[2], let maxLat = parts[3],
                (-180...180).contains(minLng), (-180...180).contains(maxLng), (-90...90).contains(minLat),
                (-90...90).contains(maxLat), minLat <= maxLat
            {
                listing.box = (minLng, minLat, maxLng, maxLat)
            } else {
                bad(
                    "bbox", "invalid_bbox",
                    "minLng,minLat,maxLng,maxLat with lng -180..180 and lat -90..90, minLat at most maxLat (minLng above maxLng crosses the antimeridian)")
            }
        }
        switch text("sort").map({ ListSort(rawValue: $0) }) {
        case nil:
            // With words, the most relevant first (SPEC §12.7).
            listing.sort = listing.words.isEmpty ? .newest : .relevance
        case .some(.some(let sort)):
            listing.sort = sort
            if sort == .distance, text("near") == nil { bad("sort", "needs_near", "sort=distance needs near") }
            if sort == .relevance, listing.words.isEmpty, text("q").map({ $0.count <= Self.maxQueryLength }) ?? true {
                bad("sort", "relevance_needs_q", "sort=relevance needs words to search for (q)")
            }
        case .some(.none):
            bad("sort", "invalid_sort", ListSort.allCases.map(\.rawValue).joined(separator: ", "))
        }
        if let value = text("updatedSince") {
            listing.updatedSince = RFC3339.date(value)
            if listing.updatedSince == nil { bad("updatedSince", "invalid_time", "an RFC 3339 time, from 1900 to 2200") }
        }
        if let value = text("limit") {
            if let limit = Int(value), (1...100).contains(limit) { listing.limit = limit } else {
                bad("limit", "out_of_range", "a number from 1 to 100")
            }
        }
        do { listing.cursor = try Cursor(query: text("cursor")) } catch {
            bad("cursor", "invalid_cursor", "not a cursor this server gave")
        }
        if let cursor = listing.cursor {
            let matches =
                switch listing.sort {
                case .distance: cursor.sortChordKm != nil && cursor.sort == nil
                case .newest: cursor.sort == nil
                default: cursor.sort == listing.sort.rawValue && cursor.value != nil
                }
            if !matches { bad("cursor", "invalid_cursor", "a cursor of another sort") }
        }
    }

    /// `q` longer than this is refused (`q_too_long`): a renter types a few words.
    static let maxQueryLength = 200

    /// The words of `q`: its runs of letters and digits (so no punctuation, operator or NUL of
    /// it reaches the search), at most ten.
    static func words(_ q: String) -> [String] {
        q.split(whereSeparator: { !($0.isLetter || $0.isNumber) }).prefix(10).map(String.init)
    }

    /// Refuses the orders `allowed` does not hold (the loans have no price or rating).
    mutating func allowSorts(_ allowed: Set<ListSort>) {
        guard let given = text("sort"), let sort = ListSort(rawValue: given), !allowed.contains(sort) else { return }
        bad("sort", "invalid_sort", allowed.map(\.rawValue).sorted().joined(separator: ", "))
    }

    /// The first value of a parameter.
    func text(_ name: String) -> String? { parameters[name] }

    mutating func bad(_ field: String, _ code: String, _ message: String) {
        problems.append(FieldError(field: field, code: code, message: message))
    }

    func throwIfAny() throws {
        if !problems.isEmpty { throw DomainError.invalid(problems) }
    }

    /// A country parameter: an ISO 3166-1 alpha-2 code, upper-cased.
    mutating func country(_ name: String) -> String? {
        guard let value = text(name) else { return nil }
        if !Countries.alpha2.contains(value.uppercased()) { bad(name, "invalid_country", "an ISO 3166-1 alpha-2 code, like NP") }
        return value.uppercased()
    }
}

extension Request {
    /// `limit`: 1 to 100, 20 by default; anything else is a 422.
    func pageLimit() throws -> Int {
        var problems: [FieldError] = []
        let limit = pageLimit(1...100, default: 20, problems: &problems)
        if !problems.isEmpty { throw DomainError.invalid(problems) }
        return limit
    }

    /// `cursor` of a list paged by log position, newest first: the position to read before
    /// (nil without one); anything but a positive number is a 422.
    func positionCursor() throws -> Int64? {
        try uri.queryParameters["cursor"].map(String.init).map { text in
            guard let position = Int64(text), position > 0 else {
                throw DomainError.invalid([FieldError(field: "cursor", code: "invalid_cursor", message: "not a cursor of this list")])
            }
            return position
        }
    }

    /// `limit` within `range`, `fallback` without one; a bad one is added to `problems`, for a
    /// list that names every bad parameter in one 422.
    func pageLimit(_ range: ClosedRange<Int>, default fallback: Int, problems: inout [FieldError]) -> Int {
        guard let text = uri.queryParameters["limit"].map(String.init) else { return fallback }
        guard let limit = Int(text), range.contains(limit) else {
            problems.append(
                FieldError(
                    field: "limit", code: "out_of_range",
                    message: "a number from \(range.lowerBound) to \(range.upperBound)"))
            return fallback
        }
        return limit
    }
}
