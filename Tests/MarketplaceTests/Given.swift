import Marketplace
import Testing

// One shape for every decider's test (issue 46):
//
//     given(.item, history).when(command, by: actor).then([events])
//     given(.item, history).when(command, by: actor).thenRefused(.conflict, "item_not_available")
//
// There is no clock here: the deciders read no time of their own. A command that depends on
// the day carries it (`today:`), so the test passes the clock in with the command.

/// A decider as a test drives it: where it starts, how an event changes its state, and how it
/// decides a command given by an actor.
struct Decider<State, Command, Event> {
    let initial: State
    let evolve: (State, Event) -> State
    let decide: (Command, State, UserID) throws -> [Event]

    /// The state after `events`, from `initial`.
    func fold(_ events: [Event]) -> State { events.reduce(initial, evolve) }
}

extension Decider where State == ItemState, Command == ItemCommand, Event == ItemEvent {
    static var item: Self { Self(initial: ItemDecider.initial, evolve: ItemDecider.evolve, decide: ItemDecider.decide) }
}

extension Decider where State == UserState, Command == UserCommand, Event == UserEvent {
    /// A user's stream decides for its own user: the actor is not the decider's to check.
    static var user: Self {
        Self(
            initial: UserDecider.initial, evolve: UserDecider.evolve,
            decide: { command, state, _ in try UserDecider.decide(command, state) })
    }
}

extension Decider where State == LoanState, Command == LoanCommand, Event == LoanEvent {
    static var loan: Self { Self(initial: LoanDecider.initial, evolve: LoanDecider.evolve, decide: LoanDecider.decide) }
}

extension Decider where State == CartState, Command == CartCommand, Event == CartEvent {
    static var cart: Self { Self(initial: CartDecider.initial, evolve: CartDecider.evolve, decide: CartDecider.decide) }
}

extension Decider where State == ReportState, Command == ReportCommand, Event == ReportEvent {
    static var report: Self { Self(initial: ReportDecider.initial, evolve: ReportDecider.evolve, decide: ReportDecider.decide) }
}

/// Given `history` in `decider`'s stream: what comes of a command.
func given<State, Command, Event>(_ decider: Decider<State, Command, Event>, _ history: [Event] = []) -> Given<State, Command, Event> {
    Given(decider: decider, state: decider.fold(history))
}

/// Given a state no history leads to (an older log's, changed by hand): what comes of a command.
func given<State, Command, Event>(_ decider: Decider<State, Command, Event>, state: State) -> Given<State, Command, Event> {
    Given(decider: decider, state: state)
}

struct Given<State, Command, Event> {
    let decider: Decider<State, Command, Event>
    /// The state the history folds to.
    let state: State

    /// When `actor` gives `command`. The actor is the system's unless said; the user decider
    /// takes none.
    func when(
        _ command: Command, by actor: UserID = .system, sourceLocation: SourceLocation = #_sourceLocation
    ) -> Then<Event> {
        do {
            return Then(result: .success(try decider.decide(command, state, actor)))
        } catch let error as DomainError {
            return Then(result: .failure(error))
        } catch {
            // A decider refuses with a rule; anything else is a defect, recorded here, and
            // refuses with no rule a test could expect.
            Issue.record("not a DomainError: \(error)", sourceLocation: sourceLocation)
            return Then(result: .failure(DomainError(.conflict, "<\(type(of: error))>", "\(error)")))
        }
    }
}

/// What a command came to: the events decided, or the rule it broke.
struct Then<Event> {
    let result: Result<[Event], DomainError>

    /// The rule broken; nil if the command was decided.
    var error: DomainError? {
        if case .failure(let error) = result { return error }
        return nil
    }

    /// The first invalid field's code, else the rule's code; nil if the command was decided.
    var refusal: String? { error.map { $0.fields.first?.code ?? $0.code } }

    /// The events decided; a refusal is recorded against the test's line and thrown.
    func thenEvents(sourceLocation: SourceLocation = #_sourceLocation) throws -> [Event] {
        switch result {
        case .success(let events): return events
        case .failure(let error): return try #require(nil as [Event]?, "refused: \(error)", sourceLocation: sourceLocation)
        }
    }

    /// The rule broken, to look into; a decision is recorded against the test's line and thrown.
    func thenError(sourceLocation: SourceLocation = #_sourceLocation) throws -> DomainError {
        switch result {
        case .success(let events):
            return try #require(nil as DomainError?, "expected a refusal, got \(events)", sourceLocation: sourceLocation)
        case .failure(let error): return error
        }
    }

    /// The command is decided, whatever the events.
    func thenAccepted(_ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        if case .failure(let error) = result {
            Issue.record("refused: \(error)\(note(comment))", sourceLocation: sourceLocation)
        }
    }

    /// The command is refused with `code`, of `kind`.
    func thenRefused(_ kind: DomainError.Kind, _ code: String, sourceLocation: SourceLocation = #_sourceLocation) {
        switch result {
        case .success(let events): Issue.record("expected \(code), got \(events)", sourceLocation: sourceLocation)
        case .failure(let error):
            #expect(error.kind == kind, sourceLocation: sourceLocation)
            #expect(error.code == code, sourceLocation: sourceLocation)
        }
    }

    /// The command is refused with `code`, of whatever kind.
    func thenRefused(_ code: String, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        switch result {
        case .success(let events):
            Issue.record("expected \(code), got \(events)\(note(comment))", sourceLocation: sourceLocation)
        case .failure(let error): #expect(error.code == code, comment, sourceLocation: sourceLocation)
        }
    }
}

extension Then where Event: Equatable {
    /// The command is decided, to exactly `expected`.
    func then(_ expected: [Event], _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        switch result {
        case .success(let events): #expect(events == expected, comment, sourceLocation: sourceLocation)
        case .failure(let error):
            Issue.record("expected \(expected), refused: \(error)\(note(comment))", sourceLocation: sourceLocation)
        }
    }
}

/// A test's comment, after an issue's own words.
private func note(_ comment: Comment?) -> String { comment.map { " (\($0))" } ?? "" }
