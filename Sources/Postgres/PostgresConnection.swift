import CLibPQ
import Logging
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One libpq connection.
///
/// Every libpq call runs on the thread pool it was opened with, never on an event loop or
/// Swift's cooperative pool, and inside `handle.withLock`: the lock is the only path to the
/// `PGconn`, so one thread at a time uses it. Results are copied into Swift values and
/// cleared inside that same call.
public final class PostgresConnection: Sendable {
    /// The PGconn and what has been prepared on it.
    struct Handle {
        var pg: OpaquePointer?
        /// Names of the statements prepared on this connection (`PQprepare`).
        var prepared: Set<String> = []
    }

    // Invariant: the PGconn is reached only inside `withLock`; nil once closed.
    private let handle: Mutex<Handle>
    private let threadPool: NIOThreadPool
    /// The server process serving this connection (`pg_backend_pid()`).
    public let backendPID: Int32
    public let configuration: PostgresConfiguration

    private init(handle: sending OpaquePointer, threadPool: NIOThreadPool, configuration: PostgresConfiguration) {
        self.backendPID = PQbackendPID(handle)
        self.handle = Mutex(Handle(pg: handle))
        self.threadPool = threadPool
        self.configuration = configuration
    }

    deinit {
        close()
    }

    /// Opens a connection on `threadPool`, in UTC with ISO dates.
    public static func connect(
        _ configuration: PostgresConfiguration, on threadPool: NIOThreadPool
    ) async throws -> PostgresConnection {
        try await run(on: threadPool) {
            var keywords = ["connect_timeout", "application_name"]
            var values = [String(configuration.connectTimeoutSeconds), configuration.applicationName]
            if let attributes = configuration.targetSessionAttributes {
                keywords.append("target_session_attrs")
                values.append(attributes)
            }
            // Earlier keywords are defaults: the connection string, expanded last, overrides them.
            keywords.append("dbname")
            values.append(configuration.connectionString)
            let pg = withCStringArray(keywords) { keywords in
                withCStringArray(values) { values in PQconnectdbParams(keywords, values, 1) }
            }
            guard let pg else {
                throw PostgresError(.connection, message: "cannot connect to \(configuration.target): out of memory")
            }
            guard PQstatus(pg) == CONNECTION_OK else {
                let reason = String(cString: PQerrorMessage(pg)).trimmingWhitespace()
                PQfinish(pg)
                throw PostgresError(.connection, message: "cannot connect to \(configuration.target): \(reason)")
            }
            // NOTICEs ("relation already exists, skipping") would go to stderr unasked.
            PQsetNoticeProcessor(pg, { _, _ in }, nil)
            do {
                // Floats as their shortest exact text, whatever the database says: a place read
                // and written back (a market cell's move) must be the same double.
                var setup = "SET TIME ZONE 'UTC'; SET DateStyle = 'ISO, YMD'; SET bytea_output = 'hex'; SET extra_float_digits = 1"
                if let role = configuration.role {
                    guard let quoted = PQescapeIdentifier(pg, role, role.utf8.count) else {
                        throw PostgresError(.encoding, message: "cannot quote role name \(role)")
                    }
                    setup += "; SET ROLE \(String(cString: quoted))"
                    PQfreemem(quoted)
                }
                _ = try executeSimple(pg, setup)
            } catch {
                PQfinish(pg)
                throw error
            }
            return PostgresConnection(handle: pg, threadPool: threadPool, configuration: configuration)
        }
    }

