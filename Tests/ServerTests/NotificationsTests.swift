import Foundation
import HTTPTypes
import Marketplace
import Postgres
import Projections
import ServerTestSupport
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Notices outside the app (SPEC §12.4), through a real `lender serve`, a real SMTP server
/// process and the push sandbox's table: what each user chose is what reaches them.
@Suite("Notices by mail and push", .serialized)
struct NotificationsTests {
    func server(_ database: PostgresConfiguration, _ smtp: SMTPServer, environment: [String: String] = [:]) async throws
        -> ServerProcess
    {
        try await ServerProcess(
            database: database,
            environment: [
                "SMTP_URL": smtp.url, "MAIL_FROM": "Lender <no-reply@lender.test>", "PUBLIC_URL": "https://lender.test",
                "OUTBOX_RETRY_SECONDS": "1",
            ].merging(environment) { $1 })
    }

    /// Verifies `token`'s address with the code the SMTP server received (the `seen`th message).
    func verify(_ lender: ServerProcess, _ smtp: SMTPServer, _ token: String, seen: Int) async throws {
        #expect(try await lender.send(.post, "/v1/me/email-verification", token: token).status == .accepted)
        let mail = try #require(try await smtp.waitForMessages(seen).last)
        let code = try #require(mail.mailHeader("Subject")?.split(separator: " ").last.map(String.init))
        let confirmed = try await lender.send(
            .post, "/v1/me/email-verification/confirm", body: API.VerificationCodeBody(code: code), token: token)
        #expect(confirmed.status == .ok, "\(confirmed)")
    }

    func rental(_ lender: ServerProcess, _ token: String, title: String = "Drill") async throws -> ItemID {
        let posted = try await lender.send(
            .post, "/v1/rentals",
            body: API.RentalBody(title: title, category: .tools, dailyPriceCents: 1500, location: API.LocationInput(lat: 27.7, lng: 85.3)),
            token: token)
        #expect(posted.status == .created, "\(posted)")
        return try posted.decode(ItemResource.self).id
    }

