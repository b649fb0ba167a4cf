import Foundation
import Postgres
import Marketplace

/// `{ "data": [...], "nextCursor": ... }`, the shape of every list.
public struct Page<Element: Encodable & Sendable>: Encodable, Sendable {
    public var data: [Element]
    public var nextCursor: String?

    public init(data: [Element], nextCursor: String?) {
        self.data = data
        self.nextCursor = nextCursor
    }

    // `nextCursor` is always there: null on the last page.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(data, forKey: .data)
        try container.encode(nextCursor, forKey: .nextCursor)
    }

    enum CodingKeys: String, CodingKey { case data, nextCursor }
}

// Read back by Swift clients of the API, such as the HTTP tests.
extension Page: Decodable where Element: Decodable {}

/// How many rows a list reads for a page.
public enum PageSize {
    /// The sizes a list's statement is written for.
    static let steps = [10, 20, 50, 100]

    /// One more than the least step that holds `limit` (or `limit` itself, past them): the
    /// page keeps `limit` rows, and one after them says there are more. A page's `LIMIT` is
    /// written into its statement (`\(literal:)`) so that its generic plan is priced for the
    /// page. Were each size its own statement, a client asking for each of 1…100 would make a
    /// connection prepare a hundred statements a list and, past 256 (`preparedLimit`), forget
    /// the hot ones with its own; in steps, a list has four.
    public static func rowsRead(_ limit: Int) -> Int {
        (steps.first { $0 >= limit } ?? limit) + 1
    }
}

/// An opaque keyset position: the sort key and id of the last row a page held. Stable while
/// rows arrive: the next page starts strictly after it, so none is seen twice or skipped.
public struct Cursor: Codable, Sendable {
    public var at: Date
    public var id: UUID
    /// When the list is sorted by distance: the last row's straight-line distance from the
    /// point, in kilometres, exactly as the index orders by it (`earth <-> point`).
    public var chordKm: Double?
    /// The great-circle distance cursors of before `chordKm` held; read, never written.
    var km: Double?
    /// The sort key of a list ordered by text (countries by name).
    public var key: String?
    /// The order a list by relevance, price or rating was in (`ListSort`), and the last row's
    /// value of it, exactly as the statement ordered by it.
    public var sort: String?
    public var value: Double?

    /// The sort distance to page on after this row.
    public var sortChordKm: Double? { chordKm ?? km.map(Earth.chord(ofArcKm:)) }

    public var encoded: String { Self.base64URL(json) }

    /// The JSON inside: written out for a list's cursor, which every full page of the market
    /// makes (JSONEncoder was 2% of the market's CPU, `perf`); by JSONEncoder when a text key
    /// needs escaping. Both read back alike, through JSONDecoder.
    var json: Data {
        guard key == nil, km == nil, sort == nil, chordKm?.isFinite ?? true else {
            return (try? JSONEncoder.cursor.encode(self)) ?? Data()
        }
        var text = #"{"at":"# + String(Self.microseconds(at)) + #","id":""# + id.uuidString + #"""#
        // `description` is the shortest text that reads back as the same Double.
        if let chordKm { text += #","chordKm":"# + chordKm.description }
        text += "}"
        return Data(text.utf8)
    }

    /// Microseconds since 1970, as PostgreSQL keeps a time, so that a cursor compares exactly.
    static func microseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1_000_000).rounded()) }

    /// Base64url without padding (RFC 4648 §5), mapped byte by byte: Foundation's string
    /// replacing goes through NSString, and cost a page of `GET /v1/me` 7% of its CPU.
    public static func base64URL(_ data: Data) -> String {
        var base64 = [UInt8](data.base64EncodedData())
        while base64.last == UInt8(ascii: "=") { base64.removeLast() }
        for index in base64.indices {
            switch base64[index] {
            case UInt8(ascii: "+"): base64[index] = UInt8(ascii: "-")
            case UInt8(ascii: "/"): base64[index] = UInt8(ascii: "_")
            default: break
            }
        }
        return String(decoding: base64, as: UTF8.self)
    }

    /// The bytes of base64url text, padded or not; nil for anything else.
    public static func base64URLDecoded(_ text: String) -> Data? {
        var base64 = [UInt8](text.utf8).map { byte in
            switch byte {
            case UInt8(ascii: "-"): UInt8(ascii: "+")
            case UInt8(ascii: "_"): UInt8(ascii: "/")
            default: byte
            }
        }
        base64 += repeatElement(UInt8(ascii: "="), count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: Data(base64))
    }

    public init(at: Date, id: UUID, chordKm: Double? = nil, key: String? = nil, sort: String? = nil, value: Double? = nil) {
        self.at = at
        self.id = id
        self.chordKm = chordKm
        self.key = key
        self.sort = sort
        self.value = value
    }

    /// nil for no cursor; a 422 naming `cursor` for one that is not ours.
    public init?(query text: String?) throws {
        guard let text, !text.isEmpty else { return nil }
        guard let data = Self.base64URLDecoded(text), let cursor = try? JSONDecoder.cursor.decode(Cursor.self, from: data),
            RFC3339.range.contains(cursor.at), cursor.sortChordKm.map({ $0.isFinite && $0 >= 0 }) ?? true,
            cursor.value?.isFinite ?? true, cursor.sort.map({ ListSort(rawValue: $0)?.byValue ?? false }) ?? true,
            // A hand-made key with a NUL would reach PostgreSQL, whose text cannot hold one.
            !(cursor.key?.unicodeScalars.contains { $0.value == 0 } ?? false)
        else {
            throw DomainError.invalid([FieldError(field: "cursor", code: "invalid_cursor", message: "not a cursor this server gave")])
        }
        self = cursor
    }
}

