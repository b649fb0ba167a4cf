import Foundation
import Marketplace
import Postgres
@testable import Projections
import Testing
import TestSupport

/// Each view's row is declared once (`ViewTable`), and the appends' insert, a rebuild's
/// `COPY` and the reads are made from it: the declaration must be the table the migrations
/// made, every column but the generated ones, each of its type.
@Suite("Views declared once")
struct ViewTablesTests {
    @Test func eachDeclarationIsItsTablesColumns() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                for (name, declared) in [
                    (ItemRow.table.name, ItemRow.table.columns.map { [$0.name, $0.type] }),
                    (BidRow.table.name, BidRow.table.columns.map { [$0.name, $0.type] }),
                    (UserRow.table.name, UserRow.table.columns.map { [$0.name, $0.type] }),
                    (CardRow.table.name, CardRow.table.columns.map { [$0.name, $0.type] }),
                    (LoanRow.table.name, LoanRow.table.columns.map { [$0.name, $0.type] }),
                    (LoanShareRow.table.name, LoanShareRow.table.columns.map { [$0.name, $0.type] }),
                    (CountryLoansRow.table.name, CountryLoansRow.table.columns.map { [$0.name, $0.type] }),
                    (CartLineRow.table.name, CartLineRow.table.columns.map { [$0.name, $0.type] }),
                    (ReviewRow.table.name, ReviewRow.table.columns.map { [$0.name, $0.type] }),
                    (MessageRow.table.name, MessageRow.table.columns.map { [$0.name, $0.type] }),
                    (PayoutRow.table.name, PayoutRow.table.columns.map { [$0.name, $0.type] }),
                    (ReportRow.table.name, ReportRow.table.columns.map { [$0.name, $0.type] }),
                    (SuspensionRow.table.name, SuspensionRow.table.columns.map { [$0.name, $0.type] }),
                    (FeedProjection.Notice.table.name, FeedProjection.Notice.table.columns.map { [$0.name, $0.type] }),
                    (FeedProjection.LoanLender.table.name, FeedProjection.LoanLender.table.columns.map { [$0.name, $0.type] }),
                    (ItemsProjection.MarketCellRow.table.name, ItemsProjection.MarketCellRow.table.columns.map { [$0.name, $0.type] }),
                    (BookingRow.table.name, BookingRow.table.columns.map { [$0.name, $0.type] }),
                    (BlackoutRow.table.name, BlackoutRow.table.columns.map { [$0.name, $0.type] }),
                    (RentalPriceRow.table.name, RentalPriceRow.table.columns.map { [$0.name, $0.type] }),
                ] {
                    let rows = try await pool.query(
                        """
                        SELECT a.attname::text AS name, format_type(a.atttypid, a.atttypmod) AS type
                        FROM pg_attribute a
                        WHERE a.attrelid = \(name)::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
                        ORDER BY a.attnum
                        """)
                    let columns = try rows.map { [try $0.decode("name", as: String.self), try $0.decode("type", as: String.self)] }
                    #expect(
                        Set(declared) == Set(columns),
                        "\(name): declared but not in the table \(Set(declared).subtracting(columns)), in the table but not declared \(Set(columns).subtracting(declared))"
                    )
                    #expect(declared.count == Set(declared).count, "\(name) declares a column twice")
                }
            }
        }
    }

    /// The insert made from a declaration writes every column from its row, array columns
    /// included, and a read decodes the same row back.
    @Test func aRowWrittenByTheInsertReadsBackTheSame() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                var row = ItemRow()
                row.id = ItemID()
                row.owner = UserID()
                row.ownerHandle = "ada"
                row.title = "A \"quoted\" {brace}, comma\\"
                row.priceCents = 1_500
                row.location = Location(lat: 52.5, lng: 13.4, place: "Berlin")
                row.from = Day("2026-12-01")
                row.photos = ["a\"b", "c,d", "{e}"]
                row.deal = UserID()
                row.createdAt = Date(timeIntervalSince1970: 1_800_000_000.5)
                row.updatedAt = row.createdAt
                row.position = 42
                row.deposit = 0
                let insert = ItemRow.table.insert("insert one") { "\($0)" }
                let columns = ItemRow.table.values(row).map { value -> PostgresBatchColumn in
                    var column = PostgresBatchColumn()
                    column.append(value)
                    return column
                }
                try await pool.query(insert.statement(columns))
                let read = try await pool.query(
                    "SELECT \(unsafeRaw: ItemRow.table.selectList()) FROM items_view WHERE item_id = \(row.id)"
                ).single()
                let back = try ItemRow.table.decode(read)
                #expect(ItemRow.table.values(back).map(\.postgresBinding) == ItemRow.table.values(row).map(\.postgresBinding))
            }
        }
    }
}

