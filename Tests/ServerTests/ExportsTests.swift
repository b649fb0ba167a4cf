import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
@testable import Server
import ServerTestSupport
import Testing
import TestSupport

/// The operators' CSV exports (SPEC §12.6): who may have them, what they hold, that Python's
/// `csv` (as a spreadsheet) reads them cell for cell, formulas disarmed, forgotten users
/// absent, and that a large one streams through a real server in bounded memory.
@Suite("Exports")
struct ExportsTests {
    static let files = ["ledger.csv", "users.csv", "bookings.csv"]

    /// The money events of the log, named here apart from the server's own list.
    static let moneyTypes = [
        "FundsDeposited", "BalanceDebited", "CardCharged", "BalanceCredited", "RentalHoldPlaced", "RentalHoldReleased",
        "RentalPaid", "RentalRefunded", "RentalEarned", "PayoutRequested", "PayoutSent", "PayoutFailed", "BalanceSettled",
    ]

    @Test func cellsAreQuotedAsRFC4180SaysAndFormulasAreDisarmed() {
        #expect(CSVWriter.row(["plain", "", "42", "2026-12-05T10:00:00Z"]) == "plain,,42,2026-12-05T10:00:00Z\r\n")
        #expect(
            CSVWriter.row(["a,b", "say \"hi\"", "two\nlines", "cr\rhere"])
                == "\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\"cr\rhere\"\r\n")
        #expect(CSVWriter.row(["=1+2", "+1", "-2", "@SUM(A1)", "\tx"]) == "'=1+2,'+1,'-2,'@SUM(A1),'\tx\r\n")
        #expect(CSVWriter.row(["\r=1"]) == "\"'\r=1\"\r\n", "a CR first is disarmed and quoted")
        #expect(CSVWriter.row(["=HYPERLINK(\"http://x\")"]) == "\"'=HYPERLINK(\"\"http://x\"\")\"\r\n")
        #expect(CSVWriter.row(["a=b", "x-1", "ada@example.org"]) == "a=b,x-1,ada@example.org\r\n", "only a first character arms one")
        #expect(CSVWriter.row(["Zoë, née", "東京"]) == "\"Zoë, née\",東京\r\n")
        var writer = CSVWriter()
        writer.append(["a", "b"])
        writer.append(["c"])
        let taken = writer.take()
        #expect(String(decoding: taken, as: UTF8.self) == "a,b\r\nc\r\n")
        #expect(writer.isEmpty, "a batch taken is gone")
    }

    @Test func onlyOperatorsExportAnything() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            for file in Self.files {
                let refused = try await client.send(.get, "/v1/admin/exports/\(file)", token: ada.token)
                #expect(refused.status == .forbidden && refused.code == "not_operator", "\(file): \(refused)")
                #expect(!refused.text.contains("user_id"), "\(file): not a row of it")
                let anonymous = try await client.send(.get, "/v1/admin/exports/\(file)")
                #expect(anonymous.status == .unauthorized, "\(file): \(anonymous)")
            }
            _ = try runLender(["users", "grant-operator", "ada"], database: try await ownerURL(admin))
            for file in Self.files {
                let export = try await client.send(.get, "/v1/admin/exports/\(file)", token: ada.token)
                #expect(export.status == .ok, "\(file): \(export)")
                #expect(export.headers[.contentType] == "text/csv; charset=utf-8", "\(file)")
                #expect(export.headers[.contentDisposition] == "attachment; filename=\"\(file)\"", "\(file)")
                #expect(export.headers[.cacheControl] == "no-store", "\(file)")
            }
        }
    }

    /// A deposit and two payouts by a user who is then forgotten, a rental paid by card whose
    /// title is a formula, and users whose names are formulas: each file as Python reads it.
    @Test func theFilesHoldEveryMovementUserAndBookingAndNoForgottenName() async throws {
        try await withServer { client, admin in
            let desk = try await Self.operatorDesk(client, admin)

            // Quentin: a deposit by card, two payouts (the whole balance), then he closes his account.
            let quentin = try await client.user("quentin_forgets")
            try await Self.verifyEmail(client, admin, quentin)
            let method = try await client.send(
                .put, "/v1/me/payout-method", body: API.PayoutMethodBody(kind: .bankAccount, token: "ba_test_quentin"),
                token: quentin.token)
            #expect(method.status == .ok, "\(method)")
            let card = try await client.addCard(quentin.token).decode(CardResource.self)
            let deposited = try await client.send(
                .post, "/v1/me/deposits", body: API.DepositBody(amountCents: 50_000, cardId: card.id.rawValue), token: quentin.token)
            #expect(deposited.status == .created, "\(deposited)")
            let deposit = try deposited.decode(Deposit.self)
            var payouts = [String]()
            for amount in [20_000, 30_000] {
                let paid = try await client.send(.post, "/v1/me/payouts", body: API.PayoutBody(amountCents: amount), token: quentin.token)
                #expect(paid.status == .created, "\(paid)")
                payouts.append(try paid.decode(PayoutResource.self).id.description)
            }

            // A rental whose title is a formula, bid on by card (held) and approved (captured).
            let owner = try await client.user("owner")
            let rita = try await client.user("rita")
            let item = try await client.postRental(owner.token, title: "=HYPERLINK(\"http://x\")").id
            let bid = try await client.bid(item, rita.token)
            let booking = try #require(bid.json["id"] as? String, "\(bid)")
            let approved = try await client.send(.post, "/v1/bids/\(booking)/approve", token: owner.token)
            #expect(approved.status == .ok, "\(approved)")

            // Names a spreadsheet would run, and one with a comma, quotes and a line break (which
            // the API refuses in a name: written into the view, as a projection would).
            let formulas = ["=HYPERLINK(\"http://x\")", "+1", "@SUM(A1)", "-2"]
            var named = [String: String]()
            for (index, name) in formulas.enumerated() {
                let id = try await Self.register(client, "formula\(index)", displayName: name)
                named[id.description] = "'" + name
            }
            let multiLine = try await Self.register(client, "multi_line", displayName: "Multi")
            let awkward = "Comma, \"quoted\"\nline two"
            _ = try await admin.query("UPDATE users_view SET display_name = \(awkward) WHERE user_id = \(multiLine.rawValue)")
            named[multiLine.description] = awkward

            let closed = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: quentin.token)
            #expect(closed.status == .noContent, "\(closed)")

            // The ledger: every money event, in log order, with the processor's ids.
            let ledger = try await Self.export(client, "ledger.csv", token: desk.token)
            #expect(ledger.records.first == ExportsController.ledgerHeader)
            let moves = Self.table(ledger.records)
            let events = try await count(admin, "SELECT count(*) FROM events WHERE type = ANY (\(Self.moneyTypes))")
            #expect(moves.count == events && events == 7, "deposit, 2 payouts and their transfers, hold, capture: \(moves)")
            let positions = moves.compactMap { $0["position"].flatMap { Int64($0) } }
            #expect(positions.count == moves.count && positions == positions.sorted() && Set(positions).count == positions.count)
            #expect(moves.allSatisfy { RFC3339.date($0["time"] ?? "") != nil }, "times in RFC 3339")
            let mine = moves.filter { $0["user_id"] == quentin.id.description }
            let depositRow = try #require(mine.first { $0["kind"] == "deposit" })
            #expect(depositRow["amount_cents"] == "50000" && depositRow["balance_effect"] == "credit")
            #expect(depositRow["processor_id"] == deposit.chargeId && depositRow["card_id"] == card.id.description)
            let asked = mine.filter { $0["kind"] == "payout" }
            #expect(asked.map { $0["amount_cents"] ?? "" } == ["20000", "30000"] && asked.allSatisfy { $0["balance_effect"] == "debit" })
            #expect(asked.map { $0["payout_id"] ?? "" } == payouts)
            let transfers = try await admin.query(
                "SELECT data->>'transferID' AS id FROM events WHERE type = 'PayoutSent' ORDER BY position"
            ).map { try $0.decode("id", as: String.self) }
            let sent = mine.filter { $0["kind"] == "payout_sent" }
            #expect(sent.map { $0["processor_id"] ?? "" } == transfers && transfers.count == 2 && !transfers.contains(""))
            #expect(sent.map { $0["payout_id"] ?? "" } == payouts && sent.allSatisfy { $0["balance_effect"] == "none" })

            let hers = moves.filter { $0["user_id"] == rita.id.description }
            let authorization = try await admin.query(
                "SELECT data->'hold'->>'authorizationID' AS id FROM events WHERE type = 'RentalHoldPlaced'"
            ).single().decode("id", as: String.self)
            let hold = try #require(hers.first { $0["kind"] == "hold" })
            #expect(hold["processor_id"] == authorization && hold["reason"] == "card" && hold["bid_id"] == booking)
            let capture = try await admin.query(
                "SELECT data->>'chargeID' AS id, (data->>'amountCents')::int8 AS cents FROM events WHERE type = 'RentalPaid'"
            ).single()
            let captureID = try capture.decode("id", as: String.self)
            let captureCents = try capture.decode("cents", as: Int.self)
            let paid = try #require(hers.first { $0["kind"] == "rental_payment" })
            #expect(paid["processor_id"] == captureID && paid["booking_id"] == booking && paid["bid_id"] == "")
            #expect(paid["amount_cents"] == String(captureCents) && paid["balance_effect"] == "none")
            #expect(paid["item_id"] == item.description)

            // By the events' time: days whole, `until` excluded.
            #expect(try await Self.export(client, "ledger.csv?until=2000-01-01", token: desk.token).records.count == 1)
            #expect(try await Self.export(client, "ledger.csv?from=2000-01-01", token: desk.token).records.count == events + 1)
            let tomorrow = dayFromToday(1)
            #expect(try await Self.export(client, "ledger.csv?from=\(tomorrow)", token: desk.token).records.count == 1)
            #expect(try await Self.export(client, "ledger.csv?until=\(dayFromToday(0))", token: desk.token).records.count == events + 1)
            let cut = try #require(asked.last?["time"])
            let cutDate = try #require(RFC3339.date(cut))
            let later = try await count(
                admin, "SELECT count(*) FROM events WHERE type = ANY (\(Self.moneyTypes)) AND recorded_at >= \(cutDate)")
            #expect(try await Self.export(client, "ledger.csv?from=\(cut)", token: desk.token).records.count == later + 1)
            #expect(try await Self.export(client, "ledger.csv?until=\(cut)", token: desk.token).records.count == events - later + 1)

            // The users: every one, formulas disarmed; Quentin's money and ids stay, his name does not.
            let users = try await Self.export(client, "users.csv", token: desk.token)
            #expect(users.records.first == ExportsController.userHeader)
            let people = Self.table(users.records)
            let registered = try await count(admin, "SELECT count(*) FROM users_view")
            #expect(people.count == registered && registered == 9, "desk, quentin, owner, rita, 4 formulas, multi_line")
            for (id, shown) in named {
                #expect(people.first { $0["user_id"] == id }?["display_name"] == shown, "\(id)")
            }
            #expect(users.text.contains("\"'=HYPERLINK(\"\"http://x\"\")\""), "quoted, its quotes doubled")
            #expect(users.text.contains("\"Comma, \"\"quoted\"\"\nline two\""))
            let ends = Self.lineEnds(users.data)
            #expect(ends.crlf == users.records.count && ends.bare == 1, "CRLF after each record; the name's LF in its quotes")
            let gone = try #require(people.first { $0["user_id"] == quentin.id.description })
            #expect(gone["handle"] == "[removed]" && gone["display_name"] == "[removed]" && gone["email"] == "[removed]")
            #expect(gone["forgotten"] == "true" && !(gone["forgotten_at"] ?? "").isEmpty && gone["balance_cents"] == "0")
            #expect(people.first { $0["user_id"] == rita.id.description }?["email"] == "rita@example.org")
            for file in [users, ledger] {
                #expect(!file.text.contains("quentin"), "no trace of his handle, name or address")
            }
            #expect(mine.count == 5, "his money stays in the ledger, by id")

            // The bookings: the title disarmed, the prices of the capture.
            let bookings = try await Self.export(client, "bookings.csv", token: desk.token)
            #expect(bookings.records.first == ExportsController.bookingHeader)
            let rows = Self.table(bookings.records)
            let row = try #require(rows.first, "\(bookings.text)")
            #expect(rows.count == 1)
            #expect(row["booking_id"] == booking && row["item_id"] == item.description && row["item_title"] == "'=HYPERLINK(\"http://x\")")
            #expect(row["owner_id"] == owner.id.description && row["owner_handle"] == "owner")
            #expect(row["renter_id"] == rita.id.description && row["renter_handle"] == "rita")
            #expect(row["from"] == "2026-12-05" && row["until"] == "2026-12-07" && row["days"] == "3" && row["status"] == "confirmed")
            #expect(row["daily_price_cents"] == "1400" && row["total_cents"] == "4200" && row["pay_with"] == "card")
            #expect(row["charge_cents"] == paid["amount_cents"] && row["dispute_status"] == "")
        }
    }

    @Test func aBadFromOrUntilIsNamedAfterTheRole() async throws {
        try await withServer { client, admin in
            let desk = try await Self.operatorDesk(client, admin)
            let stranger = try await client.user("stranger")
            let ledger = "/v1/admin/exports/ledger.csv"
            let refused = try await client.send(.get, "\(ledger)?from=yesterday", token: stranger.token)
            #expect(refused.status == .forbidden && refused.code == "not_operator", "the role first: \(refused)")
            let bad = try await client.send(.get, "\(ledger)?from=yesterday&until=2026-02-30", token: desk.token)
            #expect(bad.status == .unprocessableContent && bad.code == "validation_failed", "\(bad)")
            #expect(bad.fieldCodes == ["from": "invalid_time", "until": "invalid_time"], "\(bad)")
            let empty = try await client.send(.get, "\(ledger)?from=", token: desk.token)
            #expect(empty.fieldCodes == ["from": "invalid_time"], "\(empty)")
            let backwards = try await client.send(.get, "\(ledger)?from=2026-03-02&until=2026-03-01", token: desk.token)
            #expect(backwards.fieldCodes == ["until": "before_from"], "\(backwards)")
            let oneDay = try await client.send(.get, "\(ledger)?from=2026-03-01&until=2026-03-01", token: desk.token)
            #expect(oneDay.status == .ok, "a day is the whole day: \(oneDay)")
            let offset = try await client.send(
                .get, "\(ledger)?from=2026-03-01T10:00:00%2B01:00&until=2026-03-02T00:00:00Z", token: desk.token)
            #expect(offset.status == .ok, "\(offset)")
            for file in ["users.csv", "bookings.csv"] {
                let unknown = try await client.send(.get, "/v1/admin/exports/\(file)?from=2026-03-01", token: desk.token)
                #expect(unknown.fieldCodes["from"] == "unknown_parameter", "\(file) takes no period: \(unknown)")
            }
        }
    }

    /// 200,000 users written straight into the view, exported through a real server to a
    /// reader that keeps nothing (Python's `csv` over the socket): the server's resident memory
    /// grows by far less than the file, which is some 48 MB.
    @Test func aLargeExportStreamsInBoundedMemory() async throws {
        // 200,000 rows written and read load both cores: not beside the timed tests.
        try await QuietMachine.shared.run {
            try await withServerDatabase { database, admin in
                // `EXPORT_TEST_ROWS=1000000` measures the million rows by hand.
                let bulk = ProcessInfo.processInfo.environment["EXPORT_TEST_ROWS"].flatMap(Int.init) ?? 200_000
                _ = try await admin.query(
                    """
                    INSERT INTO users_view (user_id, handle, display_name, email, member_since, updated_at)
                    SELECT gen_random_uuid(), 'bulk_' || g, 'Bulk user ' || g || ' ' || repeat('x', 100),
                           'bulk_' || g || '@example.org', now(), now()
                    FROM generate_series(1, \(literal: bulk)) AS g
                    """)
                _ = try await admin.query("ANALYZE users_view")
                let server = try await ServerProcess(database: database)
                defer { server.kill(SIGTERM) }
                let desk = try await server.user("desk")
                _ = try runLender(["users", "grant-operator", "desk"], database: database)
                // Small exports first: what grows after them is the large one's.
                for file in ["ledger.csv", "bookings.csv"] {
                    let small = try await server.send(.get, "/v1/admin/exports/\(file)", token: desk.token)
                    #expect(small.status == .ok, "\(file): \(small)")
                }

                let before = server.residentBytes
                let clock = ContinuousClock()
                let started = clock.now
                let reader = Process()
                reader.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                reader.arguments = [
                    "python3", "-c", Self.streamingReader, "http://127.0.0.1:\(server.port)/v1/admin/exports/users.csv", desk.token,
                ]
                let output = Pipe()
                reader.standardOutput = output
                try reader.run()
                var peak = before
                while reader.isRunning {
                    peak = max(peak, server.residentBytes)
                    if clock.now - started > .seconds(600) { reader.terminate() }
                    try await Task.sleep(for: .milliseconds(20))
                }
                reader.waitUntilExit()
                peak = max(peak, server.residentBytes)
                let elapsed = clock.now - started
                try #require(reader.terminationStatus == 0, "Python could not read the export")
                let read = try JSONDecoder().decode(StreamedCSV.self, from: output.fileHandleForReading.readDataToEndOfFile())

                let users = try await count(admin, "SELECT count(*) FROM users_view")
                #expect(users == bulk + 1)
                #expect(read.rows == users + 1, "the header and every user")
                #expect(read.widths == [ExportsController.userHeader.count], "every record as wide as the header")
                #expect(read.contentType == "text/csv; charset=utf-8")
                let mebibyte = 1 << 20
                let grown = peak - before
                print(
                    "users.csv: \(read.rows) records, \(read.characters / mebibyte) MiB, in \(elapsed); server RSS "
                        + "\(before / mebibyte) MiB before, \(peak / mebibyte) MiB at most, grew \(grown / mebibyte) MiB")
                #expect(read.characters > 40 * mebibyte, "a file larger than the bound")
                #expect(grown < 32 * mebibyte, "the server grew by \(grown / mebibyte) MiB for a \(read.characters / mebibyte) MiB file")
            }
        }
    }

    /// An owner's earnings carry the marketplace's fees beside them: the platform's revenue,
    /// in the ledger an accountant reads.
    @Test func theLedgerShowsTheFeesKeptBesideAnOwnersEarnings() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let (owner, _, _, booking) = try await DisputesTests.bookedDrill(client)
            _ = try await client.user("desk")
            _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
            clock.set("2026-12-08")
            let completed = try await client.send(.post, "/v1/bookings/\(booking)/complete", token: owner.token)
            #expect(completed.status == .ok, "\(completed)")
            let fees = try #require(completed.json["settledFeesCents"] as? Int, "\(completed)")
            let payout = try #require(completed.json["settledPayoutCents"] as? Int)
            let ledger = try await Self.export(client, "ledger.csv", token: try await client.login("desk"))
            let earned = try #require(Self.table(ledger.records).first { $0["kind"] == "rental_earnings" }, "\(ledger.text)")
            #expect(earned["user_id"] == owner.id.description && earned["booking_id"] == booking, "\(earned)")
            #expect(earned["amount_cents"] == String(payout) && earned["fees_cents"] == String(fees) && fees > 0, "\(earned)")
            #expect(Self.table(ledger.records).filter { $0["kind"] != "rental_earnings" }.allSatisfy { $0["fees_cents"] == "" })
        }
    }

    // MARK: Helpers

    /// What the streaming reader saw.
    struct StreamedCSV: Decodable {
        var rows: Int
        /// The cells' characters, commas and line ends: the file's size in ASCII.
        var characters: Int
        var widths: [Int]
        var contentType: String?
    }

    /// Reads the export at `argv[1]` with the bearer token `argv[2]` through `csv`, a chunk at a
    /// time, and prints what it counted (JSON).
    static let streamingReader = """
        import csv, io, json, sys, urllib.request
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        request = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]})
        rows, characters, widths = 0, 0, set()
        with opener.open(request, timeout=120) as response:
            kind = response.headers.get("Content-Type")
            for row in csv.reader(io.TextIOWrapper(response, encoding="utf-8", newline=""), strict=True):
                rows += 1
                characters += sum(map(len, row)) + len(row) + 1
                widths.add(len(row))
        json.dump({"rows": rows, "characters": characters, "widths": sorted(widths), "contentType": kind}, sys.stdout)
        """

    /// Every record of the file at `argv[1]`, as `csv` reads it (strict: a stray quote fails), in JSON.
    static let parser = """
        import csv, json, sys
        with open(sys.argv[1], newline="", encoding="utf-8") as file:
            json.dump(list(csv.reader(file, strict=True)), sys.stdout)
        """

    /// An export as an operator downloads it: its bytes, and its records as Python reads them.
    static func export(_ client: any TestClientProtocol, _ path: String, token: String) async throws
        -> (data: Data, text: String, records: [[String]])
    {
        let reply = try await client.send(.get, "/v1/admin/exports/\(path)", token: token)
        try #require(reply.status == .ok, "\(path): \(reply)")
        #expect(reply.headers[.contentType] == "text/csv; charset=utf-8", "\(path)")
        let records = try pythonRecords(reply.data)
        return (reply.data, reply.text, records)
    }

    static func pythonRecords(_ data: Data) throws -> [[String]] {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("lender-export-\(UUID().uuidString).csv")
        try data.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-c", parser, file.path]
        let output = Pipe()
        python.standardOutput = output
        try python.run()
        let json = output.fileHandleForReading.readDataToEndOfFile()
        python.waitUntilExit()
        try #require(python.terminationStatus == 0, "Python's csv could not read it")
        return try JSONDecoder().decode([[String]].self, from: json)
    }

    /// The records after the header, each by its header's names.
    static func table(_ records: [[String]]) -> [[String: String]] {
        guard let header = records.first else { return [] }
        return records.dropFirst().map { Dictionary(zip(header, $0), uniquingKeysWith: { first, _ in first }) }
    }

    /// How many CRLFs the bytes hold, and how many LFs without a CR before them.
    static func lineEnds(_ data: Data) -> (crlf: Int, bare: Int) {
        let bytes = [UInt8](data)
        var crlf = 0
        var bare = 0
        for (index, byte) in bytes.enumerated() where byte == 0x0A {
            if index > 0 && bytes[index - 1] == 0x0D { crlf += 1 } else { bare += 1 }
        }
        return (crlf, bare)
    }

    /// Desk, an operator.
    static func operatorDesk(_ client: any TestClientProtocol, _ admin: PostgresPool) async throws -> (id: UserID, token: String) {
        let desk = try await client.user("desk")
        _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
        return desk
    }

    static func register(_ client: any TestClientProtocol, _ handle: String, displayName: String) async throws -> UserID {
        let reply = try await client.send(
            .post, "/v1/users",
            body: API.RegisterBody(
                handle: handle, displayName: displayName, email: "\(handle)@example.org", password: "correct horse battery"))
        #expect(reply.status == .created, "\(displayName): \(reply)")
        return try reply.decode(RegisteredUser.self).id
    }

    /// Verifies the user's address with the code its mail holds (read from the outbox).
    static func verifyEmail(_ client: any TestClientProtocol, _ admin: PostgresPool, _ user: (id: UserID, token: String)) async throws {
        #expect(try await client.send(.post, "/v1/me/email-verification", token: user.token).status == .accepted)
        let subject = try await admin.query(
            "SELECT subject FROM outbox WHERE user_id = \(user.id.rawValue) AND kind = 'email_verification' ORDER BY id DESC LIMIT 1"
        ).single().decode("subject", as: String.self)
        let code = try #require(subject.split(separator: " ").last.map(String.init))
        #expect(
            try await client.send(.post, "/v1/me/email-verification/confirm", body: API.VerificationCodeBody(code: code), token: user.token)
                .status == .ok)
    }
}
