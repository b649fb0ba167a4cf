import ArgumentParser

@main
struct Lender: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lender",
        abstract: "Lender: a peer-to-peer marketplace server on an append-only event log.",
        version: Lender.version,
        subcommands: [
            Serve.self, Migrate.self, Replay.self, Loans.self, JobsCommand.self, OutboxCommand.self, SearchesCommand.self, PaymentsCommand.self,
            PayoutsCommand.self, Audit.self, Users.self,
            Keys.self, MediaCommand.self,
        ]
    )
}

/// A command that could not do its work (not a misuse of its arguments): a message, exit 1.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
