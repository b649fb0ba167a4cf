import ArgumentParser
import EventStore
import Foundation
import Postgres
import Projections
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rebuild the views from the log, while the server keeps serving.",
        discussion: """
            With no option: rebuilds every view (or one, with --projection) into new tables, \
            catches up with what was appended meanwhile, and swaps them in atomically.
            --verify: rebuilds aside and compares with the live views row by row; exit 1 on any difference.
            --until POSITION|TIME --into SCHEMA: builds the views as they stood then into SCHEMA, for psql.
            """)

    @OptionGroup var database: DatabaseOptions

    @Option(help: "Only the views rebuilt with this projection: users, items, bookings or feed (one group), loans, carts, payouts, reports or suspensions.")
    var projection: String?

    @Flag(help: "Rebuild aside and compare with the live views; print every difference; exit 1 if any.")
    var verify = false

    @Option(help: "Build the views as they stood at this log position, or at this time (RFC 3339). Needs --into.")
    var until: String?

    @Option(help: "The schema to build into with --until; it must not exist.")
    var into: String?

    func validate() throws {
        if until != nil, into == nil { throw ValidationError("--until needs --into SCHEMA.") }
        if into != nil, until == nil { throw ValidationError("--into goes with --until.") }
        if verify, until != nil { throw ValidationError("--verify and --until are separate runs.") }
    }

    func run() async throws {
        let logger = Logs.bootstrap()
        let groups = try ViewGroup.named(projection)
        // As the owner: a rebuild creates and moves tables.
        try await database.withPool(size: 3, logger: logger) {
            pool in
            let rebuilder = ViewRebuilder(
                pool: pool, groups: groups, logger: logger, personalData: try DataKeyOptions.personalData(pool: pool))
            let progress = Progress()
            if let until, let into {
                let position = try await self.position(of: until, pool)
                try await rebuilder.createSchema(into)
                let built: Int64
                do {
                    built = try await rebuilder.build(into, after: 0, until: position, progress: progress.report)
                } catch {
                    // Half built, and without the keys a build makes at its end: of no use to look at.
                    try? await rebuilder.dropSchema(into)
                    throw error
                }
                progress.finish()
                print("Built the views as they stood at position \(built) into schema \(into).")
                print("Look with psql: SET search_path TO \(into), public;")
                return
            }
            let schema = ViewRebuilder.temporarySchema()
            try await rebuilder.createSchema(schema)
            do {
                // The long build; the swap and the comparison catch up with what was appended meanwhile.
                let built = try await rebuilder.build(schema, after: 0, progress: progress.report)
                progress.finish()
                if verify {
                    let (position, differences) = try await rebuilder.compare(schema, builtTo: built)
                    try await rebuilder.dropSchema(schema)
                    for difference in differences { print(difference) }
                    if differences.isEmpty {
                        print("no differences: the views hold what the log says, at position \(position)")
                    } else {
                        print("\(differences.count) differences at position \(position)")
                        throw ExitCode(1)
                    }
                } else {
                    let position = try await rebuilder.swapIn(schema, builtTo: built)
                    print("Rebuilt \(groups.flatMap(\.tables).joined(separator: ", ")) from the log, at position \(position).")
                }
            } catch {
                try? await rebuilder.dropSchema(schema)
                throw error
            }
        }
    }

    /// A position as given, or the last position recorded at or before a time.
    func position(of text: String, _ pool: PostgresPool) async throws -> Int64 {
        if let position = Int64(text), position >= 0 { return position }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        guard let time = formatter.date(from: text) ?? ISO8601DateFormatter().date(from: text) else {
            throw ValidationError("--until takes a log position or an RFC 3339 time, not \(text).")
        }
        return try await pool.query("SELECT coalesce(max(position), 0) AS p FROM events WHERE recorded_at <= \(time)")
            .single().decode("p", as: Int64.self)
    }
}

/// Progress on standard error: a bar redrawn in place on a terminal, a line every few
/// seconds otherwise (for logs).
final class Progress: Sendable {
    private let start = Date()
    private let terminal = isatty(STDERR_FILENO) != 0
    /// Behind a lock: the rebuild's progress closure is `@Sendable`, called from its tasks' threads.
    private let state = Mutex(State())

    private struct State {
        var lastLine = Date.distantPast
        var drew = false
    }

    func report(_ done: Int64, _ target: Int64) {
        state.withLock { state in
            let elapsed = max(Date().timeIntervalSince(start), 0.001)
            let rate = Double(done) / elapsed
            let left = rate > 0 ? Double(target - done) / rate : 0
            let fraction = target > 0 ? Double(done) / Double(target) : 1
            if terminal {
                let width = 30
                let filled = Int(fraction * Double(width))
                let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
                FileHandle.standardError.write(
                    Data(String(format: "\r[%@] %3.0f%% %lld/%lld events, %.0f events/s, %.0fs left ", bar, fraction * 100, done, target, rate, left).utf8))
                state.drew = true
            } else if Date().timeIntervalSince(state.lastLine) >= 2 || done == target {
                state.lastLine = Date()
                FileHandle.standardError.write(
                    Data(String(format: "replay: %lld/%lld events (%.0f%%), %.0f events/s, %.0fs left\n", done, target, fraction * 100, rate, left).utf8))
            }
        }
    }

    func finish() {
        state.withLock { state in
            if state.drew { FileHandle.standardError.write(Data("\n".utf8)) }
        }
    }
}
