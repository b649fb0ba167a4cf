import Civil
import Foundation
import UUIDs

/// A PostgreSQL type OID, as sent with a parameter and read back with a column.
public struct PostgresType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let unknown = PostgresType(rawValue: 0)
    public static let bool = PostgresType(rawValue: 16)
    public static let bytea = PostgresType(rawValue: 17)
    public static let name = PostgresType(rawValue: 19)
    public static let int8 = PostgresType(rawValue: 20)
    public static let int2 = PostgresType(rawValue: 21)
    public static let int4 = PostgresType(rawValue: 23)
    public static let text = PostgresType(rawValue: 25)
    public static let oid = PostgresType(rawValue: 26)
    public static let json = PostgresType(rawValue: 114)
    public static let float4 = PostgresType(rawValue: 700)
    public static let float8 = PostgresType(rawValue: 701)
    public static let bpchar = PostgresType(rawValue: 1042)
    public static let varchar = PostgresType(rawValue: 1043)
    public static let date = PostgresType(rawValue: 1082)
    public static let timestamp = PostgresType(rawValue: 1114)
    public static let timestamptz = PostgresType(rawValue: 1184)
    public static let numeric = PostgresType(rawValue: 1700)
    public static let uuid = PostgresType(rawValue: 2950)
    public static let jsonb = PostgresType(rawValue: 3802)
    public static let xid8 = PostgresType(rawValue: 5069)

    public var description: String {
        switch self {
        case .bool: "boolean"
        case .bytea: "bytea"
        case .name: "name"
        case .int8: "bigint"
        case .int2: "smallint"
        case .int4: "integer"
        case .text: "text"
        case .oid: "oid"
        case .json: "json"
        case .float4: "real"
        case .float8: "double precision"
        case .bpchar: "character"
        case .varchar: "character varying"
        case .timestamp: "timestamp"
        case .timestamptz: "timestamptz"
        case .numeric: "numeric"
        case .uuid: "uuid"
        case .jsonb: "jsonb"
        case .xid8: "xid8"
        default: "type \(rawValue)"
        }
    }
}

/// A value bound to a query parameter, in PostgreSQL's text format.
public struct PostgresBinding: Sendable, Hashable {
    public var type: PostgresType
    /// nil is SQL NULL.
    public var text: String?

    public init(type: PostgresType, text: String?) {
        self.type = type
        self.text = text
    }

    public static let null = PostgresBinding(type: .unknown, text: nil)
}

/// A Swift value that can be sent as a query parameter.
public protocol PostgresEncodable: Sendable {
    var postgresBinding: PostgresBinding { get }
}

/// Text sent without a type, for the statement to give it one by a cast (`\(value)::cube`):
/// the parameter is then of that type, read once when the statement is bound. Sent as
/// `text`, the same cast in a prepared statement's generic plan converts it at every use,
/// for every row: on the market's nearest page, the points and box in cube's text format
/// were parsed about seventy times a page, a fifth of PostgreSQL's time on it (`perf`).
public struct PostgresUntyped: PostgresEncodable {
    public var text: String

    public init(_ text: String) { self.text = text }

    public var postgresBinding: PostgresBinding { PostgresBinding(type: .unknown, text: text) }
}

/// A day (`YYYY-MM-DD`) sent as a `date` parameter. Sent as text, `$1::date` is a cast that a
/// condition runs on every row it filters: the market's period filter spent 2.5 of its 5.5 ms
/// casting two parameters over 30,000 bookings.
public struct PostgresDate: PostgresEncodable {
    public var text: String

    public init(_ text: String) { self.text = text }

    public var postgresBinding: PostgresBinding { PostgresBinding(type: .date, text: text) }
}

/// A Swift value that can be read from a column in PostgreSQL's text format.
public protocol PostgresDecodable: Sendable {
    /// The column types this value reads; a column of another type is a decoding error.
    static var postgresTypes: Set<PostgresType> { get }
    /// Whether a column of `type` reads as this value: `postgresTypes` holds it. The hot
    /// types answer by a switch, since hashing a type for every cell of every row shows.
    static func reads(_ type: PostgresType) -> Bool
    /// Returns nil when the text is not a valid value of the type.
    init?(postgresText text: String, type: PostgresType)
    /// The same, from the text's UTF-8 bytes, which a NUL must follow (as in `PostgresRows`,
    /// the only caller): C's parsers stop there. By default through a `String`; numbers, ids
    /// and times read the bytes themselves.
    init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>, type: PostgresType)
}

