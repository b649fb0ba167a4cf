import EventStore
import Foundation
import HTTPTypes
import HummingbirdTesting
import Marketplace
import Postgres
import Projections
import Server
import ServerTestSupport
import Testing
import TestSupport
@testable import UseCases

@Suite("A taken handle or email is refused cheaply, whatever its case")
struct TakenHandleAndEmailTests {
    @Test func aTakenHandleIsAnsweredWithoutHashing() async throws {
        let passwords = PasswordHasher(cost: 4)
        try await withAccounts(passwords: passwords) { accounts in
            _ = try await accounts.register(
                handle: "ada", displayName: "Ada", email: "ada@example.org", password: "correct horse battery", country: nil)
            let before = passwords.checks
            for index in 0..<10 {
                let error = await #expect(throws: DomainError.self) {
                    try await accounts.register(
                        handle: "ada", displayName: "Not Ada", email: "x\(index)@example.org", password: "some password \(index)",
                        country: nil)
                }
                #expect(error?.code == "handle_taken")
            }
            #expect(passwords.checks == before)
        }
    }

    @Test func anEmailHoldsOneAccountWhateverItsCase() async throws {
        try await withServer { client, admin in
            _ = try await client.user("ada")
            let before = try await eventCount(admin)
            let again = try await client.send(
                .post, "/v1/users",
                body: API.RegisterBody(handle: "ada2", displayName: "Ada", email: "ADA@Example.org", password: "correct horse battery"))
            #expect(again.status == .conflict)
            #expect(again.code == "email_taken")
            #expect(try await eventCount(admin) == before)
        }
    }
}