extension JSONEncoder {
    /// Microsecond dates, as PostgreSQL keeps them, so a cursor compares exactly.
    static let cursor: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Cursor.microseconds(date))
        }
        return encoder
    }()
}

extension JSONDecoder {
    static let cursor: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            Date(timeIntervalSince1970: Double(try decoder.singleValueContainer().decode(Int64.self)) / 1_000_000)
        }
        return decoder
    }()
}

/// Times as clients send them: RFC 3339, with or without fractions of a second, from 1900 to
/// 2200 (PostgreSQL refuses some years the formatter takes, such as year 0).
public enum RFC3339 {
    public static let range = Date(timeIntervalSince1970: -2_208_988_800)...Date(timeIntervalSince1970: 7_258_118_400)

    public static func date(_ text: String) -> Date? {
        let plain = ISO8601DateFormatter()
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        // An offset's `+` sent unencoded reads as a space in a form-encoded query: take it back.
        // `t` and `z` may be lower case (RFC 3339 §5.6); the formatter takes them upper case.
        let text = text.replacingOccurrences(of: " ", with: "+").uppercased()
        guard let date = plain.date(from: text) ?? fractional.date(from: text), range.contains(date) else { return nil }
        return date
    }
}

/// The orders of a list on the map. Those `byValue` page on a value each row has (a
/// relevance, a price, a rating) and then on the newest.
public enum ListSort: String, Sendable, CaseIterable {
    case newest, distance, relevance
    case priceAsc = "price_asc", priceDesc = "price_desc", rating

    public var byValue: Bool { self == .relevance || self == .priceAsc || self == .priceDesc || self == .rating }
}

/// What every list of things on the map is asked (SPEC §5, §12.7), parsed: words to search the
/// title and description for, a point and radius, the order, a refresh time, and the page.
public struct MapListing: Sendable {
    /// The words of `q`: runs of letters and digits, at most ten.
    public var words: [String] = []
    /// The words as a text search query (`search_query`, migration 0039), once `resolveSearch`
    /// has asked the database for it: nil when nothing is searched; "" when the words match
    /// nothing at all.
    public var searchQuery: String?
    public var near: (lat: Double, lng: Double)?
    public var radiusKm: Double?
    /// A map's viewport: what lies within these latitudes and longitudes. `minLng` above
    /// `maxLng` is a viewport across the antimeridian (170 to -170: twenty degrees).
    public var box: (minLng: Double, minLat: Double, maxLng: Double, maxLat: Double)?
    public var sort = ListSort.newest
    public var byDistance: Bool { sort == .distance }
    public var updatedSince: Date?
    public var limit = 20
    public var cursor: Cursor?