    /// A bid by card from `from` days ahead, for two days: its id.
    func bid(_ lender: ServerProcess, _ item: ItemID, _ token: String, from: Int = 10) async throws -> String {
        let card = try await lender.send(
            .post, "/v1/me/cards",
            body: API.CardBody(number: "4242424242424242", expMonth: 12, expYear: 2031, cvv: "123", holderName: "Ada"), token: token)
        let placed = try await lender.send(
            .post, "/v1/items/\(item)/bids",
            body: API.BidBody(
                dailyPriceCents: 1400, from: dayFromToday(from), until: dayFromToday(from + 1), payWith: .card,
                cardId: UUID(uuidString: try #require(card.json["id"] as? String))!), token: token)
        #expect(placed.status == .created, "\(placed)")
        return try #require(placed.json["id"] as? String)
    }

    /// The pushes the sandbox recorded for `token`, as JSON objects, oldest first.
    func pushes(_ admin: PostgresPool, to token: String) async throws -> [[String: Any]] {
        try await admin.query("SELECT payload::text AS p FROM push_sandbox WHERE token = \(token) ORDER BY id").map { row in
            try JSONSerialization.jsonObject(with: Data(try row.decode("p", as: String.self).utf8)) as? [String: Any] ?? [:]
        }
    }

    func waitFor(_ what: String, timeout: Duration = .seconds(20), _ condition: () async throws -> Bool) async throws {
        let clock = ContinuousClock()
        let started = clock.now
        while clock.now - started < timeout {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("waited in vain for \(what)")
    }

    @Test func aBidReachesTheOwnerByMailAndPushAsTheyChose() async throws {
        try await withServerDatabase { database, admin in
            let smtp = try await SMTPServer()
            defer { smtp.stop() }
            let lender = try await server(database, smtp)
            defer { lender.kill(SIGTERM) }
            let owner = try await lender.user("owner")
            let ada = try await lender.user("ada")
            try await verify(lender, smtp, owner.token, seen: 1)
            let phone = String(repeating: "ab", count: 32)
            let device = try await lender.send(
                .post, "/v1/me/devices", body: API.DeviceBody(platform: .ios, token: phone), token: owner.token)
            #expect(device.status == .created, "\(device)")
            #expect(device.json["platform"] as? String == "ios")

            let drill = try await rental(lender, owner.token)
            _ = try await bid(lender, drill, ada.token)
            let mails = try await smtp.waitForMessages(2)
            let notice = try #require(mails.last)
            #expect(notice.mailHeader("To") == "owner@example.org")
            #expect(notice.mailText.contains("A new bid on “Drill”."), "\(notice.mailText)")
            #expect(notice.mailHTML.contains("https://lender.test/items/\(drill)"), "\(notice.mailHTML)")
            // One-click unsubscribe (RFC 8058), as headers, and as a link in the text.
            let link = try #require(notice.mailHeader("List-Unsubscribe"))
            #expect(link.hasPrefix("<https://lender.test/v1/unsubscribe?token="), "\(link)")
            #expect(notice.mailHeader("List-Unsubscribe-Post") == "List-Unsubscribe=One-Click")
            try await waitFor("a push") { try await pushes(admin, to: phone).count == 1 }
            let push = try #require(try await pushes(admin, to: phone).first)
            #expect(push["title"] as? String == "A new bid on your item")
            #expect(push["kind"] as? String == "bid_received")
            #expect(push["itemId"] as? String == drill.description)
            // Nothing personal on a lock screen: no name, no title, no amount.
            let raw = try await admin.query("SELECT payload::text AS p FROM push_sandbox").single().decode("p", as: String.self)
            for secret in ["ada", "Drill", "1400", "owner"] { #expect(!raw.contains(secret), "\(raw)") }
            // Ada has no verified address and no device: she hears of her bid's fate in the app only.
            #expect(try await count(admin, "SELECT count(*) FROM outbox WHERE recipient = 'ada@example.org'") == 0)

            // The owner turns mail of bids off: the next bid is pushed, not mailed.
            let changed = try await lender.send(
                .patch, "/v1/me/notification-settings",
                body: API.NotificationSettingsChange(bidReceived: API.NoticeChannelsChange(email: false)), token: owner.token)
            #expect(changed.status == .ok, "\(changed)")
            #expect((changed.json["bid_received"] as? [String: Bool]) == ["email": false, "push": true])
            #expect((changed.json["bid_approved"] as? [String: Bool]) == ["email": true, "push": true], "others as they were")
            let saw = try await rental(lender, owner.token, title: "Saw")
            _ = try await bid(lender, saw, ada.token)
            try await waitFor("the second push") { try await pushes(admin, to: phone).count == 2 }
            try await Task.sleep(for: .seconds(2))
            #expect(smtp.messages().count == 2, "no mail of the second bid")
        }
    }

    /// A saved search's new match (SPEC §12.7) goes out as any notice does: by mail to a
    /// verified address, and pushed.
    @Test func aNewMatchForASavedSearchIsMailedAndPushed() async throws {
        try await withServerDatabase { database, admin in
            let smtp = try await SMTPServer()
            defer { smtp.stop() }
            let lender = try await server(database, smtp)
            defer { lender.kill(SIGTERM) }
            let owner = try await lender.user("owner")
            let bob = try await lender.user("bob")
            try await verify(lender, smtp, bob.token, seen: 1)
            let phone = String(repeating: "cd", count: 32)
            #expect(
                try await lender.send(.post, "/v1/me/devices", body: API.DeviceBody(platform: .ios, token: phone), token: bob.token).status
                    == .created)
            let saved = try await lender.send(
                .post, "/v1/me/saved-searches", body: API.SavedSearchBody(name: "Drills", query: "q=drill&category=tools"),
                token: bob.token)
            #expect(saved.status == .created, "\(saved)")
            let drill = try await rental(lender, owner.token, title: "Cordless drill")
            let mail = try #require(try await smtp.waitForMessages(2).last)
            #expect(mail.mailHeader("To") == "bob@example.org")
            #expect(mail.mailText.contains("A new listing matches your saved search: “Cordless drill”."), "\(mail.mailText)")
            #expect(mail.mailHTML.contains("https://lender.test/items/\(drill)"), "\(mail.mailHTML)")
            try await waitFor("a push") { try await pushes(admin, to: phone).count == 1 }
            let push = try #require(try await pushes(admin, to: phone).first)
            #expect(push["kind"] as? String == "new_match")
            #expect(push["title"] as? String == "A new listing matches your saved search")
        }
    }

    @Test func theUnsubscribeLinkNeedsNoLoginAndIsSigned() async throws {
        try await withServerDatabase { database, admin in
            let smtp = try await SMTPServer()
            defer { smtp.stop() }
            let lender = try await server(database, smtp)
            defer { lender.kill(SIGTERM) }
            let owner = try await lender.user("owner")
            let ada = try await lender.user("ada")
            try await verify(lender, smtp, owner.token, seen: 1)
            // The verification mail's link stops every notice's mail; a notice's only its kind.
            let first = try #require(smtp.messages().first)
            #expect(first.mailHeader("List-Unsubscribe") != nil, "every mail carries one")
            _ = try await bid(lender, try await rental(lender, owner.token), ada.token)
            let notice = try #require(try await smtp.waitForMessages(2).last)
            let link = try #require(notice.mailHeader("List-Unsubscribe")?.trimmingCharacters(in: CharacterSet(charactersIn: "<>")))
            let path = String(link.dropFirst("https://lender.test".count))

            // Opened in a browser: a page with a button; nothing changes yet (scanners open links).
            let page = try await lender.send(.get, path)
            #expect(page.status == .ok)
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            #expect(String(decoding: page.data, as: UTF8.self).contains("<form method=\"post\""))
            #expect(try await count(admin, "SELECT count(*) FROM notification_settings") == 0)

            // Forged, or cut: 410, and nothing changes.
            let forged = path.dropLast(2) + (path.hasSuffix("AA") ? "AB" : "AA")
            #expect(try await lender.send(.post, String(forged)).code == "token_invalid")
            #expect(try await lender.send(.post, "/v1/unsubscribe?token=").fieldCodes == ["token": "required"])
            #expect(try await lender.send(.post, "/v1/unsubscribe?token=\(String(repeating: "A", count: 201))").fieldCodes == ["token": "too_long"])
            let otherUser = path.replacingOccurrences(of: "token=", with: "token=Z")
            #expect(try await lender.send(.get, otherUser).status == .gone)
            #expect(try await count(admin, "SELECT count(*) FROM notification_settings") == 0)

            // The one-click POST, as a mail client sends it.
            let done = try await lender.send(
                .post, path, headers: ["Content-Type": "application/x-www-form-urlencoded"])
            #expect(done.status == .ok, "\(done)")
            let settings = try await lender.send(.get, "/v1/me/notification-settings", token: owner.token).json
            #expect((settings["bid_received"] as? [String: Bool]) == ["email": false, "push": true])
            #expect((settings["booking_confirmed"] as? [String: Bool])?["email"] == true)
            // Again: the same answer.
            #expect(try await lender.send(.post, path).status == .ok)

            // The verification mail's link: no notice by mail at all.
            let all = try #require(first.mailHeader("List-Unsubscribe")?.trimmingCharacters(in: CharacterSet(charactersIn: "<>")))
            #expect(try await lender.send(.post, String(all.dropFirst("https://lender.test".count))).status == .ok)
            let none = try await lender.send(.get, "/v1/me/notification-settings", token: owner.token).json
            #expect(none.values.allSatisfy { ($0 as? [String: Bool])?["email"] == false }, "\(none)")
        }
    }

    @Test func settingsAndDevicesRefuseWhatTheyDoNotTake() async throws {
        try await withServerDatabase { database, admin in
            let lender = try await ServerProcess(database: database)
            defer { lender.kill(SIGTERM) }
            let ada = try await lender.user("ada")
            let bob = try await lender.user("bob")
            let defaults = try await lender.send(.get, "/v1/me/notification-settings", token: ada.token)
            #expect(defaults.status == .ok)
            #expect((defaults.json["message_received"] as? [String: Bool]) == ["email": false, "push": true])
            #expect((defaults.json["booking_starts_tomorrow"] as? [String: Bool]) == ["email": true, "push": true])

            func patch(_ body: [String: Any]) async throws -> Reply {
                try await lender.send(.patch, "/v1/me/notification-settings", json: body, token: ada.token)
            }
            let unknown = try await patch(["bid_recieved": ["email": false]])
            #expect(unknown.status == .unprocessableContent && unknown.fieldCodes["bid_recieved"] == "unknown_field", "\(unknown)")
            let sms = try await patch(["bid_received": ["sms": true]])
            #expect(sms.status == .unprocessableContent && sms.fieldCodes["bid_received.sms"] == "unknown_field", "\(sms)")
            #expect(try await patch(["bid_received": ["email": "no"]]).status == .badRequest)
            #expect(try await patch(["bid_received": true]).status == .badRequest)
            #expect(try await count(admin, "SELECT count(*) FROM notification_settings") == 0, "nothing written")

            func device(_ body: [String: Any], _ token: String) async throws -> Reply {
                try await lender.send(.post, "/v1/me/devices", json: body, token: token)
            }
            #expect(try await device(["platform": "windows", "token": "abcdefgh12"], ada.token).fieldCodes == ["platform": "invalid_platform"])
            #expect(try await device(["platform": "ios", "token": "short"], ada.token).fieldCodes == ["token": "invalid_token"])
            #expect(try await device(["platform": "ios", "token": "abc def ghi"], ada.token).fieldCodes == ["token": "invalid_token"])
            #expect(try await device(["platform": "ios", "token": "abc\r\ndefghi"], ada.token).fieldCodes == ["token": "invalid_token"])
            #expect(try await device(["platform": "ios"], ada.token).fieldCodes == ["token": "required"])
            #expect(try await count(admin, "SELECT count(*) FROM devices") == 0)

            // Eleven devices: the newest ten are kept.
            for index in 0..<11 {
                #expect(try await device(["platform": "android", "token": "fcm:token-\(index)"], ada.token).status == .created)
            }
            let listed = try await lender.send(.get, "/v1/me/devices", token: ada.token).json["devices"] as? [[String: Any]] ?? []
            #expect(listed.count == 10)
            #expect(!listed.contains { $0["token"] as? String == "fcm:token-0" }, "the oldest went")

            // Another user's device is not mine to remove; a token registered again moves.
            #expect(try await lender.send(.delete, "/v1/me/devices/fcm:token-5", token: bob.token).code == "device_not_found")
            #expect(try await device(["platform": "ios", "token": "fcm:token-5"], bob.token).status == .created)
            #expect(try await lender.send(.delete, "/v1/me/devices/fcm:token-5", token: ada.token).code == "device_not_found")
            #expect(try await lender.send(.delete, "/v1/me/devices/fcm:token-5", token: bob.token).status == .noContent)
            #expect(try await lender.send(.delete, "/v1/me/devices/fcm:token-5", token: bob.token).code == "device_not_found")
            #expect(try await lender.send(.delete, "/v1/me/devices/abc%00defgh", token: bob.token).code == "device_not_found")
            // A burst of registrations keeps the newest ten too.
            let burst = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<12 {
                    group.addTask { try await device(["platform": "ios", "token": "burst-token-\(index)"], bob.token).status.code }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(burst.allSatisfy { $0 == 201 }, "\(burst)")
            #expect(try await count(admin, "SELECT count(*) FROM devices WHERE token LIKE 'burst-token-%'") == 10)

            // The export holds them; forgetting deletes them.
            #expect(try await patch(["loan_repaid": ["push": false]]).status == .ok)
            let saved = try await lender.send(
                .post, "/v1/me/saved-searches", body: API.SavedSearchBody(name: "Tents", query: "q=tent"), token: ada.token)
            #expect(saved.status == .created, "\(saved)")
            let export = try await lender.send(.get, "/v1/me/export", token: ada.token).json
            #expect((export["savedSearches"] as? [Any])?.count == 1)
            #expect((export["devices"] as? [Any])?.count == 9)
            #expect(((export["notificationSettings"] as? [String: Any])?["loan_repaid"] as? [String: Bool])?["push"] == false)
            let closed = try await lender.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: ada.token)
            #expect(closed.status == .noContent, "\(closed)")
            #expect(try await count(admin, "SELECT count(*) FROM devices WHERE user_id = \(ada.id.rawValue)") == 0)
            #expect(try await count(admin, "SELECT count(*) FROM notification_settings") == 0)
            #expect(try await count(admin, "SELECT count(*) FROM saved_searches") == 0, "what she looked for goes too")
        }
    }

    @Test func aBookingIsRemindedOnceTheDayBeforeAndItsCancellationToldTheOtherParty() async throws {
        try await withServerDatabase { database, admin in
            let lender = try await ServerProcess(database: database)
            defer { lender.kill(SIGTERM) }
            let owner = try await lender.user("owner")
            let ada = try await lender.user("ada")
            let drill = try await rental(lender, owner.token)
            let booked = try await bid(lender, drill, ada.token, from: 10)
            #expect(try await lender.send(.post, "/v1/bids/\(booked)/approve", token: owner.token).status == .ok)
            let cancelled = try await bid(lender, drill, ada.token, from: 20)
            #expect(try await lender.send(.post, "/v1/bids/\(cancelled)/approve", token: owner.token).status == .ok)

            let phone = "apns-0123456789abcdef"
            #expect(
                try await lender.send(.post, "/v1/me/devices", body: API.DeviceBody(platform: .ios, token: phone), token: ada.token).status
                    == .created)
            // The day before the first booking: both parties hear, once, however often the jobs run.
            let eve = dayFromToday(9)
            #expect(try runLender(["jobs", "run", "--as-of", eve], database: database).contains("1 bookings reminded"))
            #expect(try runLender(["jobs", "run", "--as-of", eve], database: database).contains("0 bookings reminded"))
            func feed(_ token: String) async throws -> [String] {
                (try await lender.send(.get, "/v1/me/feed", token: token).json["data"] as? [[String: Any]] ?? []).compactMap {
                    $0["kind"] as? String
                }
            }
            #expect(try await feed(ada.token).filter { $0 == "booking_starts_tomorrow" }.count == 1)
            #expect(try await feed(owner.token).filter { $0 == "booking_starts_tomorrow" }.count == 1)
            try await waitFor("the reminder's push") {
                try await pushes(admin, to: phone).contains { $0["kind"] as? String == "booking_starts_tomorrow" }
            }
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'BookingReminded'") == 1)

            // The owner calls the second booking off: the renter hears, with her refund; he does not.
            let cancel = try await lender.send(
                .post, "/v1/bookings/\(cancelled)/cancel", body: API.CancellationBody(reason: "the drill broke"), token: owner.token)
            #expect(cancel.status == .ok, "\(cancel)")
            let told = (try await lender.send(.get, "/v1/me/feed", token: ada.token).json["data"] as? [[String: Any]] ?? [])
                .first { $0["kind"] as? String == "booking_cancelled" }
            #expect(told?["amountCents"] as? Int == 2940, "\(String(describing: told))")
            #expect(try await feed(owner.token).contains("booking_cancelled") == false)
            try await waitFor("the cancellation's push") {
                try await pushes(admin, to: phone).contains { $0["kind"] as? String == "booking_cancelled" }
            }
        }
    }

    @Test func aSenderKilledMidSendLosesNothingAndRepeatsAtMostOnce() async throws {
        try await withServerDatabase { database, admin in
            let smtp = try await SMTPServer()
            defer { smtp.stop() }
            let quiet = try await ServerProcess(database: database)  // no SMTP: mail waits
            let ada = try await quiet.user("ada")
            let bob = try await quiet.user("bob")
            for token in [ada.token, bob.token] {
                #expect(try await quiet.send(.post, "/v1/me/email-verification", token: token).status == .accepted)
            }
            quiet.kill(SIGTERM)
            _ = await quiet.waitForExit()

            // A sender that dies (kill -9) once the SMTP server has the first mail, before marking it.
            // It may die before it answers as ready: the sender starts with the server.
            if let dying = try? await server(database, smtp, environment: ["LENDER_FAILPOINTS": "outbox.after-send"]) {
                #expect(await dying.waitForExit() != nil, "the sender died after sending")
            }
            _ = try await smtp.waitForMessages(1)
            try await Task.sleep(for: .seconds(1))
            #expect(smtp.messages().count == 1)
            #expect(try await count(admin, "SELECT count(*) FROM outbox WHERE sent_at IS NULL") == 2, "nothing marked")
            // Its claim lapses (a minute; here at once), and the next sender sends both.
            try await admin.query("UPDATE outbox SET claimed_until = now() - interval '1 second' WHERE claimed_until IS NOT NULL")
            let next = try await server(database, smtp)
            defer { next.kill(SIGTERM) }
            let received = try await smtp.waitForMessages(3)
            try await Task.sleep(for: .seconds(1))
            let ids = smtp.messages().compactMap { $0.mailHeader("Message-ID") }
            #expect(ids.count == 3 && Set(ids).count == 2, "one repeat, of the first: \(ids) of \(received.count)")
            #expect(ids[0] == ids[1] || ids[0] == ids[2], "the repeat has the first's Message-ID: \(ids)")
            #expect(try await count(admin, "SELECT count(*) FROM outbox WHERE sent_at IS NULL") == 0)
        }
    }
}
