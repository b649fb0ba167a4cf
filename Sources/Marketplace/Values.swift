import Civil
import Foundation

/// A calendar day, `YYYY-MM-DD`, as rental periods are counted (`until` included).
public struct Day: Hashable, Sendable, Comparable, Codable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int

    /// Only real dates: `2026-02-30` is nil.
    public init?(year: Int, month: Int, day: Int) {
        guard (1...9999).contains(year), (1...12).contains(month), day >= 1,
            day <= Day.daysIn(month: month, year: year)
        else { return nil }
        self.year = year
        self.month = month
        self.day = day
    }

    /// `YYYY-MM-DD` in ASCII digits, read byte by byte.
    public init?(_ text: String) {
        var text = text
        guard let day = text.withUTF8(Self.parse) else { return nil }
        self = day
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Day? {
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-") else { return nil }
        func number(_ digits: Range<Int>) -> Int? {
            var value = 0
            for index in digits {
                let digit = bytes[index] &- UInt8(ascii: "0")
                guard digit < 10 else { return nil }
                value = value * 10 + Int(digit)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10) else { return nil }
        return Day(year: year, month: month, day: day)
    }

    /// The UTC day of an instant. From 1600 to 9999 by arithmetic (`Civil`), the proleptic
    /// Gregorian calendar that Foundation's is there: a bid's
    /// two dates asked Foundation's calendar four times, 3% of the command (`perf`). Outside,
    /// where Foundation's turns Julian, through it.
    public init(_ date: Date) {
        let seconds = date.timeIntervalSince1970
        if seconds.isFinite, abs(seconds) < 1e12, case let days = Int((seconds / 86_400).rounded(.down)),
            (-135_140...2_932_896).contains(days)
        {
            (year, month, day) = Civil.date(fromDays: days)
            return
        }
        let components = Calendar.utc.dateComponents([.year, .month, .day], from: date)
        self.year = components.year!
        self.month = components.month!
        self.day = components.day!
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let day = Day(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a YYYY-MM-DD date: \(text)")
        }
        self = day
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    public var description: String {
        func pad(_ value: Int, _ width: Int) -> String {
            String(repeating: "0", count: max(0, width - String(value).count)) + String(value)
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))"
    }

    public static func < (lhs: Day, rhs: Day) -> Bool {
        (lhs.year, lhs.month, lhs.day) < (rhs.year, rhs.month, rhs.day)
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}

extension Calendar {
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()
}

/// Where something is: `{ "lat": -90..90, "lng": -180..180, "place": "text" }`.
public struct Location: Hashable, Sendable, Codable {
    public var lat: Double
    public var lng: Double
    public var place: String

    public init(lat: Double, lng: Double, place: String) {
        self.lat = lat
        self.lng = lng
        self.place = place
    }

    /// Every way the location is invalid, under `field`.
    public func problems(field: String = "location") -> [FieldError] {
        var problems = [FieldError]()
        if !(lat.isFinite && (-90...90).contains(lat)) {
            problems.append(FieldError(field: "\(field).lat", code: "out_of_range", message: "lat must be from -90 to 90"))
        }
        if !(lng.isFinite && (-180...180).contains(lng)) {
            problems.append(FieldError(field: "\(field).lng", code: "out_of_range", message: "lng must be from -180 to 180"))
        }
        if !place.isWithin(0...200) {
            problems.append(FieldError(field: "\(field).place", code: "too_long", message: "place is at most 200 characters"))
        }
        return problems
    }
}

/// What a posting is about.
public enum Category: String, Hashable, Sendable, Codable, CaseIterable {
    case music, electronics, appliances, clothes, furniture, bikes, books
    case freeStuff = "free_stuff"
    case jewellery, games, tools, sports, other
}

extension StringProtocol {
    /// A length in characters within `range`, at most eight Unicode scalars a character on
    /// average, and no character under more than `maxCombiningMarks` marks: a letter under
    /// 6,000 combining marks is one character, and must not pass for a short text, nor a
    /// few hundred marks stack over the lines around it (issue 48). Eight leave room for the
    /// longest emoji sequences; four marks for any script's vowels and tones.
    public func isWithin(_ range: ClosedRange<Int>) -> Bool {
        range.contains(count) && unicodeScalars.count <= range.upperBound * 8
            && (utf8.allSatisfy { $0 < 0x80 } || !contains { $0.combiningMarks > maxCombiningMarks })
    }
}

/// The most combining marks one character of a text may carry (`isWithin`).
public let maxCombiningMarks = 4

extension Character {
    /// Its nonspacing and enclosing marks (the accents and tones drawn over or under a letter).
    var combiningMarks: Int {
        unicodeScalars.count { [.nonspacingMark, .enclosingMark].contains($0.properties.generalCategory) }
    }
}
