import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Postgres
import Server
import Testing
import TestSupport
@testable import UseCases

/// The card fingerprint key of every test server.
let testCardSecret = Data("lender-tests-card-fingerprint-secret".utf8)

/// The application on a migrated database of its own, as the server runs (role lender_app,
/// bcrypt at its cheapest), with a superuser pool on the side for looking behind it.
func withServer(
    logger: Logger = TestDatabase.logger, testing: TestingSetup = .router, heartbeat: Duration = .seconds(15),
    writeLimits: WriteLimits = .unlimited, allowedOrigins: Set<String> = [],
    _ test: @escaping @Sendable (any TestClientProtocol, PostgresPool) async throws -> Void
) async throws {
    try await TestDatabase.withMigrated { configuration in
        var server = configuration
        server.role = "lender_app"
        let pool = PostgresPool(configuration: server, options: .init(size: 4), logger: TestDatabase.logger)
        let migrator = try Migrator(directory: TestDatabase.migrationsDirectory, logger: TestDatabase.logger)
        let application = buildApplication(
            configuration: ServerConfiguration(host: "127.0.0.1", port: 0), pool: pool, migrator: migrator,
            logger: logger, payments: try .sandbox(secret: testCardSecret), bcryptCost: 4, heartbeat: heartbeat,
            writeLimits: writeLimits, allowedOrigins: allowedOrigins)
        let admin = try TestDatabase.adminConfiguration().database(configuration.database)
        try await TestDatabase.withPool(admin, size: 1) { adminPool in
            try await application.test(testing) { client in try await test(client, adminPool) }
        }
    }
}

extension TestClientProtocol {
    /// Sends JSON (or raw text) and hands back the status and the parsed body.
    func send(
        _ method: HTTPRequest.Method, _ uri: String, json: [String: Any]? = nil, raw: String? = nil, token: String? = nil,
        idempotencyKey: String? = nil
    ) async throws -> (status: HTTPResponse.Status, body: [String: Any], headers: HTTPFields) {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let token { headers[.authorization] = "Bearer \(token)" }
        if let idempotencyKey { headers[HTTPField.Name("Idempotency-Key")!] = idempotencyKey }
        let text = try raw ?? json.map { String(decoding: try JSONSerialization.data(withJSONObject: $0), as: UTF8.self) }
        return try await execute(uri: uri, method: method, headers: headers, body: text.map { ByteBuffer(string: $0) }) {
            response in
            let data = Data(buffer: response.body)
            let body = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
            return (response.status, body, response.headers)
        }
    }

    func register(_ handle: String, password: String = "correct horse battery") async throws -> [String: Any] {
        let response = try await send(
            .post, "/v1/users",
            json: ["handle": handle, "displayName": "User \(handle)", "email": "\(handle)@example.org", "password": password])
        #expect(response.status == .created, "\(response.body)")
        return response.body
    }

    func login(_ handle: String, password: String = "correct horse battery") async throws -> String {
        let response = try await send(.post, "/v1/sessions", json: ["handle": handle, "password": password])
        #expect(response.status == .created, "\(response.body)")
        return try #require(response.body["token"] as? String)
    }
}

@Suite("Accounts over HTTP")
struct AccountsTests {
    @Test func registerThenLogInThenLogOut() async throws {
        try await withServer { client, _ in
            let user = try await client.register("ada")
            #expect(user["handle"] as? String == "ada")
            #expect(user["email"] as? String == "ada@example.org")
            #expect((user["position"] as? Int ?? 0) > 0)
            let id = try #require(user["id"] as? String)

            let login = try await client.send(.post, "/v1/sessions", json: ["handle": "ada", "password": "correct horse battery"])
            #expect(login.status == .created)
            #expect((login.body["userId"] as? String)?.lowercased() == id.lowercased())
            let token = try #require(login.body["token"] as? String)
            #expect(token.count >= 40)
            let expires = try #require(login.body["expiresAt"] as? String)
            let expiry = try #require(ISO8601DateFormatter().date(from: expires))
            #expect(abs(expiry.timeIntervalSinceNow - 30 * 24 * 3600) < 120)

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
                json: ["handle": "ada", "displayName": "Other", "email": "other@example.org", "password": "another password"])
            #expect(again.status == .conflict)
            #expect(again.body["code"] as? String == "handle_taken")
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
                            json: ["handle": "ada", "displayName": "Ada \(index)", "email": "ada\(index)@example.org",
                                   "password": "correct horse battery"])
                        return (response.status, response.body["code"] as? String)
                    }
                }
                return try await group.reduce(into: [(HTTPResponse.Status, String?)]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0.0 == .created }.count == 1)
            #expect(statuses.filter { $0.0 == .conflict && $0.1 == "handle_taken" }.count == 9)
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
            #expect(invalid.body["code"] as? String == "validation_failed")
            let fields = (invalid.body["errors"] as? [[String: Any]] ?? []).compactMap { $0["field"] as? String }
            #expect(Set(fields) == ["handle", "email", "password"])

            let missing = try await client.send(.post, "/v1/users", json: ["handle": "ada"])
            #expect(missing.status == .unprocessableContent)
            let codes = (missing.body["errors"] as? [[String: Any]] ?? []).map { "\($0["field"]!):\($0["code"]!)" }
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
                #expect(response.body["code"] as? String == "malformed_body")
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

    @Test func wrongPasswordsUnknownHandlesAndBadTokensAre401() async throws {
        try await withServer { client, admin in
            _ = try await client.register("ada")
            for (handle, password) in [("ada", "wrong password!"), ("nobody", "correct horse battery")] {
                let response = try await client.send(.post, "/v1/sessions", json: ["handle": handle, "password": password])
                #expect(response.status == .unauthorized)
                #expect(response.body["code"] as? String == "invalid_credentials")
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
