import ArgumentParser
import EventStore
import Foundation
import Logging
import Postgres

/// Load generators for scripts/bench. Each prints one JSON object of figures on stdout.
@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lender-bench",
        abstract: "Measures Lender's pieces for scripts/bench (which also measures the raw baselines).",
        subcommands: [Append.self, ReplayBench.self, HTTPBench.self, ItemsLoad.self]
    )
}

struct Append: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Concurrent writers append one event each to a new stream, as fast as they can.")

    @Option(name: .customLong("database-url")) var databaseURL: String
    @Option var writers = 16
    @Option var seconds = 10.0
    @Option var poolSize = 4
    @Option(help: "Append batches in flight at once (EventStore's maxBatchesInFlight).") var batchesInFlight = 1

    func run() async throws {
        var logger = Logger(label: "lender-bench")
        logger.logLevel = .warning
        let configuration = try PostgresConfiguration(databaseURL)
        let figures = try await PostgresPool.with(
            configuration: configuration, options: .init(size: poolSize), logger: logger
        ) { pool in
            let store = EventStore(pool: pool, logger: logger, maxBatchesInFlight: batchesInFlight)
            let run = UUID().uuidString.prefix(8).lowercased()
            // Warm up: open the pool's connections and the function's plan.
            for index in 0..<poolSize {
                try await store.append(to: StreamID("warm-\(run)", index), expectedVersion: .noStream, events: [Self.event])
            }
            let clock = ContinuousClock()
            let deadline = clock.now + .seconds(seconds)
            let started = clock.now
            let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        var latencies = [Double]()
                        var index = 0
                        while clock.now < deadline {
                            let begin = clock.now
                            try await store.append(
                                to: StreamID("bench-\(run)-\(writer)", index), expectedVersion: .noStream, events: [Self.event])
                            latencies.append((clock.now - begin).milliseconds)
                            index += 1
                        }
                        return latencies
                    }
                }
                return try await group.reduce(into: [Double]()) { $0 += $1 }.sorted()
            }
            let elapsed = (clock.now - started).milliseconds / 1000
            return Figures(
                writers: writers, appends: latencies.count, seconds: elapsed,
                throughput: Double(latencies.count) / elapsed,
                p50Ms: latencies.percentile(0.50), p90Ms: latencies.percentile(0.90), p99Ms: latencies.percentile(0.99))
        }
        try printFigures(figures)
    }

    static let event = NewEvent(type: "BenchEvent", data: JSONB(text: #"{"n": 1, "title": "a small event body"}"#))
}

/// One JSON object on stdout, keys sorted: what scripts/bench reads of every measurement.
func printFigures(_ figures: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    print(String(decoding: try encoder.encode(figures), as: UTF8.self))
}

struct Figures: Codable {
    var writers: Int
    var appends: Int
    var seconds: Double
    var throughput: Double
    var p50Ms: Double
    var p90Ms: Double
    var p99Ms: Double
}

extension Duration {
    var milliseconds: Double {
        Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
    }
}

extension [Double] {
    /// The value below which `fraction` of the sorted values fall.
    func percentile(_ fraction: Double) -> Double {
        guard !isEmpty else { return 0 }
        return self[Swift.min(count - 1, Int(Double(count) * fraction))]
    }
}
