import CLibPQ

/// Rows for one `COPY … FROM STDIN` into a table, in COPY's text format: each value read by
/// its type's input function, as a parameter's text is. A bulk load of a fresh table without
/// the parse, plan and executor of an `INSERT` per batch; it writes rows only (no
/// `ON CONFLICT`, no reads of other tables), so it is for rows already worked out.
public struct PostgresCopyRows: Sendable {
    /// `table (column, …)`, as the statement names them.
    public let target: String
    let width: Int
    private(set) var count = 0
    /// The rows so far: values separated by tabs, each row ended by a newline.
    private(set) var data: [UInt8] = []
    /// The first value that cannot be sent (holding NUL), thrown when the rows are sent.
    private(set) var unsendable: String?

    /// `target` is SQL, sent as it is: pass a constant, never a client's text.
    public init(unsafeRawTarget target: String, width: Int) {
        self.target = target
        self.width = width
    }

    var isEmpty: Bool { count == 0 }

    /// One row, its values in the target's column order; nil is NULL.
    public mutating func append(_ values: [any PostgresEncodable]) {
        precondition(values.count == width, "\(target) takes \(width) values")
        count += 1
        for (index, value) in values.enumerated() {
            if index > 0 { data.append(UInt8(ascii: "\t")) }
            guard let text = value.postgresBinding.text else {
                data.append(contentsOf: #"\N"#.utf8)
                continue
            }
            append(escaping: text)
        }
        data.append(UInt8(ascii: "\n"))
    }

    /// `text` with COPY's own escapes for the backslash and the separators. Most values (ids,
    /// numbers, times) have none, and are copied whole.
    private mutating func append(escaping text: String) {
        var text = text
        text.withUTF8 { bytes in
            func special(_ byte: UInt8) -> Bool { byte == 0x5C || byte == 0x09 || byte == 0x0A || byte == 0x0D || byte == 0 }
            guard bytes.contains(where: special) else {
                data.append(contentsOf: bytes)
                return
            }
            for byte in bytes {
                switch byte {
                case 0x5C: data.append(contentsOf: #"\\"#.utf8)
                case 0x09: data.append(contentsOf: #"\t"#.utf8)
                case 0x0A: data.append(contentsOf: #"\n"#.utf8)
                case 0x0D: data.append(contentsOf: #"\r"#.utf8)
                case 0:
                    if unsendable == nil { unsendable = "a value for \(target) contains a NUL character, which PostgreSQL text cannot hold" }
                default: data.append(byte)
                }
            }
        }
    }
}

extension PostgresConnection {
    /// Sends `rows` by COPY, in the connection's current transaction; blocking.
    static func copy(_ pg: OpaquePointer, _ rows: PostgresCopyRows) throws {
        if let unsendable = rows.unsendable { throw PostgresError(.encoding, message: unsendable) }
        guard !rows.isEmpty else { return }
        guard let start = PQexec(pg, "COPY \(rows.target) FROM STDIN") else {
            throw PostgresError(.connection, message: String(cString: PQerrorMessage(pg)).trimmingWhitespace())
        }
        guard PQresultStatus(start) == PGRES_COPY_IN else {
            _ = try consume(start, on: pg)  // the statement's error
            throw PostgresError(.server, message: "COPY \(rows.target) did not start")
        }
        PQclear(start)
        // In pieces: the length is an Int32.
        let sent = rows.data.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { bytes in
                stride(from: 0, to: bytes.count, by: 1 << 20).allSatisfy { start in
                    PQputCopyData(pg, bytes.baseAddress! + start, Int32(min(1 << 20, bytes.count - start))) == 1
                }
            }
        }
        // A piece not sent: the COPY is abandoned (CopyFail), so the server ends it with an
        // error and libpq leaves the COPY state.
        let sendError = sent ? nil : String(cString: PQerrorMessage(pg)).trimmingWhitespace()
        let ended = sent ? PQputCopyEnd(pg, nil) : PQputCopyEnd(pg, "the client could not send the rows")
        // The statement's own result, then the NULL that ends it: read both whatever happened,
        // so the connection is ready for the next statement. A result still in COPY state means
        // libpq could not end it either (only when it cannot allocate its buffer): thrown
        // rather than waited on forever. libpq then reports a command in progress
        // (`PQTRANS_ACTIVE`), so the pool closes the connection when it comes back
        // (`needsReplacing`) instead of handing it on.
        var failure: (any Error)?
        while let result = PQgetResult(pg) {
            if PQresultStatus(result) == PGRES_COPY_IN {
                PQclear(result)
                throw PostgresError(.connection, message: sendError ?? "COPY \(rows.target) could not be ended")
            }
            do { _ = try consume(result, on: pg) } catch { failure = failure ?? error }
        }
        if let sendError { throw PostgresError(.connection, message: sendError) }
        if let failure { throw failure }
        guard ended == 1 else {
            throw PostgresError(.connection, message: String(cString: PQerrorMessage(pg)).trimmingWhitespace())
        }
    }
}
