import Foundation
import Hummingbird
import Marketplace

/// The query parameters every list of things on the map shares (SPEC §5): `q`, `near`,
/// `radiusKm`, `sort`, `updatedSince`, `limit`, `cursor`. Every bad one is collected in
/// `problems`, so that a list answers one 422 naming them all.
struct ListQuery {
    var words: [String] = []
    var near: (lat: Double, lng: Double)?
    var radiusKm: Double?
    var byDistance = false
    var updatedSince: Date?
    var limit = 20
    var cursor: Cursor?
    var problems: [FieldError] = []

    private let parameters: [String: String]

    init(_ request: Request) {
        var parameters = [String: String]()
        for (name, value) in request.uri.formParameters where parameters[name] == nil {
            parameters[name] = value
        }
        self.parameters = parameters
        words = (text("q") ?? "").split(whereSeparator: \.isWhitespace).prefix(10).map(String.init)
        if let value = text("near") {
            let parts = value.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
            if parts.count == 2, let lat = parts[0], let lng = parts[1], (-90...90).contains(lat), (-180...180).contains(lng) {
                near = (lat, lng)
            } else {
                bad("near", "invalid_point", "lat,lng with lat -90..90 and lng -180..180")
            }
        }
        if let value = text("radiusKm") {
            if let radius = Double(value), radius >= 0.001, radius <= 20_000 { radiusKm = radius } else {
                bad("radiusKm", "invalid_radius", "kilometres, from 0.001 to 20000")
            }
            if text("near") == nil { bad("radiusKm", "needs_near", "radiusKm needs near") }
        }
        switch text("sort") {
        case nil, "newest": byDistance = false
        case "distance":
            byDistance = true
            if text("near") == nil { bad("sort", "needs_near", "sort=distance needs near") }
        default: bad("sort", "invalid_sort", "newest or distance")
        }
        if let value = text("updatedSince") {
            updatedSince = RFC3339.date(value)
            if updatedSince == nil { bad("updatedSince", "invalid_time", "an RFC 3339 time, from 1900 to 2200") }
        }
        do { limit = try request.pageLimit() } catch { bad("limit", "out_of_range", "a number from 1 to 100") }
        do { cursor = try Cursor(query: text("cursor")) } catch {
            bad("cursor", "invalid_cursor", "not a cursor this server gave")
        }
        if byDistance, cursor != nil, cursor?.km == nil { bad("cursor", "invalid_cursor", "a cursor of another sort") }
    }

    /// The first value of a parameter.
    func text(_ name: String) -> String? { parameters[name] }

    mutating func bad(_ field: String, _ code: String, _ message: String) {
        problems.append(FieldError(field: field, code: code, message: message))
    }

    func throwIfAny() throws {
        if !problems.isEmpty { throw Problem(DomainError.invalid(problems)) }
    }

    /// `%word%` for ILIKE, with the pattern characters of the word escaped.
    var titlePatterns: [String] {
        words.map { word in
            "%" + word.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
                .replacingOccurrences(of: "_", with: "\\_") + "%"
        }
    }

    /// The cursor after the last row of a full page, or nil at the end.
    func nextCursor<Row>(_ rows: [Row], fetched: Int, at: (Row) -> Date, id: (Row) -> UUID, km: (Row) -> Double?) -> String? {
        guard fetched > limit, let last = rows.last else { return nil }
        return Cursor(at: at(last), id: id(last), km: byDistance ? km(last) : nil).encoded
    }
}
