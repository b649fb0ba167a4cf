import ArgumentParser
import Foundation
import Postgres
import UseCases

struct MediaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "media", abstract: "Look after the stored photos.", subcommands: [CollectGarbage.self])

    struct CollectGarbage: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "gc",
            abstract: "Delete the photos no item, loan or profile shows any more (removed, replaced, or never named by an event).")

        @OptionGroup var database: DatabaseOptions

        @Option(help: "Only photos stored this many seconds ago or more (default 3600): a younger one may be an upload whose event is on its way.")
        var olderThan: Int = 3600

        func run() async throws {
            guard olderThan >= 0 else { throw ValidationError("--older-than takes a number of seconds, 0 or more.") }
            let logger = Logs.bootstrap()
            try await database.withPool(logger: logger) { pool in
                let deleted = try await PhotoLibrary.collectGarbage(pool, grace: .seconds(olderThan))
                print("\(deleted) unused photos deleted")
            }
        }
    }
}
