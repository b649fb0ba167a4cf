import EventStore
import Foundation
import Marketplace
import UUIDs

/// One kind of stream: its category (the stream name's prefix), the type of its ids, its
/// events' codec, and its decider. Everything that names a stream, writes or reads its
/// events starts here.
public struct Aggregate<ID: CustomStringConvertible & Sendable, State: Sendable, Command: Sendable, Event: Sendable>: Sendable {
    public let category: String
    public let initial: State
    public let evolve: @Sendable (State, Event) -> State
    public let decide: @Sendable (Command, State, UserID) throws -> [Event]
    public let codec: DomainCodec<Event>

    /// The stream of the aggregate with this id.
    public func stream(_ id: ID) -> StreamID { StreamID(category, id) }

    /// Whether a stream is one of this aggregate's: its name is the category, then `-` or
    /// nothing (a category holds no `-`). By bytes: `stream.category` makes a String out of
    /// Characters, 1% of a rebuild's CPU, where every projection asks of every event.
    public func owns(_ stream: StreamID) -> Bool {
        let name = stream.rawValue.utf8
        guard name.starts(with: category.utf8) else { return false }
        return name.dropFirst(category.utf8.count).first.map { $0 == UInt8(ascii: "-") } ?? true
    }

    /// The id of one of this aggregate's streams, read once from its name (`category-<uuid>`):
    /// nil for another aggregate's stream or a name whose rest is no UUID. By bytes, as `owns`.
    public func id<Tag>(of stream: StreamID) -> ID? where ID == Identifier<Tag> {
        let name = stream.rawValue.utf8
        guard name.starts(with: category.utf8) else { return nil }
        let rest = name.dropFirst(category.utf8.count)
        guard rest.first == UInt8(ascii: "-"), let uuid = UUID(text: Substring(rest.dropFirst())) else { return nil }
        return ID(uuid)
    }
}

extension Aggregate where ID == UserID, State == UserState, Command == UserCommand, Event == UserEvent {
    /// The actor is the stream's own user: `decide` needs no other.
    public static let user = Aggregate(
        category: "user", initial: UserDecider.initial, evolve: UserDecider.evolve,
        decide: { command, state, _ in try UserDecider.decide(command, state) }, codec: .user)
}

extension Aggregate where ID == ItemID, State == ItemState, Command == ItemCommand, Event == ItemEvent {
    public static let item = Aggregate(
        category: "item", initial: ItemDecider.initial, evolve: ItemDecider.evolve,
        decide: { command, state, actor in try ItemDecider.decide(command, state, actor: actor) }, codec: .item)
}

extension Aggregate where ID == LoanID, State == LoanState, Command == LoanCommand, Event == LoanEvent {
    public static let loan = Aggregate(
        category: "loan", initial: LoanDecider.initial, evolve: LoanDecider.evolve,
        decide: { command, state, actor in try LoanDecider.decide(command, state, actor: actor) }, codec: .loan)
}

extension Aggregate where ID == UserID, State == CartState, Command == CartCommand, Event == CartEvent {
    /// A cart's stream is named by its owner's id, so the actor is the owner.
    public static let cart = Aggregate(
        category: "cart", initial: CartDecider.initial, evolve: CartDecider.evolve,
        decide: { command, state, actor in try CartDecider.decide(command, state, actor: actor) }, codec: .cart)
}

extension Aggregate where ID == ReportID, State == ReportState, Command == ReportCommand, Event == ReportEvent {
    /// A report's stream: filed by its reporter, resolved by an operator (each the actor).
    public static let report = Aggregate(
        category: "report", initial: ReportDecider.initial, evolve: ReportDecider.evolve,
        decide: { command, state, actor in try ReportDecider.decide(command, state, actor: actor) }, codec: .report)
}

extension StreamID {
    public static func user(_ id: UserID) -> StreamID { Aggregate.user.stream(id) }
    public static func item(_ id: ItemID) -> StreamID { Aggregate.item.stream(id) }
    public static func loan(_ id: LoanID) -> StreamID { Aggregate.loan.stream(id) }
    /// A cart is its owner's: named by the user's id.
    public static func cart(of user: UserID) -> StreamID { Aggregate.cart.stream(user) }
    public static func report(_ id: ReportID) -> StreamID { Aggregate.report.stream(id) }
}
