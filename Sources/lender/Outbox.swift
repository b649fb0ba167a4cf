import ArgumentParser
import Foundation
import Mail
import Postgres
import UseCases

struct OutboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox", abstract: "The mail waiting to be sent (SPEC §12.4).", subcommands: [Send.self])

    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Fan new notices out, then send what is due once (mail to SMTP_URL, pushes to the sandbox), as `lender serve` does every second; print what was done.")

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let logger = Logs.bootstrap()
            let environment = ProcessInfo.processInfo.environment
            let delivery = try Serve.delivery(environment)
            guard delivery.mailer != nil else {
                throw ValidationError("SMTP_URL is not set: there is nowhere to send to.")
            }
            var settings = Serve.mailSettings(environment, port: Int(environment["PORT"] ?? "8080") ?? 8080)
            // The unsubscribe links are signed with the server's secret, as `lender serve` signs them.
            settings.unsubscribe = UnsubscribeTokens(
                key: try Serve.paymentsSetup(environment).fingerprinter.derivedKey(for: "mail-unsubscribe"))
            let (notices, total) = try await database.withPool(logger: logger) { pool -> (Int, Outbox.Round) in
                var total = Outbox.Round()
                var notices = 0
                let notifier = Notifier(pool: pool, mail: settings)
                while case let read = try await notifier.fanOut(), read > 0 { notices += read }
                var outbox = Outbox(pool: pool, settings: settings, logger: logger)
                outbox.backoffSeconds = delivery.retrySeconds  // OUTBOX_RETRY_SECONDS, as the server's
                let pusher = SandboxPush(pool: pool)
                var round = try await outbox.sendDue(mailer: delivery.mailer, pusher: pusher)
                while round.sent + round.failed > 0 {
                    total.sent += round.sent
                    total.failed += round.failed
                    total.givenUp += round.givenUp
                    // A failed row waits for its backoff: the next round does not take it again.
                    round = try await outbox.sendDue(mailer: delivery.mailer, pusher: pusher)
                }
                return (notices, total)
            }
            print("outbox: \(notices) notices fanned out; \(total.sent) sent, \(total.failed) failed (\(total.givenUp) given up)")
        }
    }
}
