import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ServerTestSupport
import Testing

@Suite("Login rate limits")
struct RateLimitTests {
    @Test func fiveFailuresLockTheHandleNotOthersAndNothingIsCheckedMeanwhile() async throws {
        try await withServer { client, admin in
            _ = try await client.user("ada")
            _ = try await client.user("bob")
            for _ in 0..<5 {
                let wrong = try await client.send(.post, "/v1/sessions", body: API.LoginBody(handle: "ada", password: "not the password"))
                #expect(wrong.status == .unauthorized)
            }
            // Locked, even with the right password.
            let locked = try await client.send(.post, "/v1/sessions", body: API.LoginBody(handle: "ada", password: "correct horse battery"))
            #expect(locked.status == .tooManyRequests)
            #expect(locked.code == "too_many_attempts")
            #expect(locked.headers[.contentType] == "application/problem+json")
            let retry = try #require(locked.headers[.retryAfter].flatMap { Int($0) })
            #expect((1...900).contains(retry))
            // Another handle is not locked by ada's failures.
            #expect(
                try await client.send(.post, "/v1/sessions", body: API.LoginBody(handle: "bob", password: "correct horse battery")).status
                    == .created)
            // Once the failures are older than the window, ada may try again.
            _ = try await admin.query("UPDATE login_failures SET at = at - interval '16 minutes'")
            #expect(
                try await client.send(.post, "/v1/sessions", body: API.LoginBody(handle: "ada", password: "correct horse battery")).status
                    == .created)
        }
    }

    @Test func twentyFailuresFromOneAddressLockItForEveryHandle() async throws {
        try await withServer { client, _ in
            _ = try await client.user("ada")
            for index in 0..<20 {
                let wrong = try await client.send(
                    .post, "/v1/sessions", body: API.LoginBody(handle: "nobody\(index)", password: "guessing"))
                #expect(wrong.status == .unauthorized)
            }
            let locked = try await client.send(.post, "/v1/sessions", body: API.LoginBody(handle: "ada", password: "correct horse battery"))
            #expect(locked.status == .tooManyRequests)
            #expect(locked.headers[.retryAfter] != nil)
        }
    }
}