extension PostgresDecodable {
    public static func reads(_ type: PostgresType) -> Bool { postgresTypes.contains(type) }

    @inlinable
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>, type: PostgresType) {
        self.init(postgresText: String(decoding: bytes, as: UTF8.self), type: type)
    }
}

/// The integers read their text, or its bytes, by one parser.
extension PostgresDecodable where Self: FixedWidthInteger {
    public init?(postgresText text: String, type: PostgresType) {
        var text = text
        guard let value = text.withUTF8({ parseInteger($0, as: Self.self) }) else { return nil }
        self = value
    }

    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>, type: PostgresType) {
        guard let value = parseInteger(bytes, as: Self.self) else { return nil }
        self = value
    }
}

/// An integer in PostgreSQL's text (an optional sign, then decimal digits), as `Int(String)`
/// reads it: nil when empty, malformed or out of range.
@usableFromInline
func parseInteger<T: FixedWidthInteger>(_ bytes: UnsafeBufferPointer<UInt8>, as: T.Type) -> T? {
    var index = 0
    var negative = false
    if let first = bytes.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") {
        negative = first == UInt8(ascii: "-")
        index = 1
    }
    guard index < bytes.count else { return nil }
    var value: T = 0
    while index < bytes.count {
        let digit = bytes[index] &- UInt8(ascii: "0")
        guard digit < 10 else { return nil }
        let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
        let (next, overflowAgain) =
            negative ? shifted.subtractingReportingOverflow(T(digit)) : shifted.addingReportingOverflow(T(digit))
        guard !overflow, !overflowAgain else { return nil }
        value = next
        index += 1
    }
    return value
}

public typealias PostgresCodable = PostgresEncodable & PostgresDecodable

extension Bool: PostgresCodable {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: .bool, text: self ? "t" : "f") }
    public static let postgresTypes: Set<PostgresType> = [.bool]
    public static func reads(_ type: PostgresType) -> Bool { type == .bool }
    public init?(postgresText text: String, type: PostgresType) {
        switch text {
        case "t": self = true
        case "f": self = false
        default: return nil
        }
    }
}

private let integerTypes: Set<PostgresType> = [.int2, .int4, .int8, .oid, .xid8]

private func isInteger(_ type: PostgresType) -> Bool {
    switch type {
    case .int2, .int4, .int8, .oid, .xid8: true
    default: false
    }
}

extension Int: PostgresCodable {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: .int8, text: String(self)) }
    public static var postgresTypes: Set<PostgresType> { integerTypes }
    public static func reads(_ type: PostgresType) -> Bool { isInteger(type) }
}

extension Int64: PostgresCodable {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: .int8, text: String(self)) }
    public static var postgresTypes: Set<PostgresType> { integerTypes }
    public static func reads(_ type: PostgresType) -> Bool { isInteger(type) }
}

extension Int32: PostgresCodable {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: .int4, text: String(self)) }
    public static var postgresTypes: Set<PostgresType> { [.int2, .int4] }
    public static func reads(_ type: PostgresType) -> Bool { type == .int2 || type == .int4 }
}

extension Double: PostgresCodable {
    public var postgresBinding: PostgresBinding {
        let text: String =
            if isNaN { "NaN" } else if self == .infinity { "Infinity" } else if self == -.infinity { "-Infinity" } else {
                // Swift prints the shortest text that reads back to the same Double.
                "\(self)"
            }
        return PostgresBinding(type: .float8, text: text)
    }
    public static let postgresTypes: Set<PostgresType> = [.float4, .float8, .numeric, .int2, .int4, .int8]
    public static func reads(_ type: PostgresType) -> Bool {
        switch type {
        case .float4, .float8, .numeric, .int2, .int4, .int8: true
        default: false
        }
    }
    public init?(postgresText text: String, type: PostgresType) {
        let count = text.utf8.count
        guard let value = text.withCString({ Self.parse($0, count: count) }) else { return nil }
        self = value
    }

