import ArgumentParser
import Foundation
import Payments
import UseCases

struct SearchesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "searches", abstract: "Saved searches (SPEC §12.7).", subcommands: [Alert.self])

    struct Alert: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Tell saved searches of the postings made since, as `lender serve` does every second; print how many events were read.")

        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let logger = Logs.bootstrap()
            let read = try await database.withGateway(logger: logger) { gateway in
                let processor = try PaymentProcessors.configured(pool: gateway.store.pool)
                let alerts = SearchAlerts(commands: ItemCommands(gateway: gateway, processor: processor))
                var read = 0
                while case let round = try await alerts.run(), round > 0 { read += round }
                return read
            }
            print("searches: \(read) events read")
        }
    }
}
