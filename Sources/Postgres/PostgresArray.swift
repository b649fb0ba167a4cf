/// An element type of a one-dimensional PostgreSQL array (`bigint[]`, `text[]`, ...).
public protocol PostgresArrayElement: PostgresCodable {
    static var postgresArrayType: PostgresType { get }
}

extension Int64: PostgresArrayElement { public static var postgresArrayType: PostgresType { .int8Array } }
extension Int: PostgresArrayElement { public static var postgresArrayType: PostgresType { .int8Array } }
extension String: PostgresArrayElement { public static var postgresArrayType: PostgresType { .textArray } }

extension PostgresType {
    public static let int4Array = PostgresType(rawValue: 1007)
    public static let int8Array = PostgresType(rawValue: 1016)
    public static let textArray = PostgresType(rawValue: 1009)
}

extension Array: PostgresEncodable where Element: PostgresArrayElement {
    public var postgresBinding: PostgresBinding {
        PostgresBinding(type: Element.postgresArrayType, text: PostgresArrayLiteral.format(map { $0.postgresBinding.text }))
    }
}

/// A column of a batch's rows, any type and NULLs included, sent as one `text[]` parameter:
/// `unnest(\(ids)::uuid[], \(times)::timestamptz[])` writes many rows in one statement, each
/// value read by its type's own input function as a single row's parameter would be.
public struct PostgresBatchColumn: PostgresEncodable, Sendable {
    private var values: [String?] = []

    public init() {}

    public mutating func append(_ value: some PostgresEncodable) { values.append(value.postgresBinding.text) }

    public var isEmpty: Bool { values.isEmpty }
    public var count: Int { values.count }

    public var postgresBinding: PostgresBinding { PostgresBinding(type: .textArray, text: PostgresArrayLiteral.format(values)) }
}

extension Array: PostgresDecodable where Element: PostgresArrayElement {
    public static var postgresTypes: Set<PostgresType> { [.int4Array, .int8Array, .textArray] }

    public init?(postgresText text: String, type: PostgresType) {
        guard let items = PostgresArrayLiteral.parse(text) else { return nil }
        var elements = [Element]()
        elements.reserveCapacity(items.count)
        for item in items {
            guard let item, let element = Element(postgresText: item, type: Self.elementType(of: type)) else { return nil }
            elements.append(element)
        }
        self = elements
    }

    static func elementType(of arrayType: PostgresType) -> PostgresType {
        switch arrayType {
        case .int4Array: .int4
        case .int8Array: .int8
        default: .text
        }
    }
}

/// The text form of a one-dimensional array: `{1,2,3}`, `{"a b","c\"d",NULL}`.
enum PostgresArrayLiteral {
    /// Every element quoted, with `"` and `\` escaped: the array literal's own rules.
    static func format(_ elements: [String?]) -> String {
        var literal = "{"
        for (index, element) in elements.enumerated() {
            if index > 0 { literal += "," }
            guard let text = element else {
                literal += "NULL"
                continue
            }
            // Most elements (ids, numbers) have nothing to escape: no trip through NSString.
            let plain = !text.utf8.contains { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") }
            literal += "\""
            literal += plain ? text : text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            literal += "\""
        }
        return literal + "}"
    }

    static func parse(_ text: String) -> [String?]? {
        var scalars = Substring(text).unicodeScalars[...]
        guard scalars.first == "{", scalars.last == "}" else { return nil }
        scalars = scalars.dropFirst().dropLast()
        var items = [String?]()
        if scalars.isEmpty { return items }
        var index = scalars.startIndex
        while true {
            var item = String.UnicodeScalarView()
            var quoted = false
            if index < scalars.endIndex, scalars[index] == "\"" {
                quoted = true
                index = scalars.index(after: index)
                while index < scalars.endIndex, scalars[index] != "\"" {
                    if scalars[index] == "\\" { index = scalars.index(after: index) }
                    guard index < scalars.endIndex else { return nil }
                    item.append(scalars[index])
                    index = scalars.index(after: index)
                }
                guard index < scalars.endIndex else { return nil }
                index = scalars.index(after: index)
            } else {
                while index < scalars.endIndex, scalars[index] != "," {
                    item.append(scalars[index])
                    index = scalars.index(after: index)
                }
            }
            let value = String(item)
            items.append(!quoted && value == "NULL" ? nil : value)
            guard index < scalars.endIndex else { return items }
            guard scalars[index] == "," else { return nil }
            index = scalars.index(after: index)
        }
    }
}
