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
            let user = Aggregate.cart.id(of: event.streamID)?.rawValue
            if let user, let last = emptiedLast[user], index < last { continue }
            let cart = [WritePlan.Row(.cart, user)]
            switch try Aggregate.cart.codec.decode(event) {
            case .itemAdded(let added):
                plan.add(Self.addLines, [user, added.loanID.rawValue, added.amountCents, event.recordedAt, event.position], writes: cart)
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

    static let addLines = SetWrite("add cart lines", width: 5) { c in
        """
        INSERT INTO cart_lines_view (user_id, loan_id, amount_cents, added_at, position)
        SELECT * FROM unnest(\(c[0])::uuid[], \(c[1])::uuid[], \(c[2])::int4[], \(c[3])::timestamptz[], \(c[4])::int8[])
        ON CONFLICT (user_id, loan_id) DO NOTHING
        """
    }

    static let emptyCarts = SetWrite("empty carts", width: 1) { c in
        "DELETE FROM cart_lines_view WHERE user_id = ANY (\(c[0])::uuid[])"
    }
}
