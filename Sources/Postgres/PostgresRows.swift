/// A column of a result: its name and type.
public struct PostgresColumn: Sendable, Hashable {
    public var name: String
    public var type: PostgresType
}

/// The rows of a result, copied out of libpq into Swift values.
public struct PostgresRows: Sendable, RandomAccessCollection {
    public let columns: [PostgresColumn]
    /// Every cell's text as libpq gave it, row-major, each followed by a NUL (so that C
    /// parsers read it in place). One buffer, not a `String` a cell: a page of the market is
    /// 460 cells, most of them numbers, ids and times that never needed a string.
    @usableFromInline let bytes: [UInt8]
    /// Where each cell's text is in `bytes`; nil is NULL.
    @usableFromInline let cells: [Range<Int>?]
    @usableFromInline let indexByName: [String: Int]
    /// Rows a command inserted, updated or deleted (PQcmdTuples), when it says.
    public let affectedRows: Int

    init(columns: [PostgresColumn], bytes: [UInt8] = [], cells: [Range<Int>?], affectedRows: Int) {
        self.columns = columns
        self.bytes = bytes
        self.cells = cells
        self.affectedRows = affectedRows
        // Only wide rows look names up by hashing (`PostgresRow.columnIndex`): hashing every
        // result's names was 3% of `GET /v1/me`'s CPU, which reads eight results.
        var indexByName = [String: Int]()
        if columns.count > PostgresRow.comparedColumns {
            for (index, column) in columns.enumerated() where indexByName[column.name] == nil {
                indexByName[column.name] = index
            }
        }
        self.indexByName = indexByName
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { columns.isEmpty ? 0 : cells.count / columns.count }
    public subscript(position: Int) -> PostgresRow { PostgresRow(rows: self, index: position) }

    /// The only row, or an error when there is none or more than one.
    public func single() throws -> PostgresRow {
        guard count == 1 else {
            throw PostgresError(.decoding, message: "expected exactly one row, got \(count)")
        }
        return self[0]
    }
}

/// One row; decode its cells by column name or index.
///
/// The decoding is inlinable: a view's resource in another module then decodes each cell
/// specialized for its type, without looking up `Optional<T>`'s metadata for every cell
/// (`GET /v1/me`, where the server is the limit: 1,302 → 1,363 profiles/s, interleaved).
public struct PostgresRow: Sendable {
    @usableFromInline let rows: PostgresRows
    @usableFromInline let index: Int

    public var columns: [PostgresColumn] { rows.columns }

    /// The cell's raw text, nil for NULL.
    @inlinable
    public func text(_ column: Int) -> String? {
        guard let range = rows.cells[index * rows.columns.count + column] else { return nil }
        return rows.bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[range]), as: UTF8.self) }
    }

    @inlinable
    public func decode<T: PostgresDecodable>(_ column: String, as type: T.Type = T.self) throws -> T {
        try decode(columnIndex(column), as: type)
    }

    @inlinable
    public func decode<T: PostgresDecodable>(_ column: Int, as type: T.Type = T.self) throws -> T {
        guard let value = try decodeIfPresent(column, as: type) else {
            throw PostgresError(
                .decoding, message: "column \"\(rows.columns[column].name)\" is NULL, expected \(T.self)",
                column: rows.columns[column].name)
        }
        return value
    }

    @inlinable
    public func decode<T: PostgresDecodable>(_ column: String, as type: T?.Type) throws -> T? {
        try decodeIfPresent(columnIndex(column), as: T.self)
    }

    @inlinable
    public func decode<T: PostgresDecodable>(_ column: Int, as type: T?.Type) throws -> T? {
        try decodeIfPresent(column, as: T.self)
    }

    @inlinable
    func decodeIfPresent<T: PostgresDecodable>(_ column: Int, as type: T.Type) throws -> T? {
        guard column >= 0, column < rows.columns.count else {
            throw PostgresError(.decoding, message: "no column at index \(column) (\(rows.columns.count) columns)")
        }
        let info = rows.columns[column]
        guard let range = rows.cells[index * rows.columns.count + column] else { return nil }
        guard T.reads(info.type) else {
            throw PostgresError(
                .decoding, message: "column \"\(info.name)\" is \(info.type), which does not decode as \(T.self)",
                column: info.name)
        }
        let value = rows.bytes.withUnsafeBufferPointer { T(postgresBytes: UnsafeBufferPointer(rebasing: $0[range]), type: info.type) }
        guard let value else {
            let text = self.text(column) ?? ""
            throw PostgresError(
                .decoding, message: "column \"\(info.name)\" holds \(text.prefix(64).debugDescription), not a valid \(T.self)",
                column: info.name)
        }
        return value
    }

    /// Rows up to this wide find a column by comparing names.
    @inlinable static var comparedColumns: Int { 32 }

    @inlinable
    func columnIndex(_ name: String) throws -> Int {
        // A row's few columns are found faster by comparing names than by hashing the name for
        // a dictionary; their lengths first, which most differ in (two names that differ go
        // through String's slow comparison: 3% of a market page's CPU, `perf`). Column names
        // are ASCII identifiers here, so a length tells them apart as canonical equivalence would.
        let columns = rows.columns
        if columns.count <= Self.comparedColumns {
            let length = name.utf8.count
            for index in columns.indices where columns[index].name.utf8.count == length && columns[index].name == name {
                return index
            }
        }
        guard let index = rows.indexByName[name] else {
            throw PostgresError(
                .decoding, message: "no column named \"\(name)\"; the row has \(rows.columns.map(\.name))", column: name)
        }
        return index
    }
}