    /// float8out's text in place (the NUL after it is where `strtod` stops).
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>, type: PostgresType) {
        guard let start = bytes.baseAddress else { return nil }
        assert(start[bytes.count] == 0, "a cell's text is followed by a NUL, where strtod stops")
        guard let value = start.withMemoryRebound(to: CChar.self, capacity: bytes.count + 1, { Self.parse($0, count: bytes.count) })
        else { return nil }
        self = value
    }

    /// The `count` bytes at `text`, which a NUL follows, read by `strtod` in the C locale (as
    /// `Double(String)` reads them; NaN and Infinity too), all of them and nothing else.
    private static func parse(_ text: UnsafePointer<CChar>, count: Int) -> Double? {
        guard count > 0, UInt8(bitPattern: text[0]) > 0x20 else { return nil }
        var end: UnsafeMutablePointer<CChar>?
        // strtod reads the thread's locale: the C locale's for the call.
        let previous = uselocale(numericLocale)
        defer { uselocale(previous) }
        let value = strtod(text, &end)
        guard let end, UnsafePointer(end) == text + count else { return nil }
        return value
    }
}

/// The C locale's numbers, whatever `setlocale` a library in the process may have called.
nonisolated(unsafe) private let numericLocale = newlocale(LC_NUMERIC_MASK, "C", nil)

extension String: PostgresCodable {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: .text, text: self) }
    public static let postgresTypes: Set<PostgresType> = [.text, .varchar, .bpchar, .name, .json, .jsonb]
    public static func reads(_ type: PostgresType) -> Bool {
        switch type {
        case .text, .varchar, .bpchar, .name, .json, .jsonb: true
        default: false
        }
    }
    public init?(postgresText text: String, type: PostgresType) { self = text }
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>, type: PostgresType) {
        self = String(decoding: bytes, as: UTF8.self)
    }
}

extension UUID: PostgresCodable {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: .uuid, text: lowercaseText) }
    public static let postgresTypes: Set<PostgresType> = [.uuid]
    public static func reads(_ type: PostgresType) -> Bool { type == .uuid }
    public init?(postgresText text: String, type: PostgresType) {
        guard let uuid = UUID(text: text) else { return nil }
        self = uuid
    }
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>, type: PostgresType) {
        guard let uuid = UUID(utf8: bytes) else { return nil }
        self = uuid
    }
}

extension Data: PostgresCodable {
    public var postgresBinding: PostgresBinding { PostgresBinding(type: .bytea, text: "\\x" + hexString) }
    public static let postgresTypes: Set<PostgresType> = [.bytea]
    public init?(postgresText text: String, type: PostgresType) {
        // bytea_output = hex (the default since 9.0): "\x" then two hex digits per byte.
        guard text.hasPrefix("\\x") else { return nil }
        self.init(hex: text.dropFirst(2))
    }

    /// Lower-case hexadecimal, two digits per byte.
    public var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public init?(hex: some StringProtocol) {
        let utf8 = Array(hex.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = utf8[index].hexDigitValue, let low = utf8[index + 1].hexDigitValue else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self.init(bytes)
    }
}

extension Date: PostgresCodable {
    public var postgresBinding: PostgresBinding {
        PostgresBinding(type: .timestamptz, text: PostgresTimestamp.format(self))
    }
    public static let postgresTypes: Set<PostgresType> = [.timestamptz, .timestamp]
    public static func reads(_ type: PostgresType) -> Bool { type == .timestamptz || type == .timestamp }
    public init?(postgresText text: String, type: PostgresType) {
        guard let date = PostgresTimestamp.parse(text) else { return nil }
        self = date
    }
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>, type: PostgresType) {
        guard let date = PostgresTimestamp.parse(bytes) else { return nil }
        self = date
    }
}

/// A jsonb value, kept as its JSON text. Encode and decode Codable values through it.
public struct JSONB: PostgresCodable, Hashable, CustomStringConvertible {
    public var text: String

    public init(text: String) { self.text = text }

    public init(_ value: some Encodable, encoder: JSONEncoder = JSONEncoder()) throws {
        self.text = String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    public func decode<T: Decodable>(_ type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: Data(text.utf8))
    }

    public var description: String { text }
    public var postgresBinding: PostgresBinding { PostgresBinding(type: .jsonb, text: text) }
    public static let postgresTypes: Set<PostgresType> = [.jsonb, .json]
    public init?(postgresText text: String, type: PostgresType) { self.text = text }
}

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public var postgresBinding: PostgresBinding {
        switch self {
        case .some(let value): value.postgresBinding
        case .none: .null
        }
    }
}

