import EventStore
import Foundation
import JSONStream
import Marketplace
import Postgres
import UUIDs

/// A column clients read as it is stored: its member in the resource, and its value. A view's
/// resource writes its own members (the ones it shapes: a rental's price and a request's under
/// names of their own, a mean rating, a nested location) and after them every column its
/// declaration marks `shown:`, so that such a column is one line of the declaration (and its
/// migration, and the OpenAPI document), nothing more.
public struct ShownMember: Sendable, Hashable {
    public let name: String
    public let value: JSONValue

    public init(name: String, value: JSONValue) { (self.name, self.value) = (name, value) }
}

/// A value a shown column holds, as JSON: written the way the answers write it.
protocol ShownValue {
    var shownJSON: JSONValue { get }
}

extension String: ShownValue { var shownJSON: JSONValue { .string(self) } }
extension Int: ShownValue { var shownJSON: JSONValue { .int(self) } }
extension Int64: ShownValue { var shownJSON: JSONValue { .int(Int(self)) } }
extension Double: ShownValue { var shownJSON: JSONValue { .double(self) } }
extension Bool: ShownValue { var shownJSON: JSONValue { .bool(self) } }
extension Identifier: ShownValue { var shownJSON: JSONValue { .string(rawValue.lowercaseText) } }
extension Array: ShownValue where Element: ShownValue { var shownJSON: JSONValue { .array(map(\.shownJSON)) } }
extension Optional: ShownValue where Wrapped: ShownValue { var shownJSON: JSONValue { map(\.shownJSON) ?? .null } }

extension Date: ShownValue {
    /// As the answers write a date (`JSONSink.appendQuotedISO8601`), without its quotes.
    var shownJSON: JSONValue {
        var quoted: [UInt8] = []
        JSONSink.appendQuotedISO8601(self, to: &quoted)
        return .string(String(decoding: quoted.dropFirst().dropLast(), as: UTF8.self))
    }
}

extension ViewColumn {
    /// A field stored as it is and shown to clients as it is, under `member`.
    init<Value: PostgresCodable & ShownValue>(
        _ name: String, _ type: String, _ field: WritableKeyPath<Row, Value> & Sendable, shown member: String
    ) {
        self.init(name, type, field)
        self.member = member
        show = { $0[keyPath: field].shownJSON }
    }

    /// A field stored as it is, nil as NULL, and shown to clients as it is (nil as null).
    init<Value: PostgresCodable & ShownValue>(
        _ name: String, _ type: String, _ field: WritableKeyPath<Row, Value?> & Sendable, shown member: String
    ) {
        self.init(name, type, field)
        self.member = member
        show = { $0[keyPath: field].shownJSON }
    }
}

extension ViewTable {
    /// The row's shown columns, in the declaration's order.
    func shown(_ row: Row) -> [ShownMember] {
        shownColumns.compactMap { column in
            guard let member = column.member, let show = column.show else { return nil }
            return ShownMember(name: member, value: show(row))
        }
    }
}

/// A member's key by its name: for a resource that writes members a declaration names.
struct MemberKey: CodingKey, ExpressibleByStringLiteral {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init(stringLiteral name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
