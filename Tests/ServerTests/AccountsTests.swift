import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Postgres
import Server
import ServerTestSupport
import Testing
import TestSupport
import UseCases

@Suite("Accounts over HTTP")
struct AccountsTests {
    @Test func registerThenLogInThenLogOut() async throws {
        try await withServer { client, _ in
            let user = try await client.register("ada")
            #expect(user.handle == "ada")
            #expect(user.email == "ada@example.org")
            #expect(user.position > 0)

            let login = try await client.send(.post, "/v1/sessions", body: API.LoginBody(handle: "ada", password: "correct horse battery"))
            #expect(login.status == .created)
            let session = try login.decode(Session.self)
            #expect(session.userId == user.id)
            let token = session.token
            #expect(token.count >= 40)
            #expect(abs(session.expiresAt.timeIntervalSinceNow - 30 * 24 * 3600) < 120)

            #expect(try await client.send(.delete, "/v1/sessions/current", token: token).status == .noContent)
            // A revoked token opens nothing.
            #expect(try await client.send(.delete, "/v1/sessions/current", token: token).status == .unauthorized)
        }
    }

    @Test func passwordsAndTokensAreNeverStoredInTheClear() async throws {
        try await withServer { client, admin in
            _ = try await client.register("ada", password: "s3cret-phrase-xyz")
            let token = try await client.login("ada", password: "s3cret-phrase-xyz")
            let hash = try await admin.query("SELECT password_hash FROM credentials").single().decode("password_hash", as: String.self)
            #expect(hash.hasPrefix("$lender1$2"), "bcrypt of the pre-hash")
            let everything = try await admin.query(
                """
                SELECT (SELECT coalesce(string_agg(data::text || metadata::text, ' '), '') FROM events)
                    || (SELECT string_agg(password_hash, ' ') FROM credentials)
                    || (SELECT string_agg(encode(token_hash, 'escape'), ' ') FROM sessions) AS text
                """
            ).single().decode("text", as: String.self)
            #expect(!everything.contains("s3cret-phrase-xyz"))
            #expect(!everything.contains(token))
            let tokenHash = try await admin.query("SELECT token_hash FROM sessions").single().decode("token_hash", as: Data.self)
            #expect(tokenHash.count == 32)
        }
    }

    @Test func aTakenHandleIsAConflict() async throws {
        try await withServer { client, admin in
            _ = try await client.register("ada")
            let again = try await client.send(
                .post, "/v1/users",
                body: API.RegisterBody(handle: "ada", displayName: "Other", email: "other@example.org", password: "another password"))
            #expect(again.status == .conflict)
            #expect(again.code == "handle_taken")
            #expect(again.headers[.contentType] == "application/problem+json")
            // Nothing was written for the refused registration.
            let users = try await admin.query("SELECT count(*) AS n FROM events WHERE type = 'UserRegistered'")
                .single().decode("n", as: Int.self)
            #expect(users == 1)
        }
    }