/// timestamptz in the ISO text form the connection asks for (DateStyle ISO, TimeZone UTC),
/// to the microsecond, which is PostgreSQL's precision.
enum PostgresTimestamp {
    static func format(_ date: Date) -> String {
        let totalMicros = (date.timeIntervalSince1970 * 1_000_000).rounded()
        var seconds = Int(floor(totalMicros / 1_000_000))
        var micros = Int(totalMicros - Double(seconds) * 1_000_000)
        if micros >= 1_000_000 {
            seconds += 1
            micros -= 1_000_000
        }
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let year = Int(parts.tm_year) + 1900
        guard (1...9999).contains(year) else { return format(parts, micros: micros) }
        // Written digit by digit into the string's own 29 bytes: padding and joining a dozen
        // small strings was 8% of a rebuild's CPU (`perf`), and runs for every time any
        // statement sends.
        return String(unsafeUninitializedCapacity: 29) { bytes in
            func put(_ value: Int, _ width: Int, at start: Int) {
                var value = value
                for index in stride(from: start + width - 1, through: start, by: -1) {
                    bytes[index] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            put(year, 4, at: 0)
            put(Int(parts.tm_mon) + 1, 2, at: 5)
            put(Int(parts.tm_mday), 2, at: 8)
            put(Int(parts.tm_hour), 2, at: 11)
            put(Int(parts.tm_min), 2, at: 14)
            put(Int(parts.tm_sec), 2, at: 17)
            put(micros, 6, at: 20)
            (bytes[4], bytes[7], bytes[10]) = (UInt8(ascii: "-"), UInt8(ascii: "-"), UInt8(ascii: " "))
            (bytes[13], bytes[16], bytes[19]) = (UInt8(ascii: ":"), UInt8(ascii: ":"), UInt8(ascii: "."))
            (bytes[26], bytes[27], bytes[28]) = (UInt8(ascii: "+"), UInt8(ascii: "0"), UInt8(ascii: "0"))
            return 29
        }
    }

    /// Years outside 1 to 9999, as before the fast path above. Neither writes the `BC` that
    /// PostgreSQL wants for year 0 and before; no value of this server is that old.
    static func format(_ parts: tm, micros: Int) -> String {
        func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(Int(parts.tm_year) + 1900, 4))-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))"
            + " \(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2))"
            + ".\(pad(micros, 6))+00"
    }

    /// Parses `YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM[:SS]]]`; a missing offset means UTC.
    /// Read in place from the text's bytes, the day counted without libc (`timegm`): a page of
    /// twenty items reads forty of these.
    static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { parse($0) }
    }

    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        var index = 0
        func number(_ count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for _ in 0..<count {
                let c = bytes[index]
                guard c >= 48, c <= 57 else { return nil }
                value = value * 10 + Int(c - 48)
                index += 1
            }
            return value
        }
        func expect(_ c: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == c else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect(UInt8(ascii: "-")), let month = number(2), (1...12).contains(month),
            expect(UInt8(ascii: "-")), let day = number(2), (1...31).contains(day),
            expect(UInt8(ascii: " ")) || expect(UInt8(ascii: "T")), let hour = number(2), expect(UInt8(ascii: ":")),
            let minute = number(2), expect(UInt8(ascii: ":")), let second = number(2)
        else { return nil }
        var micros = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var digits = 0
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                if digits < 6 { micros = micros * 10 + Int(bytes[index] - 48) }
                digits += 1
                index += 1
            }
            for _ in digits..<6 where digits < 6 { micros *= 10 }
        }
        var offsetSeconds = 0
        if index < bytes.count {
            let sign: Int
            switch bytes[index] {
            case UInt8(ascii: "+"): sign = 1
            case UInt8(ascii: "-"): sign = -1
            default: return nil
            }
            index += 1
            guard let hours = number(2) else { return nil }
            var offset = hours * 3600
            if expect(UInt8(ascii: ":")) {
                guard let minutes = number(2) else { return nil }
                offset += minutes * 60
                if expect(UInt8(ascii: ":")) {
                    guard let secs = number(2) else { return nil }
                    offset += secs
                }
            }
            offsetSeconds = sign * offset
        }
        guard index == bytes.count else { return nil }
        let epoch = Civil.days(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second
            - offsetSeconds
        return Date(timeIntervalSince1970: Double(epoch) + Double(micros) / 1_000_000)
    }
}
