import Foundation
import HTTPTypes
import Mail
import Marketplace
import Postgres
import Projections
import ServerTestSupport
import Testing
import TestSupport
import UseCases

#if canImport(Glibc)
import Glibc
#endif

/// Reaching people outside the app (SPEC §12.4), through a real `lender serve` and a real
/// SMTP server process (aiosmtpd): what the tests read is what the SMTP server received.
@Suite("Mail through a real SMTP server", .serialized)
struct MailTests {
    func server(_ database: PostgresConfiguration, _ smtp: SMTPServer, retrySeconds: Int = 1) async throws -> ServerProcess {
        try await ServerProcess(
            database: database,
            environment: [
                "SMTP_URL": smtp.url, "MAIL_FROM": "Lender <no-reply@lender.test>", "PUBLIC_URL": "https://lender.test",
                "OUTBOX_RETRY_SECONDS": "\(retrySeconds)",
            ])
    }

    /// The 6 digits in a verification mail's subject.
    func code(_ message: String) -> String? {
        message.mailHeader("Subject").flatMap { subject in subject.split(separator: " ").last.map(String.init) }
    }

    /// The token a reset mail carries.
    func token(_ message: String) -> String? {
        message.mailText.components(separatedBy: "token=").dropFirst().first?.split(separator: "\n").first.map(String.init)
    }

