import Foundation
import Marketplace
import Postgres

/// A projection's writes for a batch of events, run set-based: one statement per shape of
/// write and step, not one per event.
///
/// Each write names the rows it reads and writes (`Row`). A write runs at the step after the
/// last earlier write it conflicts with: one that wrote a row it reads or writes, or read a
/// row it writes. Writes of one step never conflict, so the order they run in cannot be
/// told; every conflicting pair runs in the events' order. The views end as they would
/// event by event, in as many steps as the longest chain of conflicts, whatever the batch's
/// size: an item's posting, its bids, their fates, its reservation and closing are five; a
/// loan takes two for each share bought in the batch (the share, then the lenders counted).
///
/// Naming every row a write touches is the contract: a row the projection itself writes and
/// another write reads must be named by both. Rows only other projections write (they have
/// applied the whole batch already) need not be.
struct WritePlan {
    /// A row of a view, by its table and key: what a write conflicts on.
    struct Row: Hashable {
        var table: Table
        var key: UUID?

        init(_ table: Table, _ key: UUID?) {
            self.table = table
            self.key = key
        }

        init<Tag>(_ table: Table, _ key: Identifier<Tag>?) { self.init(table, key?.rawValue) }
    }

    /// The tables whose rows conflict.
    enum Table: Hashable {
        case item, bid, user, card, cart, loan
        /// All of a loan's shares: one is bought, all are counted.
        case loanShares
        /// All of a loan's lenders, as its news reads them.
        case loanLenders
    }

    /// One statement for every row given to `shape` at a step (its columns, each an array),
    /// or, without a shape, statements run as they are, in order.
    private struct Batch {
        var shape: SetWrite?
        var columns: [PostgresBatchColumn] = []
        var statements: [PostgresQuery] = []
        var copy: PostgresCopyRows?
    }

    private var steps: [[Batch]] = []
    private var lastWrite: [Row: Int] = [:]
    private var lastRead: [Row: Int] = [:]
    /// The step the next write may run at, at the earliest: after a barrier.
    private var floor = 0

    var isEmpty: Bool { steps.isEmpty }

    /// One row of `shape`'s statement, its values in the shape's column order.
    mutating func add(_ shape: SetWrite, _ values: [any PostgresEncodable], reads: [Row] = [], writes: [Row]) {
        add(shape, rows: [values], reads: reads, writes: writes)
    }

    /// Rows of `shape`'s statement that are one write: they run at the same step.
    mutating func add(_ shape: SetWrite, rows: [[any PostgresEncodable]], reads: [Row] = [], writes: [Row]) {
        let step = schedule(reads: reads, writes: writes)
        let index =
            steps[step].firstIndex { $0.shape?.name == shape.name }
            ?? {
                steps[step].append(Batch(shape: shape, columns: Array(repeating: PostgresBatchColumn(), count: shape.width)))
                return steps[step].count - 1
            }()
        for values in rows {
            precondition(values.count == shape.width, "\(shape.name) takes \(shape.width) values")
            for (column, value) in values.enumerated() { steps[step][index].columns[column].append(value) }
        }
    }

    /// One row sent by `COPY` into `target` (SQL: a constant) at its step: for a build's fresh
    /// tables, a row already worked out (no `ON CONFLICT`; the statement reads no other row,
    /// and `reads` only keeps it after the rows it stands on).
    mutating func add(copy target: String, _ values: [any PostgresEncodable], reads: [Row] = [], writes: [Row]) {
        let step = schedule(reads: reads, writes: writes)
        let index =
            steps[step].firstIndex { $0.copy?.target == target }
            ?? {
                steps[step].append(Batch(copy: PostgresCopyRows(unsafeRawTarget: target, width: values.count)))
                return steps[step].count - 1
            }()
        steps[step][index].copy!.append(values)
    }

    /// Statements run as they are, at their step, in order.
    mutating func add(_ statements: [PostgresQuery], reads: [Row] = [], writes: [Row]) {
        let step = schedule(reads: reads, writes: writes)
        steps[step].append(Batch(statements: statements))
    }

    /// Statements that may touch any row: after every write before them, before every write
    /// after them.
    mutating func barrier(_ statements: [PostgresQuery]) {
        let step = steps.count
        steps.append([Batch(statements: statements)])
        floor = step + 1
    }

    /// The step a write with these rows runs at, noted as the last to read and write them.
    private mutating func schedule(reads: [Row], writes: [Row]) -> Int {
        var step = floor
        for row in writes {
            if let last = lastWrite[row] { step = max(step, last + 1) }
            if let last = lastRead[row] { step = max(step, last + 1) }
        }
        for row in reads {
            if let last = lastWrite[row] { step = max(step, last + 1) }
        }
        for row in writes { lastWrite[row] = step }
        for row in reads { lastRead[row] = max(lastRead[row] ?? step, step) }
        while steps.count <= step { steps.append([]) }
        return step
    }

    /// Runs every step in order, and empties the plan.
    mutating func run(_ session: inout PostgresSession) throws {
        for step in steps {
            for batch in step {
                if let shape = batch.shape { try session.query(shape.statement(batch.columns), prepared: true) }
                for statement in batch.statements { try session.query(statement, prepared: true) }
                if let copy = batch.copy { try session.copy(copy) }
            }
        }
        self = WritePlan()
    }
}

/// A write's set-based statement: `statement` gets one array per column (rows in the order
/// added) and writes them all, each row as the single-row statement would.
struct SetWrite: Sendable {
    let name: String
    let width: Int
    let statement: @Sendable ([PostgresBatchColumn]) -> PostgresQuery

    init(_ name: String, width: Int, _ statement: @escaping @Sendable ([PostgresBatchColumn]) -> PostgresQuery) {
        self.name = name
        self.width = width
        self.statement = statement
    }
}
