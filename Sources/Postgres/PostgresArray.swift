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
    /// The literal a batch column writes, sent as this array's own type.
    public var postgresBinding: PostgresBinding {
        var column = PostgresBatchColumn()
        for element in self { column.append(element) }
        return PostgresBinding(type: Element.postgresArrayType, text: column.postgresBinding.text)
    }
}

/// A column of a batch's rows, any type and NULLs included, sent as one array literal:
/// `unnest(\(ids)::uuid[], \(times)::timestamptz[])` writes many rows in one statement, each
/// value read by its type's own input function as a single row's parameter would be.
///
/// The literal goes untyped, so its cast in the statement types the parameter and it is
/// read once, straight into a `uuid[]`: sent as `text[]`, it was read into text elements and
/// each converted again (`array_in` and `array_map` were 12% of a rebuild's writing backend,
/// `perf`; 9% since). So a batch column must be cast where it is used.
public struct PostgresBatchColumn: PostgresEncodable, Sendable {
    /// The literal so far, written as values come (`{"a",NULL,"b"`), not kept as strings and
    /// joined at the end: a rebuild spent a sixth of its own time on its columns (`perf`).
    private var literal: [UInt8] = [UInt8(ascii: "{")]
    public private(set) var count = 0

    public init() {}

    public mutating func append(_ value: some PostgresEncodable) {
        if count > 0 { literal.append(UInt8(ascii: ",")) }
        count += 1
        guard let text = value.postgresBinding.text else {
            literal.append(contentsOf: "NULL".utf8)
            return
        }
        Self.appendQuoted(text, to: &literal)
    }

    public var isEmpty: Bool { count == 0 }

    /// `text` as one quoted element, `"` and `\` escaped (the array literal's own rules). Most
    /// (ids, numbers, times) have nothing to escape and are copied whole.
    private static func appendQuoted(_ text: String, to literal: inout [UInt8]) {
        var text = text
        literal.append(UInt8(ascii: "\""))
        text.withUTF8 { bytes in
            if !bytes.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") }) {
                literal.append(contentsOf: bytes)
                return
            }
            for byte in bytes {
                if byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "\"") { literal.append(UInt8(ascii: "\\")) }
                literal.append(byte)
            }
        }
        literal.append(UInt8(ascii: "\""))
    }

    public var postgresBinding: PostgresBinding {
        var literal = literal
        literal.append(UInt8(ascii: "}"))
        return PostgresBinding(type: .unknown, text: String(decoding: literal, as: UTF8.self))
    }
}

extension Array: PostgresDecodable where Element: PostgresArrayElement {
    public static var postgresTypes: Set<PostgresType> { [.int4Array, .int8Array, .textArray] }
    /// By a switch: the default makes `postgresTypes`, a new set, for every cell.
    public static func reads(_ type: PostgresType) -> Bool {
        switch type {
        case .int4Array, .int8Array, .textArray: true
        default: false
        }
    }

    /// An empty array without parsing: most of a page's photo lists are `{}`.
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>, type: PostgresType) {
        if bytes.count == 2, bytes[0] == UInt8(ascii: "{"), bytes[1] == UInt8(ascii: "}") {
            self = []
            return
        }
        self.init(postgresText: String(decoding: bytes, as: UTF8.self), type: type)
    }

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

/// The text form of a one-dimensional array, read back (`PostgresBatchColumn` writes it):
/// `{1,2,3}`, `{"a b","c\"d",NULL}`.
enum PostgresArrayLiteral {
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
