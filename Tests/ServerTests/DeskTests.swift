import Crypto
import EventStore
import Foundation
import HTTPTypes
import HummingbirdTesting
import Marketplace
import NIOCore
import Postgres
import Projections
import ServerTestSupport
import Testing
import TestSupport
import UseCases

/// The operator's desk (SPEC §12.6): a support round in a real browser, and the attacks a
/// web console draws, each over HTTP.
@Suite("The operator's desk")
struct DeskTests {
    static let hostileName = "<script>window.__xss=1</script>Mal"
    static let hostileTitle = "\"><img src=x onerror=\"window.__xss=1\">Drill"
    static let hostileReport = "<script>window.__xss=1</script> sells fakes"

    /// A booked drill under dispute, an operator `desk`, and `mallory`, whose name, listing
    /// and a report on it carry markup; a checkpoint signed with `key`.
    static func scene(_ client: any TestClientProtocol, _ admin: PostgresPool, clock: TestClock, key: Curve25519.Signing.PrivateKey)
        async throws -> (drill: ItemID, booking: String, hostileItem: ItemID, renter: (id: UserID, token: String))
    {
        let (_, renter, drill, booking) = try await DisputesTests.bookedDrill(client)
        _ = try await client.user("desk")
        _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
        let registered = try await client.send(
            .post, "/v1/users",
            body: API.RegisterBody(
                handle: "mallory", displayName: hostileName, email: "mallory@example.org", password: "correct horse battery"))
        #expect(registered.status == .created, "\(registered)")
        let mallory = try await client.login("mallory")
        let hostile = try await client.postRental(mallory, title: hostileTitle).id
        let report = try await client.send(
            .post, "/v1/reports",
            body: API.ReportBody(subjectType: .item, subjectId: hostile.rawValue, reason: .scam, text: hostileReport), token: renter.token)
        #expect(report.status == .created, "\(report)")
        clock.set("2026-12-05")
        let opened = try await client.send(
            .post, "/v1/bookings/\(booking)/disputes", body: API.DisputeBody(reason: .noShow, text: "Nobody home"), token: renter.token)
        #expect(opened.status == .created, "\(opened)")
        let store = EventStore(pool: admin, logger: TestDatabase.logger)
        try await store.store(try await store.checkpoint(signingKey: key))
        return (drill, booking, hostile, renter)
    }