/// The rows the appends insert and a rebuild holds keep what the log says: a rental posted
/// without a deposit holds NULL, as every row written before the declarations did (a 0 would
/// differ from them under `lender replay --verify`); its answer reads it as 0.
@Suite("Rows as the log has them")
struct PostedRowTests {
    @Test func aRentalWithoutADepositHoldsNone() throws {
        let posted = RentalPosted(
            itemID: ItemID(), ownerID: UserID(), title: "Drill", description: "", category: .tools, dailyPriceCents: 700,
            location: Location(lat: 1, lng: 2, place: "Here"), availableFrom: nil, availableUntil: nil)
        let row = try #require(ItemRow(posted: .rentalPosted(posted), ownerHandle: "ada", at: Date(), position: 1))
        #expect(row.deposit == nil)
        #expect(ItemResource(row, distanceKm: nil, position: 1).securityDepositCents == 0)
        var deposit = posted
        deposit.securityDepositCents = 5_000
        #expect(ItemRow(posted: .rentalPosted(deposit), ownerHandle: "ada", at: Date(), position: 1)?.deposit == 5_000)
    }
}

/// A column clients read as stored is declared `shown:` and needs nothing more: the resource
/// writes it after its own members, in the declaration's order, as the answers write values.
@Suite("Columns shown as stored")
struct ShownColumnsTests {
    struct Row: Sendable {
        var id = ItemID.none
        var title = ""
        var count: Int?
        var at = Date(timeIntervalSince1970: 0)
        var tags: [String] = []
        var hidden = 0
    }

    static let table = ViewTable<Row>(
        "shown", blank: Row(),
        [
            ViewColumn("id", "uuid", \.id, shown: "id"),
            ViewColumn("hidden", "integer", \.hidden),
            ViewColumn("title", "text", \.title, shown: "title"),
            ViewColumn("count", "integer", \.count, shown: "count"),
            ViewColumn("at", "timestamp with time zone", \.at, shown: "at"),
            ViewColumn("tags", "text[]", \.tags, shown: "tags"),
        ])

    @Test func shownColumnsAreTheResourcesMembersInOrder() throws {
        let id = ItemID(UUID(uuidString: "8D40177B-1CC4-49B1-A12A-A96354B7B13C")!)
        let row = Row(id: id, title: "Drill", count: nil, at: Date(timeIntervalSince1970: 1_764_000_000), tags: ["a", "b"], hidden: 7)
        #expect(
            Self.table.shown(row) == [
                ShownMember(name: "id", value: .string("8d40177b-1cc4-49b1-a12a-a96354b7b13c")),
                ShownMember(name: "title", value: .string("Drill")),
                ShownMember(name: "count", value: .null),
                ShownMember(name: "at", value: .string("2025-11-24T16:00:00Z")),
                ShownMember(name: "tags", value: .array([.string("a"), .string("b")])),
            ])
    }

    /// A column `items_view` shows is told to clients: a property of the OpenAPI document's
    /// `Item`, and required (the answer always has it, null or not). The one edit besides the
    /// column's migration and declaration.
    @Test func aShownColumnIsInTheOpenAPIDocument() throws {
        let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/Server/Resources/openapi.json")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: document)) as? [String: Any]
        let item = try #require(((json?["components"] as? [String: Any])?["schemas"] as? [String: Any])?["Item"] as? [String: Any])
        let properties = Set((item["properties"] as? [String: Any] ?? [:]).keys), required = Set(item["required"] as? [String] ?? [])
        #expect(properties.contains("id") && required.contains("id"), "the document's Item is read")
        for member in ItemRow.table.columns.compactMap(\.member) {
            #expect(properties.contains(member) && required.contains(member), "items_view shows \(member), which openapi.json's Item lacks")
        }
    }

    /// A shown column under a name the resource writes itself would write the key twice.
    @Test func noShownColumnTakesAMembersName() {
        let shown = ItemRow.table.columns.compactMap(\.member)
        #expect(Set(shown).count == shown.count)
        for member in shown { #expect(ItemResource.CodingKeys(stringValue: member) == nil, "items_view shows \(member) twice") }
    }
}
