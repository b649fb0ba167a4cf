import Foundation
import Marketplace
import Postgres
import ServerTestSupport
import Testing
import TestSupport
@testable import UseCases

#if canImport(Glibc)
import Glibc
#endif

@Suite("Sessions checked lately")
struct SessionCacheTests {
    let digest = Data([1, 2, 3, 4])
    let user = UserID()

    @Test func anEntryLivesItsLifetimeAndNeverPastItsSession() async throws {
        let cache = SessionCache(lifetime: .milliseconds(200))
        cache.store(LiveSession(user: user), expiresAt: Date().addingTimeInterval(3600), for: digest, ticket: cache.ticket())
        #expect(cache.session(for: digest)?.user == user)
        try await Task.sleep(for: .milliseconds(250))
        #expect(cache.session(for: digest)?.user == nil, "past its lifetime")

        cache.store(LiveSession(user: user), expiresAt: Date().addingTimeInterval(-1), for: digest, ticket: cache.ticket())
        #expect(cache.session(for: digest)?.user == nil, "past its session's expiry")

        cache.store(LiveSession(user: user), expiresAt: Date().addingTimeInterval(3600), for: digest, ticket: cache.ticket())
        cache.forget(announced: "01020304")
        #expect(cache.session(for: digest)?.user == nil, "announced")
        cache.store(LiveSession(user: user), expiresAt: Date().addingTimeInterval(3600), for: digest, ticket: cache.ticket())
        cache.forget(announced: "not hex")
        #expect(cache.session(for: digest)?.user == user)
        cache.forgetAll()
        #expect(cache.session(for: digest)?.user == nil)

        // A read the database answered before a logout, stored after the logout was forgotten:
        // not kept.
        let ticket = cache.ticket()
        cache.forget(announced: "ffff")
        cache.store(LiveSession(user: user), expiresAt: Date().addingTimeInterval(3600), for: digest, ticket: ticket)
        #expect(cache.session(for: digest)?.user == nil, "a read overtaken by a forget")

        let off = SessionCache(lifetime: .zero)
        off.store(LiveSession(user: user), expiresAt: Date().addingTimeInterval(3600), for: digest, ticket: off.ticket())
        #expect(off.session(for: digest)?.user == nil, "a lifetime of zero keeps nothing")
    }

    /// Two servers on one database, each trusting a checked token for five minutes: a token
    /// served from B's memory (it answers while the sessions table is locked) stops working on
    /// B within a moment of its logout on A, long before five minutes.
    @Test func aLogoutOnOneServerEndsTheSessionOnEveryServerAtOnce() async throws {
        try await withServerDatabase { database, admin in
            let environment = ["SESSION_CACHE_SECONDS": "300"]
            let a = try await ServerProcess(database: database, environment: environment)
            defer { a.kill(SIGTERM) }
            let b = try await ServerProcess(database: database, environment: environment)
            defer { b.kill(SIGTERM) }
            let ada = try await a.user("ada")
            #expect(try await b.send(.get, "/v1/users/\(ada.id)", token: ada.token).status == .ok)

            // Served from memory: B asks nothing of the locked table.
            try await admin.withConnection { connection in
                try await connection.query("BEGIN")
                try await connection.query("LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE")
                let served = try await b.send(.get, "/v1/users/\(ada.id)", token: ada.token)
                #expect(served.status == .ok)
                try await connection.query("ROLLBACK")
            }

            #expect(try await a.send(.delete, "/v1/sessions/current", token: ada.token).status == .noContent)
            let clock = ContinuousClock()
            let loggedOut = clock.now
            var status = try await b.send(.get, "/v1/users/\(ada.id)", token: ada.token).status
            while status == .ok, clock.now - loggedOut < .seconds(5) {
                try await Task.sleep(for: .milliseconds(20))
                status = try await b.send(.get, "/v1/users/\(ada.id)", token: ada.token).status
            }
            #expect(status == .unauthorized, "B still took the token \(clock.now - loggedOut) after the logout")
            #expect(clock.now - loggedOut < .seconds(2))
        }
    }
}
