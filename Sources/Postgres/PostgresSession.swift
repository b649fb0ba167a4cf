import CLibPQ
import Logging
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Synchronous access to one connection, valid only inside `withBlockingSession`, on its thread.
public struct PostgresSession: ~Copyable {
    let pg: OpaquePointer
    var prepared: Set<String>
    /// Statements sent in pipeline mode since the last sync; nil when not pipelining.
    var unsynced: Int?
    /// The statements prepared in the pipeline since the last sync, by their place in it: a
    /// prepare that an earlier error skipped never happened, and must not be counted done.
    var preparesInFlight: [Int: String] = [:]
    /// Statements `recording` keeps instead of sending; nil when not recording.
    var recorded: [RecordedStatement]?

    /// Runs one statement; with `prepared`, prepares it on first use and then only executes it.
    /// In `pipelined`, it is only sent, and answers no rows.
    @discardableResult
    public mutating func query(_ query: PostgresQuery, prepared usePrepared: Bool = false) throws -> PostgresRows {
        if recorded != nil {
            recorded!.append(RecordedStatement(.query(query, prepared: usePrepared)))
            return PostgresRows(columns: [], cells: [], affectedRows: 0)
        }
        if unsynced != nil { return try send(query, prepared: usePrepared) }
        guard usePrepared else { return try PostgresConnection.execute(pg, query) }
        let name = PostgresQuery.preparedName(query)
        if !prepared.contains(name) {
            if prepared.count >= Self.preparedLimit {
                // Lists prepare a statement per set of filters: thousands of shapes in all, each
                // a plan kept in the server's memory for as long as the connection lives.
                _ = try PostgresConnection.executeSimple(pg, "DEALLOCATE ALL")
                prepared.removeAll()
            }
            try PostgresConnection.prepare(pg, name: name, query)
            prepared.insert(name)
        }
        do {
            return try PostgresConnection.executePrepared(pg, name: name, query)
        } catch let error as PostgresError where error.sqlState == "26000" {
            // The server forgot it (DISCARD ALL, say): prepare again, once.
            try PostgresConnection.prepare(pg, name: name, query)
            return try PostgresConnection.executePrepared(pg, name: name, query)
        }
    }

    /// Runs `body` with its statements kept, not sent, and gives them back: what `pipelined`
    /// would send (they answer no rows), for one thread to make a batch's statements while
    /// another connection sends the last batch's. `pipelined(recorded:)` sends them.
    public mutating func recording(_ body: (inout PostgresSession) throws -> Void) throws -> [RecordedStatement] {
        precondition(recorded == nil && unsynced == nil, "recording inside a recording or a pipeline")
        recorded = []
        defer { recorded = nil }
        try body(&self)
        return recorded ?? []
    }

    /// Statements `recording` kept, sent pipelined; a COPY between them ends the pipeline
    /// before it and starts another after it (COPY cannot be pipelined).
    public mutating func pipelined(recorded statements: [RecordedStatement]) throws {
        var rest = statements[...]
        while !rest.isEmpty {
            let queries = rest.prefix { if case .query = $0.kind { true } else { false } }
            rest = rest.dropFirst(queries.count)
            if !queries.isEmpty {
                try pipelined { session in
                    for case .query(let query, let prepared) in queries.lazy.map(\.kind) { try session.query(query, prepared: prepared) }
                }
            }
            if case .copy(let rows) = rest.first?.kind {
                try copy(rows)
                rest = rest.dropFirst()
            }
        }
    }

    /// Sends `rows` by `COPY … FROM STDIN`. Kept for later while `recording`; not in a pipeline.
    public mutating func copy(_ rows: PostgresCopyRows) throws {
        if recorded != nil {
            recorded!.append(RecordedStatement(.copy(rows)))
            return
        }
        guard unsynced == nil else { throw PostgresError(.encoding, message: "COPY cannot be sent in a pipeline") }
        try PostgresConnection.copy(pg, rows)
    }

    /// Runs `body` with its statements pipelined (libpq's pipeline mode): sent one after another
    /// without waiting for each answer, so a thousand small writes cost about one round trip.
    /// Statements answer no rows inside; the first error is thrown at the end (or at an
    /// intermediate sync), and the statements after it in the pipeline are not run. For
    /// writes whose results are not needed, such as a projection's, inside a transaction.
    public mutating func pipelined<T>(_ body: (inout PostgresSession) throws -> T) throws -> T {
        precondition(recorded == nil, "recording keeps statements only; it cannot pipeline")
        guard unsynced == nil else { return try body(&self) }
        return try inPipelineMode { session in
            let result: T
            do {
                result = try body(&session)
            } catch {
                _ = try? session.sync()
                throw error
            }
            try session.sync()
            return result
        }
    }

