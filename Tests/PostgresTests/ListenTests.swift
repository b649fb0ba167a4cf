import Foundation
import Postgres
import Testing
import TestSupport

@Suite("LISTEN/NOTIFY")
struct ListenTests {
    @Test func aListenerReceivesANotifySentFromAnotherConnection() async throws {
        try await TestDatabase.withEmpty { configuration in
            let listener = PostgresListener(
                configuration: configuration, channels: ["lender events"], logger: TestDatabase.logger)
            var events = listener.events().makeAsyncIterator()
            #expect(await events.next() == .listening)
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                try await pool.query("SELECT pg_notify(\("lender events"), \("position 42"))")
                try await pool.query("SELECT pg_notify(\("another channel"), \("not for us"))")
                try await pool.query("SELECT pg_notify(\("lender events"), \("position 43"))")
            }
            guard case .notification(let first) = await events.next(),
                case .notification(let second) = await events.next()
            else {
                Issue.record("expected two notifications")
                return
            }
            #expect(first.channel == "lender events")
            #expect(first.payload == "position 42")
            #expect(second.payload == "position 43")
        }
    }
}
