import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// `cart_lines_view`: each user's cart, line by line.
public struct CartsProjection: InlineProjection {
    public let name = "carts"
    public init() {}

    public func apply(_ events: [ProjectedEvent], _ session: inout PostgresSession) throws {
        // A cart the batch empties loses whatever the batch did to it before: those lines are
        // never written (and never left behind dead for the emptying to wade through), and the
        // last emptying alone removes the lines it had before the batch.
        var emptiedLast: [UUID: Int] = [:]
        for (index, event) in events.enumerated() where Aggregate.cart.owns(event.streamID) {
            guard let user = Aggregate.cart.id(of: event.streamID)?.rawValue else { continue }
            switch try Aggregate.cart.codec.decode(event) {
            case .cleared, .checkedOut: emptiedLast[user] = index
            default: break
            }
        }
        var plan = WritePlan()
        for (index, event) in events.enumerated() where Aggregate.cart.owns(event.streamID) {
            let owner = Aggregate.cart.id(of: event.streamID)
            let user = owner?.rawValue
            if let user, let last = emptiedLast[user], index < last { continue }
            let cart = [WritePlan.Row(.cart, user)]
            switch try Aggregate.cart.codec.decode(event) {
            case .itemAdded(let added):
                // A cart's stream is its user's (as the updates and deletes below, none else).
                guard let owner else { break }
                let line = CartLineRow(
                    user: owner, loan: added.loanID, amountCents: added.amountCents, addedAt: event.recordedAt, position: event.position)
                plan.add(Self.addLines, CartLineRow.table.values(line), writes: cart)
            case .amountChanged(let changed):
                plan.add(
                    [
                        """
                        UPDATE cart_lines_view SET amount_cents = \(changed.amountCents)
                        WHERE user_id = \(user) AND loan_id = \(changed.loanID.rawValue)
                        """
                    ], writes: cart)
            case .itemRemoved(let removed):
                plan.add(["DELETE FROM cart_lines_view WHERE user_id = \(user) AND loan_id = \(removed.loanID.rawValue)"], writes: cart)
            case .cleared, .checkedOut:
                plan.add(Self.emptyCarts, [user], writes: cart)
            }
        }
        try plan.run(&session)
    }

    /// A line added; a loan already in the cart keeps its line.
    static let addLines = CartLineRow.table.insert("add cart lines") { "\($0)\nON CONFLICT (user_id, loan_id) DO NOTHING" }

    static let emptyCarts = SetWrite("empty carts", width: 1) { c in
        "DELETE FROM cart_lines_view WHERE user_id = ANY (\(c[0])::uuid[])"
    }
}

/// A row of `cart_lines_view`: a loan in a user's cart, and how much of it. `table` is its
/// one declaration.
struct CartLineRow: Sendable, Equatable {
    var user = UserID.none
    var loan = LoanID.none
    var amountCents = 0
    var addedAt = Date(timeIntervalSince1970: 0)
    /// The order lines were added in.
    var position: Int64 = 0

    static let table = ViewTable<CartLineRow>(
        "cart_lines_view", blank: CartLineRow(),
        [
            ViewColumn("user_id", "uuid", \.user),
            ViewColumn("loan_id", "uuid", \.loan),
            ViewColumn("amount_cents", "integer", \.amountCents),
            ViewColumn("added_at", "timestamp with time zone", \.addedAt),
            ViewColumn("position", "bigint", \.position),
        ])
}