    @Test func anOperatorDoesTheWholeSupportRoundInARealBrowser() async throws {
        let python = root.appendingPathComponent(".local/venv/bin/python").path
        let chromium = ["/usr/bin/chromium", "/usr/bin/chromedriver"]
        try #require(
            FileManager.default.isExecutableFile(atPath: python) && chromium.allSatisfy(FileManager.default.isExecutableFile),
            "scripts/test installs Chromium, chromedriver and Selenium: run it once")
        let clock = TestClock()
        let key = Curve25519.Signing.PrivateKey()
        // A browser loads both cores: not beside the tests that count what a few seconds do.
        try await QuietMachine.shared.run {
            try await withServer(testing: .live, today: clock.today, checkpointKey: key.publicKey) { client, admin in
                let (drill, booking, hostile, renter) = try await Self.scene(client, admin, clock: clock, key: key)
                let port = try #require(client.port)
                let out = root.appendingPathComponent(".local/test-output/desk")
                try? FileManager.default.removeItem(at: out)
                let plan: [String: Any] = [
                    "base": "http://127.0.0.1:\(port)", "handle": "desk", "password": "correct horse battery",
                    "email": "rita@example.org", "hostileHandle": "mallory", "hostileName": Self.hostileName,
                    "reportText": Self.hostileReport, "takeDown": "\(hostile)", "booking": booking, "renterCents": 9410,
                    "ownerCents": 0, "historyItem": "\(drill)", "out": out.path,
                    "narrowPages": [
                        "reports": "/desk/reports", "user": "/desk/users/\(renter.id)", "booking": "/desk/bookings/\(booking)",
                        "item": "/desk/items/\(drill)", "health": "/desk/health",
                    ],
                ]
                let (status, output) = try await Self.run(
                    python, [root.appendingPathComponent("Tests/Browser/desk_round.py").path, String(decoding: try JSONSerialization.data(withJSONObject: plan), as: UTF8.self)])
                #expect(status == 0, "the browser's round: \(output)")
                print("desk screenshots in \(out.path): \(output)")

                // What the browser did, as the API sees it.
                #expect(try await Self.status(of: hostile, admin) == "taken_down")
                let resolved = try await client.send(.get, "/v1/bookings/\(booking)", token: renter.token)
                #expect(resolved.json["status"] as? String == "completed", "\(resolved)")
                #expect((resolved.json["dispute"] as? [String: Any])?["renterCents"] as? Int == 9410, "\(resolved)")
                try await DisputesTests.moneyAddsUp(admin)
            }
        }
    }

    static func status(of item: ItemID, _ admin: PostgresPool) async throws -> String? {
        try await admin.query("SELECT status FROM items_view WHERE item_id = \(item.rawValue)").first?.decode("status", as: String.self)
    }

    /// Runs a process to its end without holding a thread of the server's: polled.
    static func run(_ executable: String, _ arguments: [String]) async throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("desk-\(UUID()).log")
        FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        let deadline = ContinuousClock.now + .seconds(240)
        while process.isRunning {
            if ContinuousClock.now > deadline { process.terminate() }
            try await Task.sleep(for: .milliseconds(200))
        }
        try handle.close()
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: output)
        return (process.terminationStatus, text)
    }

    // MARK: Over HTTP

    /// A browser's session at the desk: its cookie, and the CSRF token its pages carry.
    struct DeskBrowser {
        var cookie: String
        var csrf: String
    }

    static func cookie(_ name: String, in headers: HTTPFields) -> String? {
        headers[values: .setCookie].lazy.compactMap { line -> String? in
            guard line.hasPrefix(name + "=") else { return nil }
            return String(line.dropFirst(name.count + 1).prefix { $0 != ";" })
        }.first
    }

    static func csrf(in html: String) -> String? {
        guard let range = html.range(of: #"name="csrf" value="([0-9a-f]+)""#, options: .regularExpression) else { return nil }
        return String(html[range].dropFirst(#"name="csrf" value=""#.count).dropLast())
    }

    static func get(_ client: any TestClientProtocol, _ path: String, cookie: String? = nil, token: String? = nil) async throws -> Reply {
        var headers = HTTPFields()
        if let cookie { headers[.cookie] = cookie }
        if let token { headers[.authorization] = "Bearer \(token)" }
        return try await client.execute(uri: path, method: .get, headers: headers, body: nil) {
            Reply(status: $0.status, headers: $0.headers, data: Data(buffer: $0.body))
        }
    }

    static func post(
        _ client: any TestClientProtocol, _ path: String, form: [String: String], cookie: String?, extra: HTTPFields = [:]
    ) async throws -> Reply {
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        if let cookie { headers[.cookie] = cookie }
        headers.append(contentsOf: extra)
        let body = form.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }
            .joined(separator: "&")
        return try await client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(string: body)) {
            Reply(status: $0.status, headers: $0.headers, data: Data(buffer: $0.body))
        }
    }

    /// Signs in as a browser would: the form's page first, for its login cookie and token.
    static func signIn(_ client: any TestClientProtocol, _ handle: String) async throws -> (Reply, DeskBrowser?) {
        let page = try await get(client, "/desk/login")
        let nonce = try #require(cookie("lender_desk_login", in: page.headers), "\(page.headers)")
        let token = try #require(csrf(in: page.text), "\(page)")
        let signed = try await post(
            client, "/desk/login", form: ["csrf": token, "handle": handle, "password": "correct horse battery"],
            cookie: "lender_desk_login=\(nonce)")
        guard let session = cookie("lender_desk", in: signed.headers), !session.isEmpty else { return (signed, nil) }
        let reports = try await get(client, "/desk/reports", cookie: "lender_desk=\(session)")
        return (signed, DeskBrowser(cookie: "lender_desk=\(session)", csrf: try #require(csrf(in: reports.text), "\(reports)")))
    }

    @Test func aFormWithoutItsTokenOrFromAnotherOriginChangesNothing() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let (_, _, hostile, renter) = try await Self.scene(client, admin, clock: clock, key: Curve25519.Signing.PrivateKey())
            let (signed, browser) = try await Self.signIn(client, "desk")
            #expect(signed.status == .seeOther && signed.headers[.location] == "/desk/reports", "\(signed)")
            let session = try #require(browser)
            let setCookie = signed.headers[values: .setCookie].first { $0.hasPrefix("lender_desk=") } ?? ""
            #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict") && setCookie.contains("Path=/desk"), "\(setCookie)")

            let takedown = "/desk/items/\(hostile)/takedown"
            let reason = ["reason": "Counterfeit goods"]
            let forged: [(String, [String: String], HTTPFields)] = [
                ("no token", reason, [:]),
                ("a made-up token", reason.merging(["csrf": String(repeating: "a", count: 64)]) { $1 }, [:]),
                ("another origin", reason.merging(["csrf": session.csrf]) { $1 }, [.origin: "http://evil.example"]),
                ("a cross-site fetch", reason.merging(["csrf": session.csrf]) { $1 }, [HTTPField.Name("Sec-Fetch-Site")!: "cross-site"]),
            ]
            for (what, form, headers) in forged {
                let refused = try await Self.post(client, takedown, form: form, cookie: session.cookie, extra: headers)
                #expect(refused.status == .forbidden && refused.text.contains("csrf_failed"), "\(what): \(refused)")
            }
            let signedOut = try await Self.post(client, takedown, form: reason, cookie: nil)
            #expect(signedOut.status == .forbidden, "signed out: \(signedOut)")
            #expect(try await Self.status(of: hostile, admin) == "available", "nothing was taken down")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'ItemTakenDown'") == 0)

            let done = try await Self.post(
                client, takedown, form: reason.merging(["csrf": session.csrf]) { $1 }, cookie: session.cookie,
                extra: [.origin: "http://localhost"])
            #expect(done.status == .seeOther, "\(done)")
            #expect(try await Self.status(of: hostile, admin) == "taken_down")
            // NUL in a field: 422, as in a JSON body, and nothing written (PostgreSQL's text
            // refuses it; it once reached the log's append as a 500).
            let nul = try await Self.post(
                client, "/desk/users/\(renter.id)/suspend", form: ["csrf": session.csrf, "reason": "a\u{0}b"],
                cookie: session.cookie)
            #expect(nul.status == .unprocessableContent && nul.text.contains("control_character"), "\(nul)")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'UserSuspended'") == 0)
            // A reason is needed, as in the API.
            let bare = try await Self.post(client, takedown, form: ["csrf": session.csrf], cookie: session.cookie)
            #expect(bare.status == .unprocessableContent && bare.text.contains("reason_required"), "\(bare)")
        }
    }

    @Test func aSessionEndsAtTheDeskAndASuspendedOperatorOnlyReads() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            for handle in ["desk", "desk2"] {
                _ = try await client.user(handle)
                _ = try runLender(["users", "grant-operator", handle], database: try await ownerURL(admin))
            }
            let one = try #require(try await Self.signIn(client, "desk").1)
            let two = try #require(try await Self.signIn(client, "desk2").1)
            let verify = "/desk/users/\(rita.id)/verify-identity"
            // Another operator's real token is not this session's.
            let crossed = try await Self.post(client, verify, form: ["csrf": two.csrf, "reason": "x"], cookie: one.cookie)
            #expect(crossed.status == .forbidden && crossed.text.contains("csrf_failed"), "\(crossed)")
            // A login form posted without the cookie its token is bound to.
            let page = try await Self.get(client, "/desk/login")
            let unbound = try await Self.post(
                client, "/desk/login", form: ["csrf": try #require(Self.csrf(in: page.text)), "handle": "desk", "password": "correct horse battery"],
                cookie: nil)
            #expect(unbound.status == .forbidden && Self.cookie("lender_desk", in: unbound.headers) == nil, "\(unbound)")

            // desk2 suspended: signed out everywhere; signed in again, it reads and acts on nothing.
            let deskToken = try await client.login("desk")
            let two2ID = try #require(try await client.send(.get, "/v1/admin/users?q=desk2", token: deskToken).decode(Page<AdminUserSummary>.self).data.first?.id)
            let suspended = try await client.send(
                .post, "/v1/admin/users/\(two2ID)/suspend", body: API.SuspendBody(reason: "Under review"), token: deskToken)
            #expect(suspended.status == .ok, "\(suspended)")
            #expect(try await Self.get(client, "/desk/reports", cookie: two.cookie).status == .seeOther, "its session ended")
            let again = try #require(try await Self.signIn(client, "desk2").1)
            #expect(try await Self.get(client, "/desk/users/\(rita.id)", cookie: again.cookie).status == .ok)
            let refused = try await Self.post(client, verify, form: ["csrf": again.csrf, "reason": "x"], cookie: again.cookie)
            #expect(refused.status == .forbidden && refused.text.contains("account_suspended"), "\(refused)")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'IdentityVerified'") == 0)
            let out = try await Self.post(client, "/desk/logout", form: ["csrf": again.csrf], cookie: again.cookie)
            #expect(out.status == .seeOther && out.headers[.location] == "/desk/login", "a suspended operator signs out: \(out)")
            // The cookie after logging out opens nothing.
            #expect(try await Self.get(client, "/desk/reports", cookie: again.cookie).status == .seeOther)
            let late = try await Self.post(client, verify, form: ["csrf": again.csrf, "reason": "x"], cookie: again.cookie)
            #expect(late.status == .forbidden, "\(late)")

            // An operator no longer: the next page ends the desk's session and its cookie.
            _ = try runLender(["users", "revoke-operator", "desk"], database: try await ownerURL(admin))
            let demoted = try await Self.get(client, "/desk/reports", cookie: one.cookie)
            #expect(demoted.status == .seeOther && Self.cookie("lender_desk", in: demoted.headers) == "", "\(demoted)")
            #expect(try await Self.get(client, "/desk/reports", cookie: one.cookie).status == .seeOther)
        }
    }

    @Test func nobodyButAnOperatorSeesADeskPage() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let (drill, booking, _, renter) = try await Self.scene(client, admin, clock: clock, key: Curve25519.Signing.PrivateKey())
            let pages = [
                "/desk/reports", "/desk/users?q=zz", "/desk/users/\(renter.id)", "/desk/bookings", "/desk/bookings/\(booking)",
                "/desk/items/\(drill)", "/desk/health",
            ]
            // A renter's password at the desk's door: refused, and no session is left behind.
            let (signed, browser) = try await Self.signIn(client, "rita")
            #expect(signed.status == .forbidden && signed.text.contains("not_operator") && browser == nil, "\(signed)")
            for page in pages {
                let stranger = try await Self.get(client, page, token: renter.token)
                #expect(stranger.status == .forbidden && stranger.text.contains("not_operator"), "\(page): \(stranger)")
                #expect(!stranger.text.contains("rita@example.org") && !stranger.text.contains("Drill"), "nothing rendered: \(page)")
                let nobody = try await Self.get(client, page)
                #expect(nobody.status == .seeOther && nobody.headers[.location] == "/desk/login", "\(page): \(nobody)")
            }
            let desk = try #require(try await Self.signIn(client, "desk").1)
            for page in pages {
                let read = try await Self.get(client, page, cookie: desk.cookie)
                #expect(read.status == .ok, "\(page): \(read)")
                // Clickjacking and injected script: refused by the page's own headers.
                let policy = read.headers[.contentSecurityPolicy] ?? ""
                #expect(policy.contains("frame-ancestors 'none'") && !policy.contains("unsafe-inline"), "\(page): \(policy)")
                #expect(read.headers[HTTPField.Name("X-Frame-Options")!] == "DENY")
                #expect(!read.text.contains("<script") && !read.text.contains("<img"), "\(page): markup got through")
            }
            let user = try await Self.get(client, "/desk/users?q=mallory", cookie: desk.cookie)
            #expect(user.status == .seeOther, "one match opens the user: \(user)")
            let mallory = try await Self.get(client, user.headers[.location] ?? "", cookie: desk.cookie)
            #expect(mallory.text.contains("&lt;script&gt;window.__xss=1&lt;/script&gt;Mal"), "escaped, shown: \(mallory.text)")
            #expect(mallory.text.contains("&quot;&gt;&lt;img src=x onerror=&quot;window.__xss=1&quot;&gt;Drill"))
        }
    }

    @Test func openReportsArePagedFiftyAtATime() async throws {
        try await withServer { client, admin in
            _ = try await client.user("desk")
            _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
            // 55 open reports, on 55 users, by 3 reporters (20 a day each at most).
            let reporters = [try await client.user("rep1"), try await client.user("rep2"), try await client.user("rep3")]
            for index in 0..<55 {
                let subject = try await client.register("sub\(index)").id
                let filed = try await client.send(
                    .post, "/v1/reports", body: API.ReportBody(subjectType: .user, subjectId: subject.rawValue, reason: .spam),
                    token: reporters[index % 3].token)
                #expect(filed.status == .created, "\(filed)")
            }
            let desk = try #require(try await Self.signIn(client, "desk").1)
            let first = try await Self.get(client, "/desk/reports", cookie: desk.cookie)
            #expect(first.text.components(separatedBy: "class=\"card\"").count - 1 == 50)
            let older = try #require(
                first.text.range(of: #"/desk/reports\?status=open&amp;cursor=[0-9]+"#, options: .regularExpression)
                    .map { String(first.text[$0]).replacingOccurrences(of: "&amp;", with: "&") })
            let second = try await Self.get(client, older, cookie: desk.cookie)
            #expect(second.text.components(separatedBy: "class=\"card\"").count - 1 == 5 && !second.text.contains("id=\"older-reports\""))
        }
    }

    @Test func aForgottenUsersPersonalFieldsShowAsRemoved() async throws {
        try await withServer { client, admin in
            let gone = try await client.user("gone")
            _ = try await client.user("desk")
            _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
            let closed = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: gone.token)
            #expect(closed.status == .noContent, "\(closed)")
            let desk = try #require(try await Self.signIn(client, "desk").1)
            let page = try await Self.get(client, "/desk/users/\(gone.id)", cookie: desk.cookie)
            #expect(page.status == .ok && page.text.contains("(removed)"), "\(page)")
            #expect(!page.text.contains("gone@example.org") && !page.text.contains("User gone"), "\(page)")
            let byMail = try await Self.get(client, "/desk/users?q=gone@example.org", cookie: desk.cookie)
            #expect(!byMail.text.contains("gone@example.org</td>"), "\(byMail)")
        }
    }
}

