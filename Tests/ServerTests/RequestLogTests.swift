import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LineLog
import Logging
import Server
import ServerTestSupport
import Synchronization
import Testing

@Suite("Request ids and the request log")
struct RequestLogTests {
    @Test func everyResponseCarriesARequestIdAndEveryRequestOneLogLine() async throws {
        let lines = LogCapture()
        var logger = Logger(label: "lender.capture") { _ in lines }
        logger.logLevel = .info
        try await withServer(logger: logger) { client, _ in
            let ada = try await client.user("ada")
            let given = try await client.execute(
                uri: "/v1/me", method: .get, headers: [.authorization: "Bearer \(ada.token)", HTTPField.Name("X-Request-ID")!: "trace-abc-123"]
            ) { $0 }
            #expect(given.status == .ok)
            #expect(given.headers[HTTPField.Name("X-Request-ID")!] == "trace-abc-123")

            // Errors too, with a fresh id when none (or a silly one) is given.
            let refused = try await client.execute(
                uri: "/v1/me", method: .get, headers: [HTTPField.Name("X-Request-ID")!: String(repeating: "x", count: 500)]
            ) { $0 }
            #expect(refused.status == .unauthorized)
            let fresh = try #require(refused.headers[HTTPField.Name("X-Request-ID")!])
            #expect(UUID(uuidString: fresh) != nil)
            let missing = try await client.execute(uri: "/v1/nowhere", method: .get) { $0 }
            #expect(missing.status == .notFound)
            #expect(missing.headers[HTTPField.Name("X-Request-ID")!] != nil)

            let log = lines.text.split(separator: "\n")
            let mine = log.filter { $0.contains("trace-abc-123") }
            #expect(mine.count == 1, "\(mine)")
            #expect(mine.first?.contains("\"route\": /v1/me") == true, "\(mine)")
            #expect(mine.first?.contains("200") == true)
            #expect(mine.first?.contains("duration_ms") == true)
            #expect(log.contains { $0.contains(fresh) && $0.contains("401") })
            #expect(!lines.text.contains(ada.token), "no token is ever logged")
        }
    }

    /// The server's handler sets metadata as swift-log's stream handler would write it, only later:
    /// the lines are the same, key for key, with a line's own metadata over the logger's.
    @Test func lineLogHandlerWritesTheStreamHandlersLines() {
        let streamed = Lines(), ours = Lines()
        var plain = Logger(label: "lender.t") { StreamLogHandler(label: $0, stream: streamed) }
        var lined = Logger(label: "lender.t") { LineLogHandler(StreamLogHandler(label: $0, stream: ours)) }
        for index in [0, 1] {
            var logger = index == 0 ? plain : lined
            logger.logLevel = .info
            logger[metadataKey: "request_id"] = "r-1"
            logger[metadataKey: "b"] = "2"
            logger.debug("not written")
            logger.info("written", metadata: ["b": "3", "c": "4"])
            logger[metadataKey: "b"] = nil
            logger.warning("again")
            if index == 0 { plain = logger } else { lined = logger }
        }
        // Timestamps to the second may differ between the two: compare what follows them.
        let strip = { (text: String) in text.split(separator: "\n").map { $0.split(separator: " ", maxSplits: 1).last.map(String.init) ?? "" } }
        #expect(strip(ours.text) == strip(streamed.text))
        #expect(strip(ours.text) == ["info lender.t: b=3 c=4 request_id=r-1 [ServerTests] written", "warning lender.t: request_id=r-1 [ServerTests] again"])
        #expect(lined[metadataKey: "request_id"] == "r-1" && lined[metadataKey: "b"] == nil)
    }
}

/// A stream that keeps what is written to it.
private final class Lines: TextOutputStream, Sendable {
    private let written = Mutex("")
    var text: String { written.withLock { $0 } }
    func write(_ string: String) { written.withLock { $0 += string } }
}

