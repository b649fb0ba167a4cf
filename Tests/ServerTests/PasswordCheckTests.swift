import EventStore
import Foundation
import HTTPTypes
import HummingbirdBcrypt
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import Server
import ServerTestSupport
import Testing
import TestSupport
@testable import UseCases

@Suite("Password checks are queued within bounds and read the whole password")
struct PasswordCheckTests {
    /// Past what it runs and what may wait, a password check is refused at once (503), so a
    /// flood of registrations cannot make every login wait behind it.
    @Test func theBcryptQueueIsBoundedAndRefusesWithRetryAfter() async throws {
        let passwords = PasswordHasher(cost: 10, concurrent: 1, waiting: 2)
        let outcomes = await withTaskGroup(of: Int.self) { group in
            for index in 0..<12 {
                group.addTask {
                    do {
                        _ = try await passwords.hash("password number \(index)")
                        return 200
                    } catch let refused as TryLater {
                        #expect(refused.retryAfterSeconds > 0)
                        return refused.reason == .busy ? 503 : 429
                    } catch {
                        return 500
                    }
                }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == 200 }.count <= 3 + 2, "\(outcomes)")
        #expect(outcomes.filter { $0 == 503 }.count >= 7, "\(outcomes)")
        #expect(!outcomes.contains(500))
    }

    /// A flood of registrations fills its own queue, not the logins': a check waits for at
    /// most the hash running, never refused for them, and goes before the hashes waiting.
    @Test func aRegistrationFloodNeverRefusesALogin() async throws {
        let passwords = PasswordHasher(cost: 10, concurrent: 1, waiting: 2)
        let stored = try await passwords.hash("the user's own password")
        let outcomes = await withTaskGroup(of: String.self) { group in
            for index in 0..<12 {
                group.addTask {
                    do {
                        _ = try await passwords.hash("flood \(index)")
                        return "hashed"
                    } catch { return "refused" }
                }
            }
            // The flood is in: running and queued, the rest refused.
            try? await Task.sleep(for: .milliseconds(20))
            for _ in 0..<2 {
                group.addTask {
                    do {
                        return try await passwords.verify("the user's own password", hash: stored) ? "logged in" : "wrong"
                    } catch { return "login refused" }
                }
            }
            return await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == "logged in" }.count == 2, "\(outcomes)")
        #expect(outcomes.contains("refused"), "the flood itself is bounded: \(outcomes)")
    }

    @Test func everyCharacterOfALongPasswordCountsAndOldHashesStillWork() async throws {
        let passwords = PasswordHasher(cost: 4)
        let shared = String(repeating: "a", count: 80)
        let hash = try await passwords.hash(shared + "one")
        #expect(try await passwords.verify(shared + "one", hash: hash))
        #expect(try await !passwords.verify(shared + "two", hash: hash), "bcrypt alone reads 72 bytes: these two were one")
        // A first-release hash (bcrypt of the password itself) still verifies.
        let legacy = Bcrypt.hash("correct horse battery", cost: 4)
        #expect(try await passwords.verify("correct horse battery", hash: legacy))
        #expect(try await !passwords.verify("correct horse batterz", hash: legacy))
    }
}
