import EventStore
import Foundation
import Marketplace
import Postgres
import UUIDs

/// A view's row, declared once: each column's name, SQL type and field, in one list. The
/// appends' set-based insert, a rebuild's `COPY`, the reads' column list and their decode are
/// all made from it, so a new column is one line here (and its migration), never a position
/// counted in three places.
///
/// `type` is the column's type as `format_type` names it (`integer`, `text[]`, `timestamp
/// with time zone`): `ViewTablesTests` holds every declaration equal to its table's columns.
struct ViewTable<Row: Sendable>: Sendable {
    let name: String
    let columns: [ViewColumn<Row>]
    /// What `decode` starts from before each column sets its field.
    let blank: Row

    /// `name (a, b, …)`: an insert's or a `COPY`'s target. Made once: a build names it for
    /// every bid it copies.
    let target: String

    /// The columns clients read as stored (`ShownColumns.swift`): most tables have none, and
    /// a resource asks for each row's.
    let shownColumns: [ViewColumn<Row>]

    init(_ name: String, blank: Row, _ columns: [ViewColumn<Row>]) {
        self.name = name
        self.blank = blank
        self.columns = columns
        target = "\(name) (\(columns.map(\.name).joined(separator: ", ")))"
        shownColumns = columns.filter { $0.member != nil }
    }

    /// The table without its first column, its key: for a row read beside another that has it.
    var withoutKey: ViewTable { ViewTable(name, blank: blank, Array(columns.dropFirst())) }

    /// `a, b, …`, each under `alias.` when given: a read's select list, in the columns' order.
    func selectList(_ alias: String? = nil) -> String {
        columns.map { column in alias.map { "\($0).\(column.name)" } ?? column.name }.joined(separator: ", ")
    }

    /// The row's values in the columns' order.
    func values(_ row: Row) -> [any PostgresEncodable] { columns.map { $0.encode(row) } }

    /// Rows for a `COPY` into the table.
    func copy(_ rows: some Sequence<Row>) -> PostgresCopyRows {
        var copy = PostgresCopyRows(unsafeRawTarget: target, width: columns.count)
        for row in rows { copy.append(values(row)) }
        return copy
    }

    /// A row read by `selectList`, its columns first, in their order (whatever the read selects
    /// after them): each found by its place, not looked up by name among the row's, which a page
    /// of 200 items paid for in every cell. The names are still held to the places.
    func decode(_ row: PostgresRow) throws -> Row { try decode(row, from: 0) }

    /// The row read at `start` of the read's columns, after another's (a bid's price).
    func decode(_ row: PostgresRow, from start: Int) throws -> Row {
        let names = row.columns
        guard names.count >= start + columns.count else {
            throw PostgresError(.decoding, message: "\(name) has \(columns.count) columns; the read has \(names.count - start)")
        }
        var decoded = blank
        for (index, column) in columns.enumerated() {
            guard names[start + index].name == column.name else {
                throw PostgresError(
                    .decoding, message: "column \(start + index) of the read is \(names[start + index].name), not \(name).\(column.name)",
                    column: column.name)
            }
            try column.decode(row, start + index, &decoded)
        }
        return decoded
    }

    /// The parameter of `insert`'s statement that holds the column `name`'s values, as an
    /// array (`$3::text[]`): for what else the statement makes of them.
    func parameter(_ name: String) -> String {
        let index = indices([name])[0]
        return columns[index].parameter(index + 1)
    }

    /// A set-based insert of whole rows (`values`, one array per column): `SELECT` over their
    /// `unnest`, each column as given (`r.name`) unless `computed` gives its expression (over
    /// `r.`'s columns, for a value only the database knows, such as another view's). `around`
    /// gets the insert and makes the statement (a conflict clause, a `RETURNING`, what follows).
    func insert(_ label: String, computed: [String: String] = [:], around: @escaping @Sendable (String) -> String) -> SetWrite {
        let arrays = columns.enumerated().map { $1.parameter($0 + 1) }
        // A misspelt name would leave its column to the row's placeholder, silently.
        for name in computed.keys where !columns.contains(where: { $0.name == name }) {
            preconditionFailure("\(self.name) has no \(name) to compute")
        }
        let selected = columns.map { column in
            computed[column.name] ?? column.unnested
        }
        let sql = around(
            """
            INSERT INTO \(target)
            SELECT \(selected.joined(separator: ", "))
            FROM unnest(\(arrays.joined(separator: ", "))) AS r(\(selectList()))
            """)
        return SetWrite(label, width: columns.count) { values in
            PostgresQuery(unsafeSQL: sql, bindings: values.map(\.postgresBinding))
        }
    }
}

