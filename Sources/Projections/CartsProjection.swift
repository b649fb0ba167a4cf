import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// `cart_lines_view`: each user's cart, line by line. Stated once, as a fold over its rows
/// (`Carts.fold`): an append reads the carts its batch touches, whole (a cart is a few lines),
/// folds, and writes back what changed, deleting the lines it took away; a build holds every
/// cart, folds the same, and copies the lines left at its end.
public struct CartsProjection: ReadingProjection {
    public let name = "carts"
    public init() {}

    /// The carts of a batch's events, by their users.
    static func carts(_ events: [ProjectedEvent]) -> Set<UserID> {
        Set(events.lazy.filter { Aggregate.cart.owns($0.streamID) }.compactMap { Aggregate.cart.id(of: $0.streamID) })
    }

    public func reads(_ events: [ProjectedEvent]) -> [PostgresQuery] {
        let carts = Self.carts(events)
        return carts.isEmpty ? [] : [CartLineRow.table.rows(where: "user_id", in: carts)]
    }

    public func apply(_ events: [ProjectedEvent], read: [PostgresRows], _ session: inout PostgresSession) throws {
        let before = try read.flatMap { try $0.map(CartLineRow.table.decode) }
        var carts = Carts()
        for line in before { carts.lines[line.user, default: [:]][line.loan] = line }
        for event in events where Aggregate.cart.owns(event.streamID) { try carts.fold(event) }
        let after = carts.lines.values.flatMap(\.values)
        try CartLineRow.table.delete(
            before.filter { carts.lines[$0.user]?[$0.loan] == nil }, key: "user_id", "loan_id", session: &session)
        try CartLineRow.table.writeBack(
            after, before: Dictionary(uniqueKeysWithValues: before.map { (CartLineRow.Key($0), $0) }), key: CartLineRow.Key.init,
            keyColumns: "user_id", "loan_id", insert: Self.addLines, &session)
    }

    public func rebuild(_ events: [ProjectedEvent], _ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        try memory.with(name, initial: Carts()) { carts in
            for event in events where Aggregate.cart.owns(event.streamID) { try carts.fold(event) }
        }
    }

    /// The lines the log left in the carts, in the order they were added.
    public func finishRebuild(_ session: inout PostgresSession, _ memory: RebuildMemory) throws {
        let copy = memory.with(name, initial: Carts()) { carts in
            defer { carts = Carts() }
            return CartLineRow.table.copy(carts.lines.values.flatMap(\.values).sorted { $0.position < $1.position })
        }
        try session.copy(copy)
    }

    /// A line added (the insert keeps one written already, as the fold keeps the first).
    static let addLines = CartLineRow.table.insert("add cart lines") { "\($0)\nON CONFLICT (user_id, loan_id) DO NOTHING" }

    /// The carts the fold holds, each user's lines by loan.
    struct Carts: Sendable {
        var lines: [UserID: [LoanID: CartLineRow]] = [:]

        /// `event` made to the carts: the projection's one statement of what each event does.
        /// A cart's stream is its user's.
        mutating func fold(_ event: ProjectedEvent) throws {
            guard let user = Aggregate.cart.id(of: event.streamID) else { return }
            switch try Aggregate.cart.codec.decode(event) {
            case .itemAdded(let added):
                // A loan already in the cart keeps its line.
                guard lines[user]?[added.loanID] == nil else { return }
                lines[user, default: [:]][added.loanID] = CartLineRow(
                    user: user, loan: added.loanID, amountCents: added.amountCents, addedAt: event.recordedAt, position: event.position)
            case .amountChanged(let changed):
                lines[user]?[changed.loanID]?.amountCents = changed.amountCents
            case .itemRemoved(let removed):
                lines[user]?[removed.loanID] = nil
            case .cleared, .checkedOut:
                lines[user] = nil
            }
            if lines[user]?.isEmpty == true { lines[user] = nil }
        }
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

    /// A line's key: its user's cart and its loan.
    struct Key: Hashable {
        var user: UserID
        var loan: LoanID
        init(_ line: CartLineRow) { (user, loan) = (line.user, line.loan) }
    }
}