/// The same reads and acts as JSON (SPEC §12.6), for an operator's token.
@Suite("The admin API's reads")
struct AdminReadsTests {
    @Test func anOperatorFindsAUserByEmailOrHandleAndReadsThemWhole() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let (_, booking, hostile, renter) = try await DeskTests.scene(
                client, admin, clock: clock, key: Curve25519.Signing.PrivateKey())
            let desk = try await client.login("desk")
            let byMail = try await client.send(.get, "/v1/admin/users?q=RITA@example.org", token: desk)
            let found = try byMail.decode(Page<AdminUserSummary>.self).data
            #expect(found.map(\.id) == [renter.id], "the whole address, in any case: \(byMail)")
            #expect(try await client.send(.get, "/v1/admin/users?q=mal", token: desk).decode(Page<AdminUserSummary>.self).data.map(\.handle) == ["mallory"])
            // A pattern is text: `%` and `_` match only themselves.
            #expect(try await client.send(.get, "/v1/admin/users?q=%25", token: desk).decode(Page<AdminUserSummary>.self).data.isEmpty)
            #expect(try await client.send(.get, "/v1/admin/users?q=_", token: desk).decode(Page<AdminUserSummary>.self).data.isEmpty)
            let none = try await client.send(.get, "/v1/admin/users", token: desk)
            #expect(none.status == .unprocessableContent && none.fieldCodes["q"] == "invalid_query", "\(none)")

