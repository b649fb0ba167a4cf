import ArgumentParser
import Foundation
import Media
import Postgres
import UseCases

struct MediaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "media", abstract: "Look after the stored photos.", subcommands: [CollectGarbage.self, Decode.self])

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

    /// The server's image decoder (`ImageWorker`): an upload on stdin, the processed image or
    /// the refusal on stdout. Run by `lender serve` under a CPU budget, never by hand.
    struct Decode: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "decode", abstract: "Decode one upload from stdin (the server runs this).", shouldDisplay: false)

        func run() throws {
            var input: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65536)
            while input.count <= Images.maxBytes {
                let count = read(0, &chunk, chunk.count)
                if count <= 0 { break }
                input.append(contentsOf: chunk[..<count])
            }
            let result: Result<ProcessedImage, ImageError>
            do { result = .success(try Images.process(input)) } catch { result = .failure(error) }
            let wire = ImageWorker.Wire.write(result)
            var written = 0
            while written < wire.count {
                let count = wire[written...].withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
                guard count > 0 else { throw ExitCode(1) }
                written += count
            }
        }
    }
}
