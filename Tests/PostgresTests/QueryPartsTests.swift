import Postgres
import Testing
import TestSupport

@Suite("Statements built from parts")
struct QueryPartsTests {
    /// Each part numbers its own parameters from 1; appended, they follow the ones before,
    /// two-digit numbers too, and each value reaches the column it was written for.
    @Test func appendedPartsKeepTheirOwnValues() async throws {
        var statement: PostgresQuery = "SELECT "
        let parts: [PostgresQuery] = (1...11).map { number in "\(number * 10)::int AS c\(unsafeRaw: String(number))" }
        statement.append(.joined(parts, separator: ", "))
        statement.append(" WHERE \("x") = \("x")")
        #expect(statement.bindings.count == 13)
        #expect(statement.sql.hasPrefix("SELECT $1::int AS c1, $2::int AS c2"))
        #expect(statement.sql.contains("$11::int AS c11 WHERE $12 = $13"))
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let row = try await pool.query(statement).single()
                for number in 1...11 { #expect(try row.decode("c\(number)", as: Int.self) == number * 10) }
            }
        }
    }

    /// A `$` in a part's own text (a string, a dollar quote) is text, not a parameter.
    @Test func aDollarInTheTextStaysAsWritten() async throws {
        var statement: PostgresQuery = "SELECT \(7)::int AS n, "
        statement.append("'costs $1, not $2' AS said, $$ $3 $$ AS quoted, \("x")::text AS x")
        #expect(statement.sql == "SELECT $1::int AS n, 'costs $1, not $2' AS said, $$ $3 $$ AS quoted, $2::text AS x")
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let row = try await pool.query(statement).single()
                #expect(try row.decode("n", as: Int.self) == 7)
                #expect(try row.decode("said", as: String.self) == "costs $1, not $2")
                #expect(try row.decode("quoted", as: String.self) == " $3 ")
                #expect(try row.decode("x", as: String.self) == "x")
            }
        }
    }

    /// An integer written as a literal is part of the text, not a parameter, and appended
    /// parts number their parameters around it.
    @Test func aLiteralIntegerIsTextNotAParameter() async throws {
        var statement: PostgresQuery = "SELECT n FROM generate_series(\(1), \(literal: 50)) n WHERE n > \(40)"
        statement.append(" ORDER BY n DESC LIMIT \(literal: 3) OFFSET \(literal: 0)")
        #expect(statement.sql == "SELECT n FROM generate_series($1, 50) n WHERE n > $2 ORDER BY n DESC LIMIT 3 OFFSET 0")
        #expect(statement.bindings.count == 2)
        // Right after a placeholder, the digits stay apart from its number.
        let adjacent: PostgresQuery = "\(1)\(literal: 5)"
        #expect(adjacent.sql == "$1 5")
        try await TestDatabase.withEmpty { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let rows = try await pool.query(statement, prepared: true)
                #expect(try rows.map { try $0.decode("n", as: Int.self) } == [50, 49, 48])
            }
        }
    }
}