            let whole = try await client.send(.get, "/v1/admin/users/\(renter.id)", token: desk)
            let user = try whole.decode(AdminUser.self)
            #expect(user.user.email == "rita@example.org" && user.user.balanceCents == 20_000 - 9_410, "\(whole)")
            #expect(user.bookings.map(\.id.description) == [booking])
            #expect(user.balanceHistory.first?.kind != nil && user.reportsFiled.count == 1)
            let mallory = try await client.send(.get, "/v1/admin/users?q=mallory", token: desk).decode(Page<AdminUserSummary>.self).data[0]
            let about = try await client.send(.get, "/v1/admin/users/\(mallory.id)", token: desk).decode(AdminUser.self)
            #expect(about.reportsAbout.map(\.subjectId) == [hostile.rawValue] && about.postings.map(\.id) == [hostile])
            let nobody = try await client.send(.get, "/v1/admin/users/\(UUID())", token: desk)
            #expect(nobody.status == .notFound && nobody.code == "user_not_found", "\(nobody)")

            let disputed = try await client.send(.get, "/v1/admin/bookings?status=disputed", token: desk)
            #expect(try disputed.decode(Page<BookingResource>.self).data.map(\.id.description) == [booking], "\(disputed)")
            let theirs = try await client.send(.get, "/v1/admin/bookings?userId=\(mallory.id)", token: desk)
            #expect(try theirs.decode(Page<BookingResource>.self).data.isEmpty)
            let bad = try await client.send(.get, "/v1/admin/bookings?status=lost&userId=nope", token: desk)
            #expect(bad.fieldCodes["status"] == "invalid_status" && bad.fieldCodes["userId"] == "invalid_id", "\(bad)")
        }
    }

    @Test func verifyingAnIdentityTakesAReasonAndIsRecordedOnce() async throws {
        try await withServer { client, admin in
            let rita = try await client.user("rita")
            let desk = try await client.user("desk")
            _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
            let path = "/v1/admin/users/\(rita.id)/verify-identity"
            let bare = try await client.send(.post, path, body: API.ReasonBody(reason: " "), token: desk.token)
            #expect(bare.status == .unprocessableContent && bare.fieldCodes["reason"] == "reason_required", "\(bare)")
            let stranger = try await client.send(.post, path, body: API.ReasonBody(reason: "Passport seen"), token: rita.token)
            #expect(stranger.status == .forbidden && stranger.code == "not_operator")
            for _ in 0..<2 {
                let verified = try await client.send(.post, path, body: API.ReasonBody(reason: "Passport seen"), token: desk.token)
                #expect(verified.status == .ok && verified.json["identityVerified"] as? Bool == true, "\(verified)")
            }
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'IdentityVerified'") == 1)
            let sanctions = try await client.send(.get, "/v1/admin/users/\(rita.id)", token: desk.token).decode(AdminUser.self).sanctions
            #expect(sanctions.map(\.type) == ["IdentityVerified"] && sanctions[0].reason == "Passport seen", "\(sanctions)")
            #expect(sanctions[0].operatorId?.contains(desk.id.description) == true, "\(sanctions)")
            let unknown = try await client.send(
                .post, "/v1/admin/users/\(UUID())/verify-identity", body: API.ReasonBody(reason: "x"), token: desk.token)
            #expect(unknown.status == .notFound, "\(unknown)")
            let own = try await client.send(
                .post, "/v1/admin/users/\(desk.id)/verify-identity", body: API.ReasonBody(reason: "me"), token: desk.token)
            #expect(own.status == .forbidden && own.code == "own_account", "\(own)")
            // The operator's words are sealed for the user, never in the log in clear.
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE data::text LIKE '%Passport seen%'") == 0)

            // Forgotten: personal fields removed, not shown.
            #expect(
                try await client.send(.delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: rita.token)
                    .status == .noContent)
            let gone = try await client.send(.get, "/v1/admin/users/\(rita.id)", token: desk.token).decode(AdminUser.self).user
            #expect(gone.forgotten && gone.email == nil && gone.displayName == nil, "\(gone)")
            let forgottenSanctions = try await client.send(.get, "/v1/admin/users/\(rita.id)", token: desk.token)
                .decode(AdminUser.self).sanctions
            #expect(forgottenSanctions.count == 1 && forgottenSanctions[0].reason == "[removed]", "\(forgottenSanctions)")
        }
    }
}