    /// Runs read statements pipelined in one REPEATABLE READ, READ ONLY transaction: one
    /// round trip and one snapshot for all of them. Their rows come back in order; the first
    /// error is thrown, and the transaction is rolled back. With `prepared`, each statement is
    /// prepared on the connection the first time (their SQL text must not vary). With
    /// `genericIndexPlans` too, each is planned once for any values and takes its order from
    /// an index where one gives it (`plan_cache_mode = force_generic_plan`, `enable_sort =
    /// off`, for the transaction): a generic plan comes from average statistics, and made
    /// from many short lists it sorts what a bitmap scan found, every row of a long one.
    public mutating func snapshot(
        _ queries: [PostgresQuery], prepared usePrepared: Bool = false, genericIndexPlans: Bool = false
    ) throws -> [PostgresRows] {
        precondition(recorded == nil, "recording keeps statements only; it cannot read a snapshot")
        guard unsynced == nil else { throw PostgresError(.connection, message: "a snapshot cannot run inside a pipeline") }
        // One sync for all of them: more would sync on the way and lose the rows before.
        // A first prepared run sends a prepare before each statement: twice as many in flight.
        precondition(usePrepared || !genericIndexPlans, "only prepared statements keep a plan")
        var opening: [PostgresQuery] = ["BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"]
        if genericIndexPlans {
            opening.append(
                "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_sort', 'off', true)")
        }
        let messages = usePrepared ? 2 : 1
        guard messages * queries.count + opening.count + 1 < Self.pipelineDepth else {
            throw PostgresError(
                .encoding,
                message: "a snapshot takes at most \((Self.pipelineDepth - opening.count - 2) / messages) statements")
        }
        let statements = opening + queries + ["COMMIT"]
        do {
            return try inPipelineMode { session in
                do {
                    for (index, statement) in statements.enumerated() {
                        try session.send(statement, prepared: usePrepared && index >= opening.count && index < statements.count - 1)
                    }
                } catch {
                    // A statement refused before it was sent (a NUL in a value): what went before
                    // it is synced, so that the pipeline can be left and the transaction rolled back.
                    _ = try? session.sync()
                    throw error
                }
                // The opening's and COMMIT's answers are not the caller's.
                return Array(try session.sync(collecting: true).dropFirst(opening.count).dropLast())
            }
        } catch {
            if PQstatus(pg) == CONNECTION_OK, PQtransactionStatus(pg) != PQTRANS_IDLE {
                _ = try? PostgresConnection.executeSimple(pg, "ROLLBACK")
            }
            throw error
        }
    }

    /// Runs read statements pipelined in the caller's transaction: one round trip for all of
    /// them, their rows in order; the first error is thrown (and the transaction is aborted,
    /// as any failed statement leaves it). Not inside a pipeline or a recording, where nothing
    /// answers: for what a projection reads of its views before it writes them.
    public mutating func reads(_ queries: [PostgresQuery], prepared usePrepared: Bool = false) throws -> [PostgresRows] {
        precondition(recorded == nil, "recording keeps statements only; it cannot read")
        guard unsynced == nil else { throw PostgresError(.connection, message: "reads cannot run inside a pipeline") }
        guard !queries.isEmpty else { return [] }
        guard (usePrepared ? 2 : 1) * queries.count + 1 < Self.pipelineDepth else {
            throw PostgresError(.encoding, message: "one round of reads takes at most \(Self.pipelineDepth / 2 - 1) statements")
        }
        return try inPipelineMode { session in
            do {
                for query in queries { try session.send(query, prepared: usePrepared) }
            } catch {
                _ = try? session.sync()
                throw error
            }
            return try session.sync(collecting: true)
        }
    }

    /// Runs `body` in libpq's pipeline mode, and leaves it after.
    private mutating func inPipelineMode<T>(_ body: (inout PostgresSession) throws -> T) throws -> T {
        guard PQenterPipelineMode(pg) == 1 else { throw sendError() }
        unsynced = 0
        defer {
            unsynced = nil
            PQexitPipelineMode(pg)
        }
        return try body(&self)
    }

    /// Statements between syncs: their answers (about 20 bytes each) must fit the socket's
    /// buffers, since nothing reads them until the sync; else both sides would wait.
    static let pipelineDepth = 500

    /// Statements a connection keeps prepared before it forgets them all and starts again.
    public static let preparedLimit = 256