    /// Runs one statement with bound parameters and returns its rows.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await withHandle { pg in try Self.execute(pg, query) }
    }

    /// Runs a statement that is prepared on this connection the first time it is used
    /// (`PQprepare`), then only executed: no parsing or planning on the hot path. For the
    /// few statements that run constantly; their SQL text must not vary.
    @discardableResult
    public func query(_ query: PostgresQuery, prepared: Bool) async throws -> PostgresRows {
        try await withBlockingSession { session in try session.query(query, prepared: prepared) }
    }

    /// Gives `body` this connection and a thread of its pool for as long as it runs, to
    /// make synchronous calls without a thread hop each: for a loop that feeds the database
    /// as fast as it answers. `body` blocks that thread, so keep it for work that never waits
    /// on anything but the database and the caller's own queue.
    public func withBlockingSession<T: Sendable>(
        _ body: @escaping @Sendable (inout PostgresSession) throws -> T
    ) async throws -> T {
        try await Self.run(on: threadPool) { [self] in
            try handle.withLock { handle in
                guard let pg = handle.pg else { throw PostgresError(.connection, message: "the connection is closed") }
                var session = PostgresSession(pg: pg, prepared: handle.prepared)
                defer { handle.prepared = session.prepared }
                return try body(&session)
            }
        }
    }

    /// Runs SQL text that may hold several statements and no parameters (the simple query
    /// protocol), as migrations need. Never pass it text that came from a user.
    public func execute(unsafeSQL sql: String) async throws {
        try await withHandle { pg in _ = try Self.executeSimple(pg, sql) }
    }

    /// Runs `body` in a transaction: COMMIT when it returns, ROLLBACK when it throws.
    @discardableResult
    public func withTransaction<Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await query("BEGIN")
        let result: Result
        do {
            result = try await body(self)
        } catch {
            if !isBroken { _ = try? await query("ROLLBACK") }
            throw error
        }
        try await withHandle { pg in try Self.commit(pg) }
        return result
    }

    /// COMMIT, or an error when the server rolled back instead: COMMIT of a transaction that
    /// failed inside (an error the body caught) answers ROLLBACK.
    static func commit(_ pg: OpaquePointer) throws {
        let answer = try executeSimple(pg, "COMMIT")
        guard answer == "COMMIT" else {
            throw PostgresError(.server, message: "the transaction failed and was rolled back (\(answer))")
        }
    }

    /// Quotes a name for use as an identifier (PQescapeIdentifier).
    public func quoteIdentifier(_ name: String) async throws -> String {
        try await withHandle { pg in
            guard let quoted = PQescapeIdentifier(pg, name, name.utf8.count) else {
                throw PostgresError(.encoding, message: String(cString: PQerrorMessage(pg)).trimmingWhitespace())
            }
            defer { PQfreemem(quoted) }
            return String(cString: quoted)
        }
    }

    /// True once the connection is closed or libpq has seen it break.
    public var isBroken: Bool {
        handle.withLock { handle in
            guard let pg = handle.pg else { return true }
            return PQstatus(pg) != CONNECTION_OK
        }
    }

    /// True when an idle connection cannot be trusted: it is broken, inside a transaction,
    /// or the server has sent something unasked (most often a FATAL before hanging up, as on
    /// `pg_terminate_backend` or a restart). Never blocks: a zero-timeout poll of the socket.
    var needsReplacing: Bool {
        handle.withLock { handle in
            guard let pg = handle.pg, PQstatus(pg) == CONNECTION_OK, PQtransactionStatus(pg) == PQTRANS_IDLE else { return true }
            var descriptor = pollfd(fd: PQsocket(pg), events: Int16(POLLIN), revents: 0)
            return poll(&descriptor, 1, 0) != 0
        }
    }

    /// Closes the connection; later calls fail with `.connection`.
    public func close() {
        handle.withLock { handle in
            if let pg = handle.pg { PQfinish(pg) }
            handle.pg = nil
            handle.prepared = []
        }
    }

    /// Runs `body` with the PGconn on the thread pool, holding the lock.
    func withHandle<T: Sendable>(_ body: @escaping @Sendable (OpaquePointer) throws -> T) async throws -> T {
        try await Self.run(on: threadPool) { [self] in
            try handle.withLock { handle in
                guard let pg = handle.pg else { throw PostgresError(.connection, message: "the connection is closed") }
                return try body(pg)
            }
        }
    }

    static func run<T: Sendable>(on threadPool: NIOThreadPool, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        do {
            return try await threadPool.runIfActive(body)
        } catch is NIOThreadPoolError.ThreadPoolInactive {
            throw PostgresError(.shutDown, message: "the database thread pool has shut down")
        }
    }

    // MARK: Blocking libpq calls: run only on the thread pool, under the handle's lock.

    static func execute(_ pg: OpaquePointer, _ query: PostgresQuery) throws -> PostgresRows {
        try checkEncodable(query)
        let types = query.bindings.map { Oid($0.type.rawValue) }
        let result = withParameterValues(query.bindings) { values in
            PQexecParams(pg, query.sql, Int32(query.bindings.count), types, values, nil, nil, 0)
        }
        return try consume(result, on: pg)
    }

    static func prepare(_ pg: OpaquePointer, name: String, _ query: PostgresQuery) throws {
        try checkEncodable(query)
        let types = query.bindings.map { Oid($0.type.rawValue) }
        _ = try consume(PQprepare(pg, name, query.sql, Int32(query.bindings.count), types), on: pg)
    }

    static func executePrepared(_ pg: OpaquePointer, name: String, _ query: PostgresQuery) throws -> PostgresRows {
        try checkEncodable(query)
        let result = withParameterValues(query.bindings) { values in
            PQexecPrepared(pg, name, Int32(query.bindings.count), values, nil, nil, 0)
        }
        return try consume(result, on: pg)
    }

    /// Runs one or more statements without parameters; returns the last command tag.
    static func executeSimple(_ pg: OpaquePointer, _ sql: String) throws -> String {
        guard !sql.utf8.contains(0) else {
            throw PostgresError(.encoding, message: "SQL text contains a NUL character")
        }
        let result = PQexec(pg, sql)
        let tag = result.map { String(cString: PQcmdStatus($0)) } ?? ""
        _ = try consume(result, on: pg)
        return tag
    }

    /// Copies a result into Swift values, or turns it into an error; clears it either way.
    static func consume(_ result: OpaquePointer?, on pg: OpaquePointer) throws -> PostgresRows {
        guard let result else {
            throw PostgresError(.connection, message: String(cString: PQerrorMessage(pg)).trimmingWhitespace())
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            let rowCount = Int(PQntuples(result))
            let columnCount = Int(PQnfields(result))
            var columns = [PostgresColumn]()
            columns.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                columns.append(
                    PostgresColumn(
                        name: String(cString: PQfname(result, Int32(column))),
                        type: PostgresType(rawValue: UInt32(PQftype(result, Int32(column))))))
            }
            var cells = [Range<Int>?]()
            cells.reserveCapacity(rowCount * columnCount)
            var size = 0
            for row in 0..<Int32(rowCount) {
                for column in 0..<Int32(columnCount) { size += Int(PQgetlength(result, row, column)) + 1 }
            }
            var bytes = [UInt8]()
            bytes.reserveCapacity(size)
            for row in 0..<Int32(rowCount) {
                for column in 0..<Int32(columnCount) {
                    if PQgetisnull(result, row, column) == 1 {
                        cells.append(nil)
                    } else {
                        let length = Int(PQgetlength(result, row, column))
                        let start = bytes.count
                        PQgetvalue(result, row, column).withMemoryRebound(to: UInt8.self, capacity: length) {
                            bytes.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
                        }
                        bytes.append(0)
                        cells.append(start..<start + length)
                    }
                }
            }
            let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
            return PostgresRows(columns: columns, bytes: bytes, cells: cells, affectedRows: affected)
        default:
            throw error(from: result, on: pg)
        }
    }

    static func error(from result: OpaquePointer, on pg: OpaquePointer) -> PostgresError {
        func field(_ code: Character) -> String? {
            guard let value = PQresultErrorField(result, Int32(code.asciiValue!)) else { return nil }
            return String(cString: value)
        }
        let message = field("M") ?? String(cString: PQresultErrorMessage(result)).trimmingWhitespace()
        let kind: PostgresError.Kind = PQstatus(pg) == CONNECTION_OK ? .server : .connection
        return PostgresError(
            kind, message: message, sqlState: field("C"), detail: field("D"), hint: field("H"),
            constraint: field("n"), table: field("t"), schema: field("s"), column: field("c"))
    }

    static func checkEncodable(_ query: PostgresQuery) throws {
        guard !holdsNUL(query.sql) else {
            throw PostgresError(.encoding, message: "SQL text contains a NUL character")
        }
        for (index, binding) in query.bindings.enumerated() where binding.text.map(holdsNUL) == true {
            throw PostgresError(
                .encoding, message: "parameter $\(index + 1) contains a NUL character, which PostgreSQL text cannot hold")
        }
    }
}

