import Aggregates
import EventStore
import Foundation
import Logging
import Postgres
import Synchronization

/// Views that are rebuilt together, and the tables they write.
public struct ViewGroup: Sendable {
    public var name: String
    public var projections: [any InlineProjection]
    public var tables: [String]

    /// Every view. Users, items and feeds are one group: the items projection reads users'
    /// handles and counts their completed deals and ratings in `users_view`; the feed reads bids.
    public static let all: [ViewGroup] = [
        ViewGroup(
            name: "users", projections: [UsersProjection(), ItemsProjection(), BookingsProjection(), FeedProjection()],
            tables: [
                "users_view", "cards_view", "items_view", "bids_view", "market_cells", "reviews_view", "messages_view",
                "bookings_view", "blackouts_view", "rental_prices_view", "feed_view", "feed_loan_lenders",
            ]),
        ViewGroup(
            name: "loans", projections: [LoansProjection()],
            tables: ["loans_view", "loan_shares_view", "country_loans_view"]),
        ViewGroup(name: "carts", projections: [CartsProjection()], tables: ["cart_lines_view"]),
        ViewGroup(name: "payouts", projections: [PayoutsProjection()], tables: ["payouts_view"]),
        ViewGroup(
            name: "reports", projections: [ReportsProjection(), SuspensionsProjection()],
            tables: ["reports_view", "suspensions_view"]),
    ]

    /// The groups holding the named projection (`users`, `items`, `loans`, `carts`, `payouts`, `reports`, `suspensions`), or all.
    public static func named(_ name: String?) throws -> [ViewGroup] {
        guard let name else { return all }
        let groups = all.filter { group in group.projections.contains { $0.name == name } }
        guard !groups.isEmpty else {
            throw RebuildError.unknownProjection(name, known: all.flatMap { $0.projections.map(\.name) })
        }
        return groups
    }
}

public enum RebuildError: Error, CustomStringConvertible {
    case unknownProjection(String, known: [String])
    case schemaExists(String)
    case invalidSchemaName(String)
    case swapBlocked(attempts: Int)
    case indexNotUnderstood(String)
    case tablesMissing(schema: String, [String])

    public var description: String {
        switch self {
        case .unknownProjection(let name, let known): "no projection \(name) (known: \(known.joined(separator: ", ")))"
        case .schemaExists(let name): "schema \(name) exists already; choose another or drop it"
        case .invalidSchemaName(let name): "\(name) is not a schema name (a-z, 0-9 and _, starting with a letter)"
        case .swapBlocked(let attempts):
            "readers held the live views at each of \(attempts) attempts to swap; nothing was changed, try again"
        case .indexNotUnderstood(let definition):
            "cannot make this index on the rebuilt views (name it without spaces or quotes): \(definition)"
        case .tablesMissing(let schema, let tables):
            "schema \(schema) lacks \(tables.joined(separator: ", ")); build into a schema createSchema made"
        }
    }
}

/// One row that differs between a live view and its rebuild from the log.
public struct ViewDifference: Sendable, Hashable, CustomStringConvertible {
    public var table: String
    public var key: String
    /// nil when the row is missing on that side.
    public var live: String?
    public var rebuilt: String?

    /// The row's key, then each column that differs with both values; a whole row when one
    /// side lacks it.
    public var description: String {
        guard let live, let rebuilt,
            let left = (try? JSONSerialization.jsonObject(with: Data(live.utf8))) as? [String: Any],
            let right = (try? JSONSerialization.jsonObject(with: Data(rebuilt.utf8))) as? [String: Any]
        else {
            return "\(table) \(key)\n  live:    \(live ?? "(missing)")\n  rebuilt: \(rebuilt ?? "(missing)")"
        }
        func text(_ value: Any?) -> String {
            guard let value, !(value is NSNull) else { return "null" }
            return (try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]))
                .map { String(decoding: $0, as: UTF8.self) } ?? "\(value)"
        }
        let columns = Set(left.keys).union(right.keys).sorted().filter { text(left[$0]) != text(right[$0]) }
        return "\(table) \(key)\n" + columns.map { "  \($0): live \(text(left[$0])), rebuilt \(text(right[$0]))" }
            .joined(separator: "\n")
    }
}
