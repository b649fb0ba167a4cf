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
            abstract: "Send what is due once, to SMTP_URL, as `lender serve` does every second; print what was done.")

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let logger = Logs.bootstrap()
            let environment = ProcessInfo.processInfo.environment
            guard let delivery = try Serve.delivery(environment) else {
                throw ValidationError("SMTP_URL is not set: there is nowhere to send to.")
            }
            let settings = Serve.mailSettings(environment, port: Int(environment["PORT"] ?? "8080") ?? 8080)
            var total = Outbox.Round()
            try await database.withPool(logger: logger) { pool in
                let outbox = Outbox(pool: pool, settings: settings, logger: logger)
                var round = try await outbox.sendDue(with: delivery.mailer)
                while round.sent + round.failed > 0 {
                    total.sent += round.sent
                    total.failed += round.failed
                    total.givenUp += round.givenUp
                    // A failed row waits for its backoff: the next round does not take it again.
                    round = try await outbox.sendDue(with: delivery.mailer)
                }
            }
            print("outbox: \(total.sent) sent, \(total.failed) failed (\(total.givenUp) given up)")
        }
    }
}