    @discardableResult
    private mutating func send(_ query: PostgresQuery, prepared usePrepared: Bool) throws -> PostgresRows {
        try PostgresConnection.checkEncodable(query)
        let types = query.bindings.map { Oid($0.type.rawValue) }
        let count = Int32(query.bindings.count)
        var sent: Int32
        // Past the limit a new shape is sent unprepared (the folds' write-backs prepare one
        // update per set of columns changed); `query` outside a pipeline starts afresh.
        let name = usePrepared ? PostgresQuery.preparedName(query) : ""
        if usePrepared && (prepared.contains(name) || prepared.count < Self.preparedLimit) {
            if !prepared.contains(name) {
                guard PQsendPrepare(pg, name, query.sql, count, types) == 1 else { throw sendError() }
                prepared.insert(name)
                preparesInFlight[unsynced!] = name
                unsynced! += 1
            }
            sent = withParameterValues(query.bindings) { values in PQsendQueryPrepared(pg, name, count, values, nil, nil, 0) }
        } else {
            sent = withParameterValues(query.bindings) { values in
                PQsendQueryParams(pg, query.sql, count, types, values, nil, nil, 0)
            }
        }
        guard sent == 1 else { throw sendError() }
        unsynced! += 1
        if unsynced! >= Self.pipelineDepth { try sync() }
        return PostgresRows(columns: [], cells: [], affectedRows: 0)
    }

    private func sendError() -> PostgresError {
        PostgresError(.connection, message: String(cString: PQerrorMessage(pg)).trimmingWhitespace())
    }

    /// Sends a sync and reads every answer up to it; throws the first error among them. With
    /// `collecting`, gives back each statement's rows, in order.
    @discardableResult
    private mutating func sync(collecting: Bool = false) throws -> [PostgresRows] {
        guard PQpipelineSync(pg) == 1 else { throw sendError() }
        var answers = [PostgresRows]()
        unsynced = 0
        let prepares = preparesInFlight
        preparesInFlight = [:]
        var first: PostgresError?
        var nulls = 0
        var statement = 0
        while true {
            guard let result = PQgetResult(pg) else {
                // One NULL ends each statement's answers; two in a row: nothing more is coming.
                nulls += 1
                statement += 1
                if nulls > 1 { throw first ?? sendError() }
                continue
            }
            nulls = 0
            let status = PQresultStatus(result)
            if let name = prepares[statement], status != PGRES_COMMAND_OK, status != PGRES_PIPELINE_SYNC {
                prepared.remove(name)
            }
            // A prepare's answer is not a statement's rows: collected, it would shift them all.
            if collecting, prepares[statement] == nil, status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK {
                answers.append(try PostgresConnection.consume(result, on: pg))  // clears it
                continue
            }
            defer { PQclear(result) }
            switch status {
            case PGRES_PIPELINE_SYNC:
                if let first { throw first }
                return answers
            case PGRES_FATAL_ERROR:
                if first == nil { first = PostgresConnection.error(from: result, on: pg) }
            default:
                break
            }
        }
    }

    /// Runs `body` in a transaction: COMMIT when it returns, ROLLBACK when it throws.
    public mutating func withTransaction<T>(
        _ mode: TransactionMode = .readWrite, _ body: (inout PostgresSession) throws -> T
    ) throws -> T {
        precondition(recorded == nil, "recording keeps statements only; it cannot open a transaction")
        _ = try PostgresConnection.executeSimple(pg, mode.begin)
        let result: T
        do {
            result = try body(&self)
        } catch {
            if PQstatus(pg) == CONNECTION_OK { _ = try? PostgresConnection.executeSimple(pg, "ROLLBACK") }
            throw error
        }
        try PostgresConnection.commit(pg)
        return result
    }
}

/// How a transaction reads.
public enum TransactionMode: Sendable {
    /// READ COMMITTED: each statement sees what committed before it.
    case readWrite
    /// REPEATABLE READ: every statement sees the one snapshot taken by the first, so that a
    /// long read (a verification, a comparison) never sees half of what commits meanwhile.
    case snapshot
    /// The same snapshot, and no writes.
    case readOnlySnapshot

    var begin: String {
        switch self {
        case .readWrite: "BEGIN"
        case .snapshot: "BEGIN ISOLATION LEVEL REPEATABLE READ"
        case .readOnlySnapshot: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        }
    }
}

/// A statement `PostgresSession.recording` kept, to be sent later.
public struct RecordedStatement: Sendable {
    enum Kind: Sendable {
        case query(PostgresQuery, prepared: Bool)
        case copy(PostgresCopyRows)
    }

    let kind: Kind

    init(_ kind: Kind) { self.kind = kind }
}