/// memchr over the contiguous bytes: `utf8.contains` went byte by byte through the view's
/// iterator, 1% of a profile read's CPU for its long statements.
private func holdsNUL(_ text: String) -> Bool {
    var text = text
    return text.withUTF8 { bytes in bytes.count > 0 && memchr(bytes.baseAddress!, 0, bytes.count) != nil }
}

/// Calls `body` with a NULL-terminated array of C strings.
private func withCStringArray<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    return body(copies.map { UnsafePointer($0) } + [nil])
}

/// Calls `body` with one C string per binding (nil for NULL), all in one buffer.
/// Each text copied whole (`withUTF8`): mapped byte by byte into a new array, a rebuild's
/// batch columns of tens of kilobytes cost 2% of its CPU here (`perf`).
func withParameterValues<R>(_ bindings: [PostgresBinding], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    var buffer = [UInt8]()
    buffer.reserveCapacity(bindings.reduce(0) { $0 + ($1.text?.utf8.count ?? 0) + 1 })
    var offsets = [Int?]()
    offsets.reserveCapacity(bindings.count)
    for binding in bindings {
        guard var text = binding.text else {
            offsets.append(nil)
            continue
        }
        offsets.append(buffer.count)
        text.withUTF8 { buffer.append(contentsOf: $0) }
        buffer.append(0)
    }
    return buffer.withUnsafeBufferPointer { storage in
        storage.withMemoryRebound(to: CChar.self) { storage in
            body(offsets.map { offset in offset.map { storage.baseAddress! + $0 } })
        }
    }
}