extension ViewTable {
    /// The rows whose `column` is one of `keys` (a fold's rows by key), for `decode`.
    func rows<Tag>(where column: String, in keys: some Collection<Identifier<Tag>>) -> PostgresQuery {
        "SELECT \(unsafeRaw: selectList()) FROM \(unsafeRaw: name) WHERE \(unsafeRaw: column) = ANY (\(keys.map(\.description))::uuid[])"
    }

    /// A set-based update of the `changed` columns (by index) of rows found by `key` (its
    /// first column also by `= ANY`, so that a few rows are never a scan), each set as given.
    /// Only the columns a fold changed: a column set to its own value still costs, as the
    /// inputs of a generated column (`items_view.search`, `loans_view.earth`) recompute it.
    func update(_ changed: [Int], key: [String]) -> ViewUpdate {
        let keys = indices(key)
        let sent = keys + changed.filter { !keys.contains($0) }
        func array(_ place: Int) -> String { columns[sent[place]].parameter(place + 1) }
        let sets = sent.dropFirst(keys.count).map { "\(columns[$0].name) = \(columns[$0].unnested)" }
        precondition(!sets.isEmpty, "an update of \(name) that changes no column but its key")
        let matches = key.map { "t.\($0) = r.\($0)" } + ["t.\(key[0]) = ANY (\(array(0)))"]
        return ViewUpdate(
            sql: """
                UPDATE \(name) AS t SET \(sets.joined(separator: ", "))
                FROM unnest(\(sent.indices.map(array).joined(separator: ", "))) AS r(\(sent.map { columns[$0].name }.joined(separator: ", ")))
                WHERE \(matches.joined(separator: " AND "))
                """,
            columns: sent)
    }

    /// `shape` (an `insert` of this table) for `rows`.
    func write(_ shape: SetWrite, _ rows: some Sequence<Row>) -> PostgresQuery {
        var arrays = Array(repeating: PostgresBatchColumn(), count: columns.count)
        for row in rows {
            for (index, column) in columns.enumerated() { arrays[index].append(column.encode(row)) }
        }
        return shape.statement(arrays)
    }
}

extension ViewTable where Row: Equatable {
    /// What a fold made of the rows it read (`before`, by `key`; `keyColumns` name it), written
    /// back: each row it made by `insert`, one statement; each it changed by an update of the
    /// columns it changed, one statement for each set of them (a batch's share purchases are
    /// one; a forgetting's redaction another).
    func writeBack<Key: Hashable>(
        _ folded: some Sequence<Row>, before: [Key: Row], key: (Row) -> Key, keyColumns: String..., insert: SetWrite,
        _ session: inout PostgresSession
    ) throws {
        var changed = [[Int]: [Row]](), made = [Row]()
        for row in folded {
            guard let old = before[key(row)] else {
                made.append(row)
                continue
            }
            // Fields that differ by less than a column holds (a time's nanoseconds) are no change;
            // texts are compared byte by byte, as PostgreSQL does (Swift's `==` holds "é" spelt
            // in one code point or two equal).
            let differing = columns.indices.filter { index in
                let (was, now) = (columns[index].encode(old).postgresBinding, columns[index].encode(row).postgresBinding)
                switch (was.text, now.text) {
                case (nil, nil): return false
                case (let was?, let now?): return !was.utf8.elementsEqual(now.utf8)
                default: return true
                }
            }
            if !differing.isEmpty { changed[differing, default: []].append(row) }
        }
        for (differing, rows) in changed.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            try session.query(write(update(differing, key: keyColumns), rows), prepared: true)
        }
        if !made.isEmpty { try session.query(write(insert, made), prepared: true) }
    }
}

extension ViewTable {
    /// `rows` deleted, found by the `key` columns (its first also by `= ANY`, as `update`):
    /// what a fold took away of the rows it read. One statement.
    func delete(_ rows: some Collection<Row>, key: String..., session: inout PostgresSession) throws {
        guard !rows.isEmpty else { return }
        let keys = indices(key)
        var arrays = Array(repeating: PostgresBatchColumn(), count: keys.count)
        for row in rows {
            for (place, index) in keys.enumerated() { arrays[place].append(columns[index].encode(row)) }
        }
        let parameters = keys.enumerated().map { columns[$1].parameter($0 + 1) }
        let matches = key.map { "t.\($0) = r.\($0)" } + ["t.\(key[0]) = ANY (\(parameters[0]))"]
        try session.query(
            PostgresQuery(
                unsafeSQL: """
                    DELETE FROM \(name) AS t USING unnest(\(parameters.joined(separator: ", "))) AS r(\(key.joined(separator: ", ")))
                    WHERE \(matches.joined(separator: " AND "))
                    """, bindings: arrays.map(\.postgresBinding)), prepared: true)
    }