    public init() {}

    /// `%text%` for ILIKE, with its pattern characters escaped.
    static func containing(_ text: String) -> String {
        "%" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
            .replacingOccurrences(of: "_", with: "\\_") + "%"
    }

    /// The `near` point as cube text, or nil.
    var nearPoint: String? { near.map { Earth.point(lat: $0.lat, lng: $0.lng) } }

    /// The box around `near` that holds the radius, or nil without one.
    var radiusBox: String? {
        guard let near, let radiusKm else { return nil }
        return Earth.box(lat: near.lat, lng: near.lng, km: radiusKm)
    }

    /// Turns `words` into `searchQuery`: which words of the listings they may mean (prefixes,
    /// a typo forgiven) is the database's to say, from the words it has seen (migration 0039).
    public mutating func resolveSearch(on pool: PostgresPool) async throws {
        guard !words.isEmpty else { return }
        let row = try await pool.query("SELECT search_query(\(words))::text AS q", prepared: true).single()
        searchQuery = try row.decode("q", as: String?.self) ?? ""
    }

    /// The search as a condition on a view with a `search` column: on its GIN index.
    var searchConditions: [PostgresQuery] {
        guard let searchQuery else { return [] }
        return searchQuery.isEmpty ? ["false"] : ["search @@ \(searchQuery)::tsquery"]
    }

    /// What a count of the listing takes of it: the box, the radius around `near`, the words.
    var facetConditions: [PostgresQuery] { boxConditions + radiusConditions + searchConditions }

    /// Within `radiusKm` of `near`: in the box around it (the GiST index), then by the chord.
    var radiusConditions: [PostgresQuery] {
        guard let nearPoint, let radiusBox, let radiusKm else { return [] }
        return [
            "earth <@ \(PostgresUntyped(radiusBox))::cube",
            "(earth <-> \(PostgresUntyped(nearPoint))::cube) <= \(Earth.chord(ofArcKm: radiusKm))",
        ]
    }

    /// Title matches above description ones (weights A and B), more words above fewer.
    var relevance: PostgresQuery { "ts_rank(search, \(searchQuery ?? "")::tsquery)::float8" }

    /// What lies within `box`, or nothing without one.
    var boxConditions: [PostgresQuery] {
        guard let box else { return [] }
        return [
            "lat BETWEEN \(box.minLat) AND \(box.maxLat)",
            box.minLng <= box.maxLng
                ? "lng BETWEEN \(box.minLng) AND \(box.maxLng)" : "(lng >= \(box.minLng) OR lng <= \(box.maxLng))",
        ]
    }

    /// Whether `statement` runs prepared. Planning was most of PostgreSQL's time on a page: the
    /// market's nearest-first statement ran 3,281/s through pgbench unprepared and 5,600/s
    /// prepared (32 clients, 100,000 items), and a generic plan still walks the GiST index in
    /// distance order, since the order alone asks for it. Words near a point are the exception:
    /// a generic plan cannot weigh the trigram filter against the box, and took 1.9 ms where a
    /// custom plan took 0.4 ms (`EXPLAIN ANALYZE`, `plan_cache_mode` forced each way).
    /// A search is planned with its query's words too: how many rows a word holds decides
    /// between its GIN index and walking the order's.
    var isPreparable: Bool { words.isEmpty }

