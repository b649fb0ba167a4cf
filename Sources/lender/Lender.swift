import ArgumentParser

@main
struct Lender: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lender",
        abstract: "Lender: a peer-to-peer marketplace server on an append-only event log.",
        subcommands: [Serve.self, Migrate.self, Audit.self, Users.self]
    )
}