    @Test func aNewUserVerifiesTheirAddressForgetsTheirPasswordAndResetsIt() async throws {
        try await withServerDatabase { database, admin in
            let smtp = try await SMTPServer()
            defer { smtp.stop() }
            let lender = try await server(database, smtp)
            defer { lender.kill(SIGTERM) }
            let ada = try await lender.user("ada")
            #expect(try await lender.send(.get, "/v1/me", token: ada.token).json["emailVerified"] as? Bool == false)

            // Verification: a code by mail; a wrong one refused; the right one verifies.
            #expect(try await lender.send(.post, "/v1/me/email-verification", token: ada.token).status == .accepted)
            let first = try await smtp.waitForMessages(1)
            #expect(first.count == 1)
            let mail = try #require(first.first)
            #expect(mail.mailHeader("To") == "ada@example.org")
            #expect(mail.mailHeader("From") == "Lender <no-reply@lender.test>")
            let messageID = try #require(mail.mailHeader("Message-ID"))
            #expect(messageID.hasPrefix("<outbox-") && messageID.hasSuffix("@lender.test>"), "\(messageID)")
            let code = try #require(self.code(mail))
            #expect(code.count == 6 && code.allSatisfy(\.isNumber), "\(code)")
            let wrong = String((Int(code)! + 1) % 1_000_000).leftPadded(to: 6)
            let refused = try await lender.send(
                .post, "/v1/me/email-verification/confirm", body: API.VerificationCodeBody(code: wrong), token: ada.token)
            #expect(refused.status == .unprocessableContent, "\(refused)")
            #expect(refused.code == "wrong_code")
            let verified = try await lender.send(
                .post, "/v1/me/email-verification/confirm", body: API.VerificationCodeBody(code: code), token: ada.token)
            #expect(verified.status == .ok, "\(verified)")
            #expect(verified.json["emailVerified"] as? Bool == true)
            #expect(try await lender.send(.get, "/v1/me", token: ada.token).json["emailVerified"] as? Bool == true)
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'EmailVerified'") == 1)

            // A reset: the same answer for an address no account has; a link by mail for ada's.
            let unknown = try await lender.send(.post, "/v1/password-resets", body: API.PasswordResetBody(email: "nobody@example.org"))
            let known = try await lender.send(.post, "/v1/password-resets", body: API.PasswordResetBody(email: "ADA@example.org"))
            #expect(unknown.status == .accepted && known.status == .accepted)
            #expect(unknown.data == known.data)
            let both = try await smtp.waitForMessages(2)
            #expect(both.count == 2, "one reset mail, none for the unknown address")
            let resetMail = try #require(both.last)
            #expect(resetMail.mailText.contains("https://lender.test/reset-password?token="), "\(resetMail.mailText)")
            #expect(resetMail.mailHTML.contains("<a href=\"https://lender.test/reset-password?token="), "\(resetMail.mailHTML)")
            let token = try #require(self.token(resetMail))
            let weak = try await lender.send(
                .post, "/v1/password-resets/confirm", body: API.PasswordResetConfirmBody(token: token, password: "short"))
            #expect(weak.status == .unprocessableContent)
            let reset = try await lender.send(
                .post, "/v1/password-resets/confirm", body: API.PasswordResetConfirmBody(token: token, password: "a brand new password"))
            #expect(reset.status == .noContent, "\(reset)")
            // Every session is revoked; the new password logs in, the old one no longer.
            #expect(try await lender.send(.get, "/v1/me", token: ada.token).status == .unauthorized)
            let old = try await lender.send(.post, "/v1/sessions", body: API.LoginBody(handle: "ada", password: "correct horse battery"))
            #expect(old.status == .unauthorized)
            let session = try await lender.send(.post, "/v1/sessions", body: API.LoginBody(handle: "ada", password: "a brand new password"))
            #expect(session.status == .created, "\(session)")
            let again = try await lender.send(
                .post, "/v1/password-resets/confirm", body: API.PasswordResetConfirmBody(token: token, password: "another new password"))
            #expect(again.status == .gone)
            #expect(again.code == "token_invalid")
            let made = try await lender.send(
                .post, "/v1/password-resets/confirm",
                body: API.PasswordResetConfirmBody(token: "not-a-token", password: "another new password"))
            #expect(made.code == "token_invalid")
            #expect(try await count(admin, "SELECT count(*) FROM events WHERE type = 'PasswordChanged'") == 1)
            // Nothing of the token is kept but its digest.
            #expect(try await count(admin, "SELECT count(*) FROM password_resets WHERE encode(token_digest, 'escape') LIKE \("%\(token)%")") == 0)
            // Nor the mail that carried it, nor the code's, once sent (the rows stay, for the limits).
            #expect(try await count(admin, "SELECT count(*) FROM outbox WHERE sent_at IS NOT NULL") == 2)
            #expect(
                try await count(
                    admin,
                    "SELECT count(*) FROM outbox WHERE (text_body || coalesce(html_body, '')) LIKE \("%\(token)%") OR (text_body || coalesce(html_body, '')) LIKE \("%\(code)%")")
                    == 0)
        }
    }

    /// The real SMTP server, each send a while later: a batch slower than its claim, each send
    /// well inside one (a single send outlasting its claim may go twice: at least once is the
    /// promise, and a loaded machine must not look like a broken one). 1.8 s to spare a send:
    /// with 0.8 s, the whole suite's load once made one outlast its claim.
    struct SlowMailer: Mailer {
        let smtp: SMTPMailer
        func send(_ message: MailMessage) async throws {
            try await Task.sleep(for: .milliseconds(2200))
            try await smtp.send(message)
        }
    }

    @Test func aRowWhoseClaimLapsedMidBatchIsSentByOneSenderOnly() async throws {
        try await withServerDatabase { _, admin in
            let smtp = try await SMTPServer()
            defer { smtp.stop() }
            try await admin.withConnection { connection in
                try await Outbox.enqueue(
                    (0..<3).map { Outbox.Row(user: nil, recipient: "r\($0)@example.org", kind: "test", subject: "row \($0)", text: "hi") },
                    on: connection)
            }
            func sender() -> Outbox {
                var outbox = Outbox(pool: admin, settings: MailSettings(), logger: TestDatabase.logger)
                outbox.claimSeconds = 4
                return outbox
            }
            let mailer = SlowMailer(smtp: SMTPMailer(url: smtp.url))
            // The first claims all three and takes 6.6 s over them; the second comes when the
            // first's claims on the rows it has not reached have lapsed (at 4 s), before the
            // first reaches the third (at 4.4 s).
            async let first = sender().sendDue(mailer: mailer, pusher: nil)
            try await Task.sleep(for: .milliseconds(4200))
            async let second = sender().sendDue(mailer: mailer, pusher: nil)
            var rounds = try await [first, second]
            // A row both skipped (its claim lapsed in the first's hands before the second came)
            // goes at a later round, once its claim has lapsed for good: at least once, never twice.
            // Under load a claim may lapse again in a later round's hands: rounds go on (a
            // server's sender runs every second) until every row is out.
            for _ in 0..<6 where smtp.messages().count < 3 {
                try await Task.sleep(for: .milliseconds(1100))
                rounds.append(try await sender().sendDue(mailer: mailer, pusher: nil))
            }
            _ = try await smtp.waitForMessages(3)
            try await Task.sleep(for: .milliseconds(500))
            let subjects = smtp.messages().compactMap { $0.mailHeader("Subject") }.sorted()
            #expect(subjects == ["row 0", "row 1", "row 2"], "each once: \(subjects), rounds \(rounds)")
        }
    }

    @Test func aCodeOlderThanThirtyMinutesIsExpired() async throws {
        try await withServerDatabase { database, admin in
            let lender = try await ServerProcess(database: database)  // no SMTP: the code waits in the outbox
            defer { lender.kill(SIGTERM) }
            let ada = try await lender.user("ada")
            #expect(try await lender.send(.post, "/v1/me/email-verification", token: ada.token).status == .accepted)
            let subject = try await admin.query("SELECT subject FROM outbox WHERE kind = 'email_verification'").single()
                .decode("subject", as: String.self)
            let code = try #require(subject.split(separator: " ").last.map(String.init))
            try await admin.query("UPDATE email_codes SET expires_at = now() - interval '1 second'")
            let late = try await lender.send(
                .post, "/v1/me/email-verification/confirm", body: API.VerificationCodeBody(code: code), token: ada.token)
            #expect(late.status == .gone && late.code == "code_expired", "\(late)")
            #expect(try await lender.send(.get, "/v1/me", token: ada.token).json["emailVerified"] as? Bool == false)
        }
    }

    @Test func aPasswordChangeNeedsTheCurrentOneAndRevokesTheOtherSessions() async throws {
        try await withServerDatabase { database, _ in
            let smtp = try await SMTPServer()
            defer { smtp.stop() }
            let lender = try await server(database, smtp)
            defer { lender.kill(SIGTERM) }
            let ada = try await lender.user("ada")
            let other = try #require(
                try await lender.send(.post, "/v1/sessions", body: API.LoginBody(handle: "ada", password: "correct horse battery"))
                    .json["token"] as? String)
            let wrong = try await lender.send(
                .put, "/v1/me/password",
                body: API.PasswordChangeBody(currentPassword: "not it at all", newPassword: "a brand new password"), token: ada.token)
            #expect(wrong.status == .forbidden, "\(wrong)")
            #expect(wrong.code == "wrong_password")
            let changed = try await lender.send(
                .put, "/v1/me/password",
                body: API.PasswordChangeBody(currentPassword: "correct horse battery", newPassword: "a brand new password"),
                token: ada.token)
            #expect(changed.status == .noContent, "\(changed)")
            #expect(try await lender.send(.get, "/v1/me", token: ada.token).status == .ok, "this session stays")
            #expect(try await lender.send(.get, "/v1/me", token: other).status == .unauthorized, "the other one is revoked")
        }
    }

    @Test func manyResetsMailFiveAnHourAndManyAddressesFromOneClientAre429() async throws {
        try await withServerDatabase { database, admin in
            let smtp = try await SMTPServer()
            defer { smtp.stop() }
            let lender = try await server(database, smtp)
            defer { lender.kill(SIGTERM) }
            _ = try await lender.user("ada")
            for _ in 0..<30 {
                let asked = try await lender.send(.post, "/v1/password-resets", body: API.PasswordResetBody(email: "ada@example.org"))
                #expect(asked.status == .accepted)
            }
            try await Task.sleep(for: .seconds(2))
            #expect(try await count(admin, "SELECT count(*) FROM outbox WHERE kind = 'password_reset'") == 5)
            // Addresses tried one after another from one client: past 20, refused.
            var statuses = [Int]()
            for index in 0..<25 {
                statuses.append(
                    Int(
                        try await lender.send(
                            .post, "/v1/password-resets", body: API.PasswordResetBody(email: "someone\(index)@example.org")
                        ).status.code))
            }
            #expect(statuses.filter { $0 == 429 }.count == 6, "\(statuses)")  // ada's address was the first of 20
        }
    }

    @Test func aResetTokenExpiresAfterAnHourAndDiesWithAPasswordChange() async throws {
        try await withServerDatabase { database, admin in
            let smtp = try await SMTPServer()
            defer { smtp.stop() }
            let lender = try await server(database, smtp)
            defer { lender.kill(SIGTERM) }
            let ada = try await lender.user("ada")
            for _ in 0..<2 {
                let asked = try await lender.send(.post, "/v1/password-resets", body: API.PasswordResetBody(email: "ada@example.org"))
                #expect(asked.status == .accepted)
            }
            let mails = try await smtp.waitForMessages(2)
            let tokens = mails.compactMap(token)
            #expect(tokens.count == 2)
            // The first an hour old: expired.
            try await admin.query("UPDATE password_resets SET expires_at = now() - interval '1 second' WHERE created_at = (SELECT min(created_at) FROM password_resets)")
            let old = try await lender.send(
                .post, "/v1/password-resets/confirm",
                body: API.PasswordResetConfirmBody(token: tokens[0], password: "a brand new password"))
            #expect(old.status == .gone)
            #expect(old.code == "token_expired")
            // The second dies with a change of password made meanwhile.
            let changed = try await lender.send(
                .put, "/v1/me/password",
                body: API.PasswordChangeBody(currentPassword: "correct horse battery", newPassword: "changed meanwhile"), token: ada.token)
            #expect(changed.status == .noContent)
            let late = try await lender.send(
                .post, "/v1/password-resets/confirm",
                body: API.PasswordResetConfirmBody(token: tokens[1], password: "a brand new password"))
            #expect(late.code == "token_invalid", "\(late)")
        }
    }

    @Test func withRequireVerifiedEmailPostingAndBiddingWaitForTheCode() async throws {
        try await withServerDatabase { database, admin in
            let lender = try await ServerProcess(database: database, environment: ["REQUIRE_VERIFIED_EMAIL": "on"])
            defer { lender.kill(SIGTERM) }
            let ada = try await lender.user("ada")
            let rental = API.RentalBody(
                title: "Drill", category: .tools, dailyPriceCents: 1500, location: API.LocationInput(lat: 27.7, lng: 85.3))
            let refused = try await lender.send(.post, "/v1/rentals", body: rental, token: ada.token)
            #expect(refused.status == .forbidden, "\(refused)")
            #expect(refused.code == "email_unverified")
            // The code, as the mail waiting in the outbox says it (no SMTP here).
            #expect(try await lender.send(.post, "/v1/me/email-verification", token: ada.token).status == .accepted)
            let subject = try await admin.query("SELECT subject FROM outbox").single().decode(0, as: String.self)
            let code = String(subject.suffix(6))
            let confirmed = try await lender.send(
                .post, "/v1/me/email-verification/confirm", body: API.VerificationCodeBody(code: code), token: ada.token)
            #expect(confirmed.status == .ok)
            let posted = try await lender.send(.post, "/v1/rentals", body: rental, token: ada.token)
            #expect(posted.status == .created, "\(posted)")
        }
    }

    @Test func sixWrongCodesSpendTheCode() async throws {
        try await withServerDatabase { database, _ in
            let lender = try await ServerProcess(database: database)
            defer { lender.kill(SIGTERM) }
            let ada = try await lender.user("ada")
            let unasked = try await lender.send(
                .post, "/v1/me/email-verification/confirm", body: API.VerificationCodeBody(code: "123456"), token: ada.token)
            #expect(unasked.code == "code_expired", "no code asked for")
            #expect(try await lender.send(.post, "/v1/me/email-verification", token: ada.token).status == .accepted)
            var codes = [String]()
            for guess in 0..<6 {
                // Not one of them the code, which would need a one-in-a-million guess.
                let reply = try await lender.send(
                    .post, "/v1/me/email-verification/confirm", body: API.VerificationCodeBody(code: "wrong\(guess)"), token: ada.token)
                codes.append(reply.code ?? "\(reply.status)")
            }
            #expect(codes == Array(repeating: "wrong_code", count: 5) + ["too_many_wrong_codes"], "\(codes)")
            // A new code each time is five guesses more: at most five codes an hour, even at once.
            let asked = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask { Int(try await lender.send(.post, "/v1/me/email-verification", token: ada.token).status.code) }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(asked.filter { $0 == 202 }.count == 4 && asked.filter { $0 == 429 }.count == 4, "\(asked.sorted())")
        }
    }

    @Test func mailWaitsWhileTheSMTPServerIsDownAndArrivesOnceInOrderAfter() async throws {
        try await withServerDatabase { database, admin in
            let smtp = try await SMTPServer()
            let port = smtp.port
            let lender = try await server(database, smtp)
            defer { lender.kill(SIGTERM) }
            let ada = try await lender.user("ada")
            let bob = try await lender.user("bob")
            smtp.stop()
            // Two mails to each while it is down.
            for token in [ada.token, bob.token, ada.token, bob.token] {
                #expect(try await lender.send(.post, "/v1/me/email-verification", token: token).status == .accepted)
            }
            try await Task.sleep(for: .seconds(3))
            #expect(try await count(admin, "SELECT count(*) FROM outbox WHERE sent_at IS NULL AND attempts > 0") >= 1, "tried, and failed")
            let back = try await SMTPServer(port: port)
            defer { back.stop() }
            let received = try await back.waitForMessages(4, timeout: .seconds(40))
            #expect(received.count == 4, "each once: \(received.count)")
            let ids = received.compactMap { $0.mailHeader("Message-ID") }
            #expect(Set(ids).count == 4)
            // In order per person: each one's second code came after the first.
            for address in ["ada@example.org", "bob@example.org"] {
                let theirs = received.filter { $0.mailHeader("To") == address }.compactMap { $0.mailHeader("Message-ID") }
                let numbers = theirs.compactMap { Int($0.dropFirst("<outbox-".count).prefix { $0.isNumber }) }
                #expect(numbers == numbers.sorted() && numbers.count == 2, "\(address): \(theirs)")
            }
        }
    }

    @Test func twoServersSendEachMailOnceAndSayHowManyWait() async throws {
        try await withServerDatabase { database, admin in
            let smtp = try await SMTPServer()
            defer { smtp.stop() }
            // Mail queued while no server sends (no SMTP_URL), then two that do, at once.
            let quiet = try await ServerProcess(database: database)
            var tokens = [String]()
            for index in 0..<12 { tokens.append(try await quiet.user("user\(index)").token) }
            for token in tokens { #expect(try await quiet.send(.post, "/v1/me/email-verification", token: token).status == .accepted) }
            try await Task.sleep(for: .milliseconds(1500))  // a round of the sender's gauges
            let waiting = try await quiet.send(.get, "/metrics")
            quiet.kill(SIGTERM)
            _ = await quiet.waitForExit()
            // Without SMTP_URL mail waits, and the gauges say so.
            #expect(String(decoding: waiting.data, as: UTF8.self).contains("lender_outbox_pending 12"), "\(waiting.text.split(separator: "\n").filter { $0.contains("outbox") })")
            #expect(try await count(admin, "SELECT count(*) FROM outbox WHERE sent_at IS NULL") == 12)
            let first = try await server(database, smtp)
            let second = try await server(database, smtp)
            defer { first.kill(SIGTERM); second.kill(SIGTERM) }
            let received = try await smtp.waitForMessages(12)
            try await Task.sleep(for: .seconds(2))  // time for a second copy, were there one
            let ids = smtp.messages().compactMap { $0.mailHeader("Message-ID") }
            #expect(ids.count == 12 && Set(ids).count == 12, "\(received.count) received: \(ids)")
            #expect(try await count(admin, "SELECT count(*) FROM outbox WHERE sent_at IS NULL") == 0)
            // Each server says what waits; one or the other counted the deliveries.
            let metrics = [
                String(decoding: try await first.send(.get, "/metrics").data, as: UTF8.self),
                String(decoding: try await second.send(.get, "/metrics").data, as: UTF8.self),
            ]
            #expect(metrics.allSatisfy { $0.contains("lender_outbox_pending 0") }, "\(metrics.map { $0.split(separator: "\n").filter { $0.contains("outbox") } })")
            #expect(metrics.contains { $0.contains("lender_outbox_deliveries_total{outcome=\"sent\"}") })
        }
    }

    @Test func forgettingAUserDeletesTheirMail() async throws {
        try await withServerDatabase { database, admin in
            let lender = try await ServerProcess(database: database)  // no SMTP: mail waits
            defer { lender.kill(SIGTERM) }
            let ada = try await lender.user("ada")
            #expect(try await lender.send(.post, "/v1/me/email-verification", token: ada.token).status == .accepted)
            let asked = try await lender.send(.post, "/v1/password-resets", body: API.PasswordResetBody(email: "ada@example.org"))
            #expect(asked.status == .accepted)
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await count(admin, "SELECT count(*) FROM outbox") == 2)
            let closed = try await lender.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: ada.token)
            #expect(closed.status == .noContent, "\(closed)")
            #expect(try await count(admin, "SELECT count(*) FROM outbox") == 0)
            #expect(try await count(admin, "SELECT count(*) FROM password_resets") == 0)
            #expect(try await count(admin, "SELECT count(*) FROM email_codes") == 0)
        }
    }
}