    /// The list's statement over `view` (a view with `earth`, `title`, `created_at` and
    /// `updated_at`, keyed by the column `id`): `columns`, the distance from `near`, the view's
    /// own `filters` and the listing's, each only when set, then one order, chosen here, that
    /// an index gives as it is: nearest first by the GiST index (`earth <-> point`, which
    /// orders as the great-circle distance does), or newest first by `(created_at, id)`. The
    /// keyset is the order's own, so every page stays on the index. One row more than a page.
    /// Run it prepared when `isPreparable`.
    /// `sortKeys` are the view's expressions for the orders by value other than relevance
    /// (each larger first: an ascending order is written negated).
    func statement(
        select columns: String, from view: String, id: String, where filters: [PostgresQuery],
        sortKeys: [ListSort: String] = [:]
    ) -> PostgresQuery {
        var conditions = filters
        if let updatedSince { conditions.append("updated_at > \(updatedSince)") }
        conditions += boxConditions
        conditions += searchConditions
        var statement: PostgresQuery = "SELECT \(unsafeRaw: columns), "
        let sortKey: PostgresQuery? =
            if sort == .relevance { relevance } else { sortKeys[sort].map { PostgresQuery(unsafeSQL: "(\($0))::float8") } }
        if let sortKey {
            statement.append(sortKey)
            statement.append(" AS sort_key, ")
        }
        let chord: PostgresQuery? = nearPoint.map { "(earth <-> \(PostgresUntyped($0))::cube)" }
        if let chord {
            // `earth_km` written out over the chord: a SQL function would be planned, or run per row, as one.
            statement.append("2 * \(unsafeRaw: Earth.radiusSQL) * asin(least(1.0, ")
            statement.append(chord)
            statement.append(" / (2 * \(unsafeRaw: Earth.radiusSQL)))) AS distance_km, ")
            statement.append(chord)
            statement.append(" AS chord_km")
            conditions += radiusConditions
        } else {
            statement.append("NULL::float8 AS distance_km, NULL::float8 AS chord_km")
        }
        let nearest = byDistance ? chord : nil
        if let cursor {
            if let sortKey, let value = cursor.value {
                // Larger first, then newest: one row comparison, on every order by value.
                var after: PostgresQuery = "("
                after.append(sortKey)
                after.append(", created_at, \(unsafeRaw: id)) < (\(value), \(cursor.at), \(cursor.id))")
                conditions.append(after)
            } else if let nearest {
                var after: PostgresQuery = "("
                after.append(nearest)
                after.append(", \(unsafeRaw: id)) > (\(cursor.sortChordKm), \(cursor.id))")
                conditions.append(after)
            } else {
                conditions.append("(created_at, \(unsafeRaw: id)) < (\(cursor.at), \(cursor.id))")
            }
        }
        statement.append(" FROM \(unsafeRaw: view) WHERE ")
        statement.append(conditions.isEmpty ? "true" : .joined(conditions, separator: " AND "))
        if sortKey != nil {
            statement.append(" ORDER BY sort_key DESC, created_at DESC, \(unsafeRaw: id) DESC LIMIT \(literal: PageSize.rowsRead(limit))")
            return statement
        }
        guard let nearest else {
            statement.append(" ORDER BY created_at DESC, \(unsafeRaw: id) DESC LIMIT \(literal: PageSize.rowsRead(limit))")
            return statement
        }
        // The GiST index orders by the distance alone: asked for (distance, id), the planner
        // filters the whole box and sorts it (4 ms against 0.2 ms at 100,000 items, `EXPLAIN
        // ANALYZE`). So the index gives the nearest rows, with every row tied with the last of
        // them, and only those few are ordered by id: the same rows, in the keyset's order.
        statement.append(" ORDER BY ")
        statement.append(nearest)
        statement.append(" FETCH FIRST \(literal: PageSize.rowsRead(limit)) ROWS WITH TIES")
        var page: PostgresQuery = "SELECT * FROM ("
        page.append(statement)
        page.append(") AS nearest ORDER BY chord_km, \(unsafeRaw: id) LIMIT \(literal: PageSize.rowsRead(limit))")
        return page
    }

    /// A page of the rows fetched by `statement` (one more than `limit` when there are more),
    /// made into resources, with the cursor after its last row, or nil at the end.
    func page<Resource>(
        _ rows: PostgresRows, at: (Resource) -> Date, id: (Resource) -> UUID, _ make: (PostgresRow) throws -> Resource
    ) throws -> Page<Resource> {
        let kept = rows.prefix(limit)
        let data = try kept.map(make)
        guard rows.count > limit, let lastRow = kept.last, let last = data.last else { return Page(data: data, nextCursor: nil) }
        let chord = byDistance ? try lastRow.decode("chord_km", as: Double?.self) : nil
        let value = sort.byValue ? try lastRow.decode("sort_key", as: Double?.self) : nil
        let cursor = Cursor(at: at(last), id: id(last), chordKm: chord, sort: sort.byValue ? sort.rawValue : nil, value: value)
        return Page(data: data, nextCursor: cursor.encoded)
    }
}
