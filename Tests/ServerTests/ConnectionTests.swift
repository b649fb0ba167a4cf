import Foundation
import ServerTestSupport
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Runs blocking work on a thread of its own, not one of the concurrency pool's few.
func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}

@Suite("Connections that hold the server")
struct ConnectionTests {
    /// A client that sends half a request head and waits (slowloris) is closed once the
    /// head's time is up (10 s by default), and never answered.
    @Test func aConnectionTricklingItsHeadIsClosedWithinFifteenSeconds() async throws {
        try await withServerDatabase { database, _ in
            let server = try await ServerProcess(database: database)
            defer { server.kill(SIGTERM) }
            let connection = try RawConnection(port: server.port)
            connection.send("GET /health/live HTTP/1.1\r\nHost: localhost\r\n")
            let clock = ContinuousClock()
            let started = clock.now
            let (text, closed) = await onThread { connection.read(within: .seconds(15)) }
            #expect(closed, "still open after 15 s")
            #expect(clock.now - started >= .seconds(9), "closed before its head's time was up")
            #expect(text.isEmpty)
        }
    }

    @Test func keepAliveOutlivesTheHeadTimeoutAndAnAddressHoldsOnlySoMany() async throws {
        try await withServerDatabase { database, _ in
            let server = try await ServerProcess(
                database: database, environment: ["HTTP_HEADER_TIMEOUT": "1", "HTTP_MAX_CONNECTIONS_PER_ADDRESS": "4"])
            defer { server.kill(SIGTERM) }
            // Two requests on one connection, with more than the head's timeout between them.
            let kept = try RawConnection(port: server.port)
            kept.send("GET /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n")
            let first = await onThread { kept.read(within: .seconds(5)) { $0.contains("\"live\"}") } }
            #expect(first.text.hasPrefix("HTTP/1.1 200"), "\(first.text)")
            try await Task.sleep(for: .seconds(2))
            kept.send("GET /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n")
            let second = await onThread { kept.read(within: .seconds(5)) { $0.contains("\"live\"}") } }
            #expect(second.text.hasPrefix("HTTP/1.1 200"), "the idle connection was closed: \(second)")

            // Ten more from the same address: past four at once, closed at the door.
            let crowd = try (0..<10).map { _ in try RawConnection(port: server.port) }
            let closedAtOnce = await onThread {
                crowd.filter { $0.read(within: .milliseconds(300)).closed }.count
            }
            #expect(closedAtOnce >= 7, "\(closedAtOnce) of 10 closed at once")
            // A half-sent head on one of those let in is closed after its second, too.
            let slow = await onThread { crowd.map { $0.read(within: .seconds(3)).closed }.allSatisfy { $0 } }
            #expect(slow, "a silent connection outlived the head timeout")
            // Once they are gone, the address is served again.
            try await Task.sleep(for: .milliseconds(200))
            let again = try RawConnection(port: server.port)
            again.send("GET /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n")
            let answered = await onThread { again.read(within: .seconds(5)) { $0.contains("\"live\"}") } }
            #expect(answered.text.hasPrefix("HTTP/1.1 200"), "\(answered)")
        }
    }
}