    @Test func tenConcurrentRegistrationsOfOneHandleMakeOneUser() async throws {
        try await withServer { client, admin in
            let statuses = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String?).self) { group in
                for index in 0..<10 {
                    group.addTask {
                        let response = try await client.send(
                            .post, "/v1/users",
                            body: API.RegisterBody(
                                handle: "ada", displayName: "Ada \(index)", email: "ada\(index)@example.org",
                                password: "correct horse battery"))
                        return (response.status, response.code)
                    }
                }
                return try await group.reduce(into: [(HTTPResponse.Status, String?)]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0.0 == .created }.count == 1)
            #expect(statuses.filter { $0.0 == .conflict && $0.1 == "handle_taken" }.count == 9, "\(statuses)")
            let users = try await admin.query("SELECT count(*) AS n FROM events WHERE type = 'UserRegistered'")
                .single().decode("n", as: Int.self)
            let credentials = try await admin.query("SELECT count(*) AS n FROM credentials").single().decode("n", as: Int.self)
            #expect(users == 1)
            #expect(credentials == 1)
        }
    }

    @Test func everyInvalidOrMissingFieldIsListed() async throws {
        try await withServer { client, admin in
            let invalid = try await client.send(
                .post, "/v1/users", json: ["handle": "A!", "displayName": "x", "email": "nope", "password": "short"])
            #expect(invalid.status == .unprocessableContent)
            #expect(invalid.code == "validation_failed")
            let fields = (invalid.problem?.errors ?? []).map(\.field)
            #expect(Set(fields) == ["handle", "email", "password"])

            let missing = try await client.send(.post, "/v1/users", json: ["handle": "ada"])
            #expect(missing.status == .unprocessableContent)
            let codes = (missing.problem?.errors ?? []).map { "\($0.field):\($0.code)" }
            #expect(Set(codes) == ["displayName:required", "email:required", "password:required"])

            let head = try await admin.query("SELECT position FROM log_head").single().decode("position", as: Int.self)
            #expect(head == 0)
        }
    }

    @Test func aMalformedBodyIsA400Problem() async throws {
        try await withServer { client, _ in
            for raw in ["{not json", "[1, 2]", #"{"handle": 42}"#] {
                let response = try await client.send(.post, "/v1/users", raw: raw)
                #expect(response.status == .badRequest, "\(raw)")
                #expect(response.code == "malformed_body")
                #expect(response.headers[.contentType] == "application/problem+json")
            }
        }
    }

    @Test func aBodyOverOneMebibyteIs413() async throws {
        try await withServer { client, _ in
            let huge = #"{"handle": ""# + String(repeating: "a", count: 1_100_000) + #""}"#
            let response = try await client.send(.post, "/v1/users", raw: huge)
            #expect(response.status == .contentTooLarge)
        }
    }

    /// RFC 9110: the scheme is case-insensitive.
    @Test func theBearerSchemeIsReadInAnyCase() async throws {
        try await withServer { client, _ in
            _ = try await client.register("ada")
            let token = try await client.login("ada")
            for scheme in ["bearer", "BEARER", "Bearer", "Bearer ", "Bearer \t"] {
                let reply = try await client.execute(
                    uri: "/v1/me", method: .get, headers: [.authorization: "\(scheme) \(token)"], body: nil) { $0.status }
                #expect(reply == .ok, "\(scheme)")
            }
            let other = try await client.execute(uri: "/v1/me", method: .get, headers: [.authorization: "Basic \(token)"], body: nil) {
                $0.status
            }
            #expect(other == .unauthorized)
        }
    }

    /// Health, metrics and the public routes never look a token up: with the sessions table
    /// locked (as an outage or a long migration would leave it), a probe that sends a bearer
    /// header still gets its answer at once.
    @Test func onlyTheSignedInRoutesLookTheTokenUp() async throws {
        try await withServer { client, admin in
            try await admin.withConnection { connection in
                try await connection.query("BEGIN")
                try await connection.query("LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE")
                let done = Counter(0)
                let probe = Task {
                    var statuses = [HTTPResponse.Status]()
                    for path in ["/health/live", "/openapi.json", "/metrics"] {
                        statuses.append(
                            try await client.execute(
                                uri: path, method: .get, headers: [.authorization: "Bearer some-token"], body: nil
                            ) { $0.status })
                    }
                    done.add(1)
                    return statuses
                }
                // Polled, not awaited: a probe stuck on the lock is released only by the ROLLBACK below.
                for _ in 0..<30 where done.value == 0 { try await Task.sleep(for: .milliseconds(100)) }
                let answered = done.value == 1
                try await connection.query("ROLLBACK")
                #expect(answered, "the routes waited on the sessions table")
                #expect(try await probe.value == [.ok, .ok, .ok])
            }
        }
    }

    @Test func wrongPasswordsUnknownHandlesAndBadTokensAre401() async throws {
        try await withServer { client, admin in
            _ = try await client.register("ada")
            for (handle, password) in [("ada", "wrong password!"), ("nobody", "correct horse battery")] {
                let response = try await client.send(.post, "/v1/sessions", body: API.LoginBody(handle: handle, password: password))
                #expect(response.status == .unauthorized)
                #expect(response.code == "invalid_credentials")
            }
            #expect(try await client.send(.delete, "/v1/sessions/current").status == .unauthorized)
            #expect(try await client.send(.delete, "/v1/sessions/current", token: "made-up").status == .unauthorized)
            // An expired session is no session.
            let token = try await client.login("ada")
            try await admin.query("UPDATE sessions SET expires_at = now() - interval '1 second'")
            let expired = try await client.send(.delete, "/v1/sessions/current", token: token)
            #expect(expired.status == .unauthorized)
            #expect(expired.headers[.wwwAuthenticate] == "Bearer")
        }
    }
}