/// What can go wrong with a mail before any server sees it, and what never may.
@Suite("Mail messages")
struct MailMessageTests {
    @Test func noHeaderValueCarriesALineBreak() {
        let message = MailMessage(
            from: "Lender <no-reply@lender.test>", to: "ada@example.org\r\nBcc: eve@example.org",
            subject: "Hi\r\nBcc: eve@example.org\nX-Injected: yes", text: "Body\r\n.\r\nRSET", html: "<p>Body</p>",
            messageID: "<outbox-1@lender.test>\r\nX-Evil: 1")
        let lines = message.rfc5322.components(separatedBy: "\r\n")
        #expect(!lines.contains { $0.hasPrefix("Bcc:") || $0.hasPrefix("X-Injected:") || $0.hasPrefix("X-Evil:") }, "\(lines)")
        // The body is base64: no line of it can end the message (a lone `.`) or be a command.
        #expect(!lines.contains("."))
        #expect(!lines.contains("RSET"))
        #expect(MailMessage.address("Ada <ada@example.org>") == "ada@example.org")
    }

    @Test func aSubjectOutsideASCIIIsAnEncodedWord() {
        let message = MailMessage(from: "a@b.c", to: "d@e.f", subject: "Réservation confirmée", text: "x", messageID: "<1@b.c>")
        let subject = message.rfc5322.components(separatedBy: "\r\n").first { $0.hasPrefix("Subject: ") }
        #expect(subject == "Subject: =?UTF-8?B?\(Data("Réservation confirmée".utf8).base64EncodedString())?=")
    }

    @Test func theTemplatesAreFilesRenderedWithTheirValues() {
        let words = MailTemplates.bundled.render("password_reset", ["handle": "ada", "link": "https://x/?a=1&b=2", "token": "t"])
        #expect(words.subject == "Reset your Lender password")
        #expect(words.text.contains("https://x/?a=1&b=2"), "text is not escaped")
        #expect(words.html.contains("https://x/?a=1&amp;b=2"), "HTML is")
    }
}

extension String {
    func leftPadded(to length: Int) -> String { String(repeating: "0", count: max(0, length - count)) + self }
}