    /// The columns `names`, by index.
    func indices(_ names: String...) -> [Int] { indices(names) }

    func indices(_ names: [String]) -> [Int] {
        names.map { name in
            guard let index = columns.firstIndex(where: { $0.name == name }) else { preconditionFailure("\(self.name) has no \(name)") }
            return index
        }
    }

    /// `shape` (an `update` of this table) for `rows`.
    func write(_ shape: ViewUpdate, _ rows: some Sequence<Row>) -> PostgresQuery {
        var arrays = Array(repeating: PostgresBatchColumn(), count: shape.columns.count)
        for row in rows {
            for (place, index) in shape.columns.enumerated() { arrays[place].append(columns[index].encode(row)) }
        }
        return PostgresQuery(unsafeSQL: shape.sql, bindings: arrays.map(\.postgresBinding))
    }
}

/// An update's text and the columns (by index in their table) whose arrays it takes, in order.
struct ViewUpdate {
    let sql: String
    let columns: [Int]
}

/// One column of a `ViewTable`: its name and type, and how its field is written and read.
struct ViewColumn<Row: Sendable>: Sendable {
    let name: String
    let type: String
    let encode: @Sendable (Row) -> any PostgresEncodable
    /// Reads the field from the row's column at this index.
    let decode: @Sendable (PostgresRow, Int, inout Row) throws -> Void
    /// The member clients read the column under, as it is stored (`ShownColumns.swift`); nil
    /// for a column the resource shapes itself, or does not show.
    var member: String? = nil
    var show: (@Sendable (Row) -> JSONValue)? = nil

    /// Its values as the set-based writes' `number`th parameter, an array (`$3::integer[]`).
    /// An array column travels as its literal's text, each element of a one-dimensional
    /// `text[]`: `unnest` flattens arrays of arrays.
    func parameter(_ number: Int) -> String { "$\(number)::\(type.hasSuffix("[]") ? "text" : type)[]" }

    /// Its value in a row of that `unnest` (`AS r`), an array column's cast back from its text.
    var unnested: String { type.hasSuffix("[]") ? "r.\(name)::\(type)" : "r.\(name)" }
}

extension ViewColumn {
    /// A field stored as it is.
    init<Value: PostgresCodable>(_ name: String, _ type: String, _ field: WritableKeyPath<Row, Value> & Sendable) {
        self.init(
            name: name, type: type, encode: { $0[keyPath: field] },
            decode: { row, index, into in into[keyPath: field] = try row.decode(index, as: Value.self) })
    }

    /// A field stored as it is, nil as NULL.
    init<Value: PostgresCodable>(_ name: String, _ type: String, _ field: WritableKeyPath<Row, Value?> & Sendable) {
        self.init(
            name: name, type: type, encode: { $0[keyPath: field] },
            decode: { row, index, into in into[keyPath: field] = try row.decode(index, as: Value?.self) })
    }

    /// A field stored by its raw value, as `text`: a kind, a category, a status.
    init<Value: RawRepresentable & Sendable>(_ name: String, _ field: WritableKeyPath<Row, Value> & Sendable)
    where Value.RawValue == String {
        self.init(
            name: name, type: "text", encode: { $0[keyPath: field].rawValue },
            decode: { row, index, into in
                let text = try row.decode(index, as: String.self)
                guard let value = Value(rawValue: text) else {
                    throw PostgresError(.decoding, message: "\(text) is no \(Value.self)", column: name)
                }
                into[keyPath: field] = value
            })
    }

    /// A day, as `date`; nil as NULL.
    init(_ name: String, day field: WritableKeyPath<Row, Day?> & Sendable) {
        self.init(
            name: name, type: "date", encode: { $0[keyPath: field].map { PostgresDate($0.description) } },
            decode: { row, index, into in into[keyPath: field] = try row.decode(index, as: PostgresDay?.self)?.day })
    }

    /// A day, as `date`.
    init(_ name: String, day field: WritableKeyPath<Row, Day> & Sendable) {
        self.init(
            name: name, type: "date", encode: { PostgresDate($0[keyPath: field].description) },
            decode: { row, index, into in into[keyPath: field] = try row.decode(index, as: PostgresDay.self).day })
    }
}

/// A `date` column read as a `Day`.
struct PostgresDay: PostgresDecodable {
    let day: Day
    static let postgresTypes: Set<PostgresType> = [.date]
    init?(postgresText text: String, type: PostgresType) {
        guard let day = Day(text) else { return nil }
        self.day = day
    }
}

/// A set-based statement (`ViewTable.insert`): `statement` gets one array per column (rows in
/// the order added) and writes them all, each row as the single-row statement would.
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
