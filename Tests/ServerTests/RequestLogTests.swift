import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import ServerTestSupport
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
}
