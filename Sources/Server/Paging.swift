import Foundation
import Hummingbird
import Marketplace

/// `{ "data": [...], "nextCursor": ... }`, the shape of every list.
struct Page<Element: Encodable & Sendable>: ResponseEncodable, Sendable {
    var data: [Element]
    var nextCursor: String?

    // `nextCursor` is always there: null on the last page.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(data, forKey: .data)
        try container.encode(nextCursor, forKey: .nextCursor)
    }

    enum CodingKeys: String, CodingKey { case data, nextCursor }
}

/// An opaque keyset position: the sort key and id of the last row a page held. Stable while
/// rows arrive: the next page starts strictly after it, so none is seen twice or skipped.
struct Cursor: Codable, Sendable {
    var at: Date
    var id: UUID
    /// The distance of the last row, when the list is sorted by it.
    var km: Double?
    /// The sort key of a list ordered by text (countries by name).
    var key: String?

    var encoded: String {
        let json = (try? JSONEncoder.cursor.encode(self)) ?? Data()
        return json.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    init(at: Date, id: UUID, km: Double? = nil, key: String? = nil) {
        self.at = at
        self.id = id
        self.km = km
        self.key = key
    }

    /// nil for no cursor; a 400 problem for one that is not ours.
    init?(query text: String?) throws {
        guard let text, !text.isEmpty else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let cursor = try? JSONDecoder.cursor.decode(Cursor.self, from: data),
            RFC3339.range.contains(cursor.at), cursor.km.map({ $0.isFinite && $0 >= 0 }) ?? true
        else {
            throw Problem(DomainError.invalid([FieldError(field: "cursor", code: "invalid_cursor", message: "not a cursor this server gave")]))
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
            try container.encode(Int64((date.timeIntervalSince1970 * 1_000_000).rounded()))
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

extension Request {
    /// `limit`: 1 to 100, 20 by default; anything else is a 422.
    func pageLimit() throws -> Int {
        guard let text = uri.queryParameters["limit"].map(String.init) else { return 20 }
        guard let limit = Int(text), (1...100).contains(limit) else {
            throw Problem(DomainError.invalid([FieldError(field: "limit", code: "out_of_range", message: "a number from 1 to 100")]))
        }
        return limit
    }
}

/// Times as clients send them: RFC 3339, with or without fractions of a second, from 1900 to
/// 2200 (PostgreSQL refuses some years the formatter takes, such as year 0).
enum RFC3339 {
    static let range = Date(timeIntervalSince1970: -2_208_988_800)...Date(timeIntervalSince1970: 7_258_118_400)

    static func date(_ text: String) -> Date? {
        let plain = ISO8601DateFormatter()
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        // An offset's `+` sent unencoded reads as a space in a form-encoded query: take it back.
        let text = text.replacingOccurrences(of: " ", with: "+")
        guard let date = plain.date(from: text) ?? fractional.date(from: text), range.contains(date) else { return nil }
        return date
    }
}
