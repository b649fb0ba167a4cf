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

@Suite("Logins and passwords under attack")
struct LoginAbuseTests {
    /// 49 wrong guesses and the right password at once, from one address: the attempt is
    /// counted before bcrypt runs, so no more than five passwords are checked.
    @Test func aParallelBurstGetsAtMostFivePasswordChecks() async throws {
        try await QuietMachine.shared.run {
            try await withServer { client, _ in
                _ = try await client.user("ada")
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for index in 0..<50 {
                        group.addTask {
                            let password = index == 25 ? "correct horse battery" : "wrong guess \(index)"
                            return Int(try await client.send(.post, "/v1/sessions", json: ["handle": "ada", "password": password]).status.code)
                        }
                    }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
                // A 401 is a guess checked. The right password may be checked among the first
                // five or refused with the rest; when it succeeds, the guesses checked beside it
                // stay counted (0038: CI once saw 5 + 1 + 4). On a loaded machine (the whole
                // suite at once) some requests wait out the pool and get 503: never checked.
                #expect(statuses.filter { $0 == 401 }.count <= 5, "statuses: \(statuses.sorted())")
                #expect(statuses.filter { $0 == 201 }.count <= 1, "statuses: \(statuses.sorted())")
                #expect(statuses.filter { $0 == 429 || $0 == 503 }.count >= 44, "statuses: \(statuses.sorted())")
                // Under the whole suite's load (the failover and restore drills among it) the pool's
                // 503s come sooner and take a larger share: 17 and 20 of the 50 were 429 then.
                #expect(statuses.filter { $0 == 429 }.count >= 10, "the limit refused them, not only a busy pool: \(statuses.sorted())")
                #expect(Set(statuses).isSubset(of: [401, 201, 429, 503]), "statuses: \(statuses.sorted())")
            }
        }
    }

    /// The right password eight times at once (an app's retries, a second device): each is
    /// checked, and none is refused for the checks in flight beside it (issue 47: three 429s,
    /// `Retry-After: 900`, when every attempt counted as a failure until checked).
    @Test func eightConcurrentLoginsWithTheRightPasswordAllSucceed() async throws {
        try await QuietMachine.shared.run {
            try await withAccounts { accounts in
                _ = try await accounts.register(
                    handle: "ada", displayName: "Ada", email: "ada@example.org", password: "correct horse battery", country: nil)
                let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
                    for _ in 0..<8 {
                        group.addTask {
                            do {
                                _ = try await accounts.login(handle: "ada", password: "correct horse battery", address: "198.51.100.7")
                                return "in"
                            } catch let refused as TryLater { return "\(refused.code) \(refused.retryAfterSeconds)" }
                        }
                    }
                    return try await group.reduce(into: [String]()) { $0.append($1) }
                }
                #expect(outcomes == Array(repeating: "in", count: 8), "\(outcomes)")
                let left = try await accounts.pool.query("SELECT count(*) AS n FROM login_failures").single().decode("n", as: Int.self)
                #expect(left == 0, "no failure left behind")
            }
        }
    }

    /// A success takes back its pair's failures settled before it began, not those settled
    /// while its password was being checked (0038: a burst with the right password in it got
    /// five guesses, the success, and five more).
    @Test func aSuccessTakesBackOnlyTheFailuresSettledBeforeIt() async throws {
        try await withAccounts { accounts in
            _ = try await accounts.register(
                handle: "ada", displayName: "Ada", email: "ada@example.org", password: "correct horse battery", country: nil)
            func failures(settledSeconds: Int) async throws {
                for _ in 0..<4 {
                    try await accounts.pool.query(
                        """
                        INSERT INTO login_failures (handle, address, checking, settled_at)
                        VALUES ('ada', '203.0.113.9', false, now() + \(settledSeconds) * interval '1 second')
                        """)
                }
            }
            func left() async throws -> Int {
                try await accounts.pool.query("SELECT count(*) AS n FROM login_failures").single().decode("n", as: Int.self)
            }
            // Four typos before: the owner's success takes them back.
            try await failures(settledSeconds: -60)
            _ = try await accounts.login(handle: "ada", password: "correct horse battery", address: "203.0.113.9")
            #expect(try await left() == 0)
            // Four guesses settled while the success was being checked (stamped later than its
            // reservation): they stay, so one more guess fills the pair and the next is refused.
            try await failures(settledSeconds: 60)
            _ = try await accounts.login(handle: "ada", password: "correct horse battery", address: "203.0.113.9")
            #expect(try await left() == 4)
            await #expect(throws: DomainError.self) {
                try await accounts.login(handle: "ada", password: "guess", address: "203.0.113.9")
            }
            let refused = await #expect(throws: TryLater.self) {
                try await accounts.login(handle: "ada", password: "another guess", address: "203.0.113.9")
            }
            #expect(refused?.code == "too_many_attempts")
        }
    }

    /// Guesses spread over ten addresses lock the handle for any new address, not for one the
    /// owner logged in from before (issue 48: any account locked out from eleven addresses).
    @Test func failuresElsewhereDoNotLockTheOwnersKnownAddress() async throws {
        try await withAccounts { accounts in
            _ = try await accounts.register(
                handle: "ada", displayName: "Ada", email: "ada@example.org", password: "correct horse battery", country: nil)
            _ = try await accounts.login(handle: "ada", password: "correct horse battery", address: "198.51.100.7")
            for address in 0..<10 {
                for guess in 0..<5 {
                    await #expect(throws: DomainError.self) {
                        try await accounts.login(handle: "ada", password: "guess \(guess)", address: "203.0.113.\(address)")
                    }
                }
            }
            let stranger = await #expect(throws: TryLater.self) {
                try await accounts.login(handle: "ada", password: "correct horse battery", address: "192.0.2.99")
            }
            #expect(stranger?.code == "too_many_attempts", "a new address meets the handle's lock")
            let owner = try await accounts.login(handle: "ada", password: "correct horse battery", address: "198.51.100.7")
            #expect(owner.token.count > 20, "the owner's own address is not locked by the others'")
        }
    }

    /// Guesses in flight hold their places: eight wrong passwords at once get five checks,
    /// and the three refused wait no longer than the pair's window.
    @Test func eightConcurrentWrongPasswordsGetFiveChecks() async throws {
        try await withAccounts { accounts in
            _ = try await accounts.register(
                handle: "ada", displayName: "Ada", email: "ada@example.org", password: "correct horse battery", country: nil)
            let outcomes = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        do {
                            _ = try await accounts.login(handle: "ada", password: "wrong guess \(index)", address: "203.0.113.9")
                            return 201
                        } catch let refused as TryLater {
                            #expect(refused.retryAfterSeconds <= accounts.loginWindow)
                            return 429
                        } catch { return 401 }
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == 401 }.count == 5, "\(outcomes)")
            #expect(outcomes.filter { $0 == 429 }.count == 3, "\(outcomes)")
        }
    }

    /// Five wrong passwords from a stranger's address lock that address out of the handle,
    /// not the owner from theirs.
    @Test func aLockOutIsAimedAtTheAddressNotAtTheHandle() async throws {
        try await withAccounts { accounts in
            _ = try await accounts.register(
                handle: "ada", displayName: "Ada", email: "ada@example.org", password: "correct horse battery", country: nil)
            for _ in 0..<5 {
                await #expect(throws: DomainError.self) {
                    try await accounts.login(handle: "ada", password: "not it at all", address: "203.0.113.66")
                }
            }
            let locked = await #expect(throws: TryLater.self) {
                try await accounts.login(handle: "ada", password: "correct horse battery", address: "203.0.113.66")
            }
            #expect(locked?.reason == .tooManyAttempts && locked?.code == "too_many_attempts")
            let session = try await accounts.login(handle: "ada", password: "correct horse battery", address: "198.51.100.7")
            #expect(session.token.count > 20, "the owner, from their own address")
        }
    }

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

    @Test func aPasswordWithANulIsRefusedAndNothingIsWritten() async throws {
        try await withServer { client, admin in
            let before = try await eventCount(admin)
            let response = try await client.send(
                .post, "/v1/users",
                raw: #"{"handle": "nul_user", "displayName": "Nul", "email": "nul@example.org", "password": "\u0000abcdefghijk"}"#)
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes["password"] == "control_character")
            #expect(try await eventCount(admin) == before)
        }
    }
}

@Suite("Hostile bytes and times")
struct HostileInputTests {
    @Test func aControlCharacterInAnyTextIsA422NamingTheFieldAndWritesNothing() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let before = try await eventCount(admin)
            let bodies: [(String, String, String, String)] = [
                ("POST", "/v1/rentals", #"{"title": "Bike\u0000", "category": "bikes", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3}}"#, "title"),
                ("POST", "/v1/rentals", #"{"title": "Bike", "category": "bikes", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3, "place": "Pat\u0007an"}}"#, "location.place"),
                ("PATCH", "/v1/me", #"{"displayName": "Ada\u001b[2J"}"#, "displayName"),
                ("POST", "/v1/users", #"{"handle": "a\u0000b", "displayName": "X", "email": "x@example.org", "password": "long enough pass"}"#, "handle"),
                ("POST", "/v1/sessions", #"{"handle": "ada\u0000", "password": "whatever it is"}"#, "handle"),
            ]
            for (method, path, body, field) in bodies {
                let response = try await client.send(HTTPRequest.Method(method)!, path, raw: body, token: ada.token)
                #expect(response.status == .unprocessableContent, "\(method) \(path)")
                #expect(response.fieldCodes[field] == "control_character", "\(method) \(path): \(response)")
            }
            for (path, field) in [
                ("/v1/market?q=drill%00", "q"), ("/v1/loans?sector=Food%00", "sector"), ("/v1/countries?q=%00", "q"),
                ("/v1/market?category=%1B", "category"),
            ] {
                let response = try await client.send(.get, path, token: ada.token)
                #expect(response.status == .unprocessableContent, "\(path)")
                #expect(response.fieldCodes[field] == "control_character", "\(path): \(response)")
            }
            // Tabs and line breaks are text.
            let described = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Lamp", "description": "Brass.\n\tWorks.", "category": "furniture", "dailyPriceCents": 300, "location": {"lat": 27.7, "lng": 85.3}}"#,
                token: ada.token)
            #expect(described.status == .created, "\(described)")
            #expect(try await eventCount(admin) == before + 1)
        }
    }

    @Test func timesOutOfRangeOrWithFractionsAndHandMadeCursorsAreNeverA5xx() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            _ = try await client.postRental(ada.token)
            let fractional = try await client.send(.get, "/v1/market?updatedSince=2020-01-01T10:00:50.123Z", token: ada.token)
            #expect(fractional.status == .ok)
            #expect(try fractional.decode(Page<ItemResource>.self).data.count == 1)
            // `t` and `z` in lower case are RFC 3339 too (§5.6).
            let lower = try await client.send(.get, "/v1/market?updatedSince=2020-01-01t10:00:50z", token: ada.token)
            #expect(lower.status == .ok, "\(lower)")
            #expect(try lower.decode(Page<ItemResource>.self).data.count == 1)
            for since in ["0000-01-01T00:00:00Z", "1899-12-31T23:59:59Z", "2201-01-01T00:00:00Z"] {
                let response = try await client.send(.get, "/v1/market?updatedSince=\(since)", token: ada.token)
                #expect(response.status == .unprocessableContent, "\(since)")
                #expect(response.fieldCodes["updatedSince"] == "invalid_time")
            }
            func cursor(_ json: String) -> String {
                Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                    .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            }
            for made in [
                #"{"at": 9223372036854775807, "id": "6f1c1b4e-7e5a-4c5e-9a53-0a8f2f4d3c11"}"#,
                #"{"at": -9223372036854775807, "id": "6f1c1b4e-7e5a-4c5e-9a53-0a8f2f4d3c11"}"#,
                #"{"at": 0, "id": "6f1c1b4e-7e5a-4c5e-9a53-0a8f2f4d3c11", "km": -1}"#,
            ] {
                for path in ["/v1/market", "/v1/loans", "/v1/me/bids"] {
                    let response = try await client.send(.get, "\(path)?cursor=\(cursor(made))", token: ada.token)
                    #expect(response.status.code < 500, "\(path) \(made): \(response.status)")
                }
            }
            // A NUL in a hand-made text key (the countries' order) is refused, not sent on (issue 48).
            let nul = try await client.send(
                .get, "/v1/countries?cursor=\(cursor(#"{"at": 0, "id": "6f1c1b4e-7e5a-4c5e-9a53-0a8f2f4d3c11", "key": "N\u0000P"}"#))",
                token: ada.token)
            #expect(nul.status == .unprocessableContent && nul.fieldCodes["cursor"] == "invalid_cursor", "\(nul)")
        }
    }
}

@Suite("Idempotency digests")
struct IdempotencyDigestTests {
    static let rental = #"{"title": "Drill", "category": "tools", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3}}"#

    /// A retry that orders its keys anew, spaces them otherwise or escapes a letter is the
    /// same request; another value is not.
    @Test func theSameValueInOtherBytesIsTheSameRequest() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let first = try await client.send(.post, "/v1/rentals", raw: Self.rental, token: ada.token, idempotencyKey: "k1")
            #expect(first.status == .created)
            let retry = try await client.send(
                .post, "/v1/rentals",
                raw: #"{ "location":{"lng":85.3,"lat":27.7},"dailyPriceCents":500,  "category":"t\u006fols","title":"Dr\u0069ll" }"#,
                token: ada.token, idempotencyKey: "k1")
            #expect(retry.status == .created, "\(retry)")
            #expect(retry.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(try retry.decode(ItemResource.self).id == first.decode(ItemResource.self).id)
            let other = try await client.send(
                .post, "/v1/rentals", raw: Self.rental.replacingOccurrences(of: "500", with: "501"), token: ada.token,
                idempotencyKey: "k1")
            #expect(other.status == .unprocessableContent)
            #expect(other.code == "idempotency_key_reused")
            #expect(try await count(admin, "SELECT count(*) FROM items_view") == 1)
        }
    }

    /// An 80,000-key body costs about as much with an Idempotency-Key as without: both are
    /// refused by the shape check's count of values (issue 48), before the digest or the
    /// decoder sees them.
    @Test func aHugeBodyWithAKeyCostsAtMostThreeTimesOneWithout() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let padding = (0..<80_000).map { "\"k\(String(format: "%05d", $0))\":1" }.joined(separator: ",")
            let body = "{" + padding + #","title": "Drill", "category": "tools", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3}}"#
            #expect(body.utf8.count < 1_048_576)
            // Interleaved, the fastest of five each: the suites around this one load the machine
            // in waves, and a wave must fall on both sides of the comparison or on neither.
            let clock = ContinuousClock()
            var without = Duration.seconds(3600), with = Duration.seconds(3600)
            for round in 0..<5 {
                for key in [nil, "huge-\(round)"] {
                    let started = clock.now
                    let response = try await client.send(.post, "/v1/rentals", raw: body, token: ada.token, idempotencyKey: key)
                    let took = clock.now - started
                    #expect(response.status == .badRequest)
                    #expect(response.code == "too_many_values")
                    if key == nil { without = min(without, took) } else { with = min(with, took) }
                }
            }
            #expect(with <= without * 3 + .milliseconds(150), "with a key \(with), without \(without)")
        }
    }
}

@Suite("Blocking under concurrent bids")
struct BlockingRaceTests {
    /// Bids racing a block: none of the blocked bidder's bids on the owner's items may commit
    /// after the block (each bid's append expects the owner's stream as it read it).
    @Test func noBidOfABlockedUserCommitsAfterTheBlock() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            var items = [ItemID]()
            for index in 0..<12 { items.append(try await client.postRental(ada.token, title: "Thing \(index)").id) }
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for item in items {
                    group.addTask { Int(try await client.bid(item, bob.token).status.code) }
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(5))
                    return Int(try await client.send(.post, "/v1/me/blocks", json: ["userId": "\(bob.id)"], token: ada.token).status.code)
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(Set(statuses).isSubset(of: [200, 201, 204, 403]), "\(statuses)")
            let late = try await count(
                admin,
                """
                SELECT count(*) FROM events b
                WHERE b.type = 'BidPlaced' AND b.data ->> 'bidderID' = \(bob.id.description)
                  AND b.position > (SELECT position FROM events WHERE type = 'UserBlocked')
                """)
            #expect(late == 0, "bids of the blocked user committed after the block")
            // After the block, every bid is refused.
            let after = try await client.bid(items[0], bob.token)
            #expect(after.status == .forbidden)
            #expect(after.code == "blocked_by_owner")
        }
    }
}

@Suite("Write limits")
struct WriteLimitTests {
    @Test func postingsAndBidsPastTheUsersBucketAre429AndRepeatsAreFree() async throws {
        // 8 an hour: 2 at once, then one every 7.5 minutes.
        try await withServer(writeLimits: WriteLimits(postingsPerHour: 8, bidsPerHour: 8)) { client, admin in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            let first = try await client.send(.post, "/v1/rentals", raw: IdempotencyDigestTests.rental, token: ada.token, idempotencyKey: "r1")
            #expect(first.status == .created)
            #expect(try await client.send(.post, "/v1/rentals", raw: IdempotencyDigestTests.rental, token: ada.token).status == .created)
            let third = try await client.send(.post, "/v1/rentals", raw: IdempotencyDigestTests.rental, token: ada.token)
            #expect(third.status == .tooManyRequests)
            #expect(third.code == "too_many_writes")
            #expect(Int(third.headers[.retryAfter] ?? "") ?? 0 > 60)
            let loan = try await client.send(
                .post, "/v1/loans",
                json: [
                    "title": "Loom", "description": "For the workshop", "sector": "Manufacturing", "activity": "Weaving",
                    "country": "NP", "location": ["lat": 27.7, "lng": 85.3], "amountCents": 10_000, "deadline": dayFromToday(20),
                ], token: ada.token)
            #expect(loan.status == .tooManyRequests, "loans are postings too")
            // A repeat of an answered request is answered, not counted.
            let repeated = try await client.send(.post, "/v1/rentals", raw: IdempotencyDigestTests.rental, token: ada.token, idempotencyKey: "r1")
            #expect(repeated.status == .created)
            #expect(try repeated.decode(ItemResource.self).id == first.decode(ItemResource.self).id)
            // Another user has a bucket of their own.
            #expect(try await client.send(.post, "/v1/rentals", raw: IdempotencyDigestTests.rental, token: bob.token).status == .created)
            #expect(try await count(admin, "SELECT count(*) FROM items_view") == 3)

            let item = try first.decode(ItemResource.self).id
            var bids = [HTTPResponse.Status]()
            for _ in 0..<3 { bids.append(try await client.bid(item, bob.token).status) }
            #expect(bids.filter { $0 == .tooManyRequests }.count == 1, "\(bids)")
        }
    }
}

@Suite("The contract at the edges")
struct ContractEdgeTests {
    @Test func aPlusInAQueryIsASpace() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            _ = try await client.postRental(ada.token, title: "Cordless drill")
            _ = try await client.postRental(ada.token, title: "Ladder")
            let found = try await client.send(.get, "/v1/market?q=cordless+drill", token: ada.token)
            #expect(try found.decode(Page<ItemResource>.self).data.map(\.title) == ["Cordless drill"])
            // An encoded plus is a plus (FormDecodingTests), which separates words as a space does.
            let plus = try await client.send(.get, "/v1/market?q=cordless%2Bdrill", token: ada.token)
            #expect(try plus.decode(Page<ItemResource>.self).data.map(\.title) == ["Cordless drill"])
            let glued = try await client.send(.get, "/v1/market?q=cordlessdrill", token: ada.token)
            #expect(try glued.decode(Page<ItemResource>.self).data.isEmpty)
            let offset = try await client.send(.get, "/v1/market?updatedSince=2020-01-01T10:00:00+05:45", token: ada.token)
            #expect(offset.status == .ok, "an offset's plus sent unencoded: \(offset)")
        }
    }

    @Test func unknownRoutesAre404AndWrongMethods405WithAllowAsProblems() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let missing = try await client.send(.get, "/v1/nothing-here", token: ada.token)
            #expect(missing.status == .notFound)
            #expect(missing.headers[.contentType] == "application/problem+json")
            #expect(missing.code == "not_found")
            let wrong = try await client.send(.delete, "/v1/rentals", token: ada.token)
            #expect(wrong.status == .methodNotAllowed)
            #expect(wrong.headers[.allow] == "POST")
            #expect(wrong.code == "method_not_allowed")
            let item = try await client.send(.put, "/v1/items/6f1c1b4e-7e5a-4c5e-9a53-0a8f2f4d3c11", token: ada.token)
            #expect(item.status == .methodNotAllowed)
            #expect(item.headers[.allow] == "GET, PATCH")
        }
    }

    @Test func browsersFromAllowedOriginsMayCallAndOthersGetNoCORSHeaders() async throws {
        try await withServer(allowedOrigins: ["https://app.example"]) { client, _ in
            let ada = try await client.user("ada")
            let preflight = try await client.execute(
                uri: "/v1/rentals", method: .options,
                headers: [.origin: "https://app.example", .accessControlRequestMethod: "POST",
                          .accessControlRequestHeaders: "authorization, content-type, idempotency-key"])
            #expect(preflight.status == .noContent)
            #expect(preflight.headers[.accessControlAllowOrigin] == "https://app.example")
            #expect(preflight.headers[.accessControlAllowMethods] == "POST")
            #expect(preflight.headers[.accessControlAllowHeaders]?.contains("Idempotency-Key") == true)
            let read = try await client.execute(
                uri: "/v1/market", method: .get, headers: [.origin: "https://app.example", .authorization: "Bearer \(ada.token)"])
            #expect(read.status == .ok)
            #expect(read.headers[.accessControlAllowOrigin] == "https://app.example")
            #expect(read.headers[.accessControlExposeHeaders]?.contains("Retry-After") == true)
            let refused = try await client.execute(uri: "/v1/market?limit=0", method: .get, headers: [.origin: "https://app.example"])
            #expect(refused.status == .unauthorized)
            #expect(refused.headers[.accessControlAllowOrigin] == "https://app.example", "errors are readable too")
            let stranger = try await client.execute(
                uri: "/v1/market", method: .get, headers: [.origin: "https://evil.example", .authorization: "Bearer \(ada.token)"])
            #expect(stranger.headers[.accessControlAllowOrigin] == nil)
        }
    }
}

@Suite("Review of the hardening")
struct HardeningReviewTests {
    @Test func clientAddressesAreCountedByHostAndIPv6By64() {
        #expect(ClientAddress.key("203.0.113.7") == "203.0.113.7")
        #expect(ClientAddress.key("::ffff:203.0.113.7") == "203.0.113.7")
        #expect(ClientAddress.key("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64")
        #expect(ClientAddress.key("2001:db8:1:2:bbbb:cccc:dddd:eeee") == "2001:db8:1:2::/64")
        #expect(ClientAddress.key("2001:db8::1") == "2001:db8:0:0::/64")
    }

    @Test func aFailedCheckThatIsNotAWrongPasswordDoesNotCountAndAHugeHandleIsA401() async throws {
        // One check at a time and none waiting: a second login at once is refused busy (503).
        let passwords = PasswordHasher(cost: 12, concurrent: 1, waiting: 0)
        try await withAccounts(passwords: passwords) { accounts in
            _ = try await accounts.register(
                handle: "ada", displayName: "Ada", email: "ada@example.org", password: "correct horse battery", country: nil)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        do {
                            _ = try await accounts.login(handle: "ada", password: "not it at all", address: "203.0.113.66")
                            return 201
                        } catch let refused as TryLater { return refused.reason == .busy ? 503 : 429 } catch { return 401 }
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.contains(503), "some were refused for a full queue: \(statuses)")
            let failures = try await accounts.pool.query("SELECT count(*) AS n FROM login_failures").single().decode("n", as: Int.self)
            #expect(failures == statuses.filter { $0 == 401 }.count, "only wrong passwords count: \(statuses)")

            let huge = String(repeating: "x", count: 20_000)
            await #expect(throws: DomainError.self) { try await accounts.login(handle: huge, password: "whatever it is", address: "a") }
        }
    }

    @Test func aC1ControlInRawUTF8IsRefusedLikeAnEscapedOne() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let response = try await client.send(.patch, "/v1/me", raw: "{\"displayName\": \"Ada\u{85}\"}", token: ada.token)
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes["displayName"] == "control_character")
        }
    }
}

@Suite("Fields a client can rely on")
struct FieldContractTests {
    @Test func aWrongJSONTypeNamesItsField() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let response = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": "500", "location": {"lat": 27.7, "lng": 85.3}}"#,
                token: ada.token)
            #expect(response.status == .badRequest)
            #expect(response.fieldCodes["dailyPriceCents"] == "wrong_type", "\(response)")
            let nested = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": 500, "location": {"lat": "north", "lng": 85.3}}"#,
                token: ada.token)
            #expect(nested.fieldCodes["location.lat"] == "wrong_type", "\(nested)")
        }
    }

    @Test func displayNamesAreComposedAndRefuseInvisibleAndDirectionCharacters() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            for name in ["ad\u{202E}nimda", "ada\u{200B}", "\u{2066}ada\u{2069}", "a\u{FEFF}da"] {
                let response = try await client.send(.patch, "/v1/me", json: ["displayName": name], token: ada.token)
                #expect(response.status == .unprocessableContent, "\(name.unicodeScalars.map { String($0.value, radix: 16) })")
                #expect(response.fieldCodes["displayName"] == "invalid_display_name")
            }
            let decomposed = try await client.send(.patch, "/v1/me", json: ["displayName": "Jose\u{301}"], token: ada.token)
            #expect(decomposed.status == .ok)
            let name = try decomposed.decode(PrivateProfile.self).displayName
            #expect(name == "Jos\u{E9}")
            #expect(name.unicodeScalars.count == 4, "composed: one scalar for é")
        }
    }

    @Test func blockingAUserWhoDoesNotExistIs404AndStoresNothing() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let before = try await eventCount(admin)
            let response = try await client.send(
                .post, "/v1/me/blocks", json: ["userId": "6f1c1b4e-7e5a-4c5e-9a53-0a8f2f4d3c11"], token: ada.token)
            #expect(response.status == .notFound)
            #expect(response.code == "user_not_found")
            #expect(try await eventCount(admin) == before)
        }
    }
}

@Suite("Unknown fields")
struct UnknownFieldTests {
    @Test func aFieldTheRouteDoesNotTakeIsA422NamingItAndWritesNothing() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let before = try await eventCount(admin)
            let response = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": 500, "dailyPrice": 5, "colour": "red", "location": {"lat": 27.7, "lng": 85.3}}"#,
                token: ada.token)
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes == ["colour": "unknown_field", "dailyPrice": "unknown_field"])
            #expect(try await eventCount(admin) == before)
        }
    }

    /// The fields a route takes are remembered once seen: a body of every field first, then
    /// unknown ones, top-level and nested, are refused all the same.
    @Test func anUnknownFieldIsRefusedAfterEveryKnownOneWasSeen() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let full = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "description": "18 V", "category": "tools", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3, "place": "Patan"}}"#,
                token: ada.token)
            #expect(full.status == .created, "\(full)")
            let before = try await eventCount(admin)
            let response = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": 500, "colour": "red", "location": {"lat": 27.7, "lng": 85.3, "altitude": 1400}}"#,
                token: ada.token)
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes == ["colour": "unknown_field", "location.altitude": "unknown_field"], "\(response)")
            #expect(try await eventCount(admin) == before)
        }
    }
}

@Suite("Rules a client developer tripped on")
struct ClientRuleTests {
    @Test func anEmailHoldsOneAccountWhateverItsCase() async throws {
        try await withServer { client, admin in
            _ = try await client.user("ada")
            let before = try await eventCount(admin)
            let again = try await client.send(
                .post, "/v1/users",
                json: ["handle": "ada2", "displayName": "Ada", "email": "ADA@Example.org", "password": "correct horse battery"])
            #expect(again.status == .conflict)
            #expect(again.code == "email_taken")
            #expect(try await eventCount(admin) == before)
        }
    }

    @Test func offersOnARequestStayWithinItsMaximumAndDatesInTheBookableRange() async throws {
        try await withServer(today: { Day(Date()) }) { client, _ in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            let request = try await client.send(
                .post, "/v1/requests",
                json: [
                    "title": "Ladder", "category": "tools", "maxDailyPriceCents": 800, "neededFrom": dayFromToday(3),
                    "neededUntil": dayFromToday(5), "location": ["lat": 27.7, "lng": 85.3],
                ], token: ada.token)
            let id = try request.decode(ItemResource.self).id
            let over = try await client.send(
                .post, "/v1/items/\(id)/bids", json: ["dailyPriceCents": 900, "from": dayFromToday(3), "until": dayFromToday(4)],
                token: bob.token)
            #expect(over.status == .unprocessableContent)
            #expect(over.fieldCodes["dailyPriceCents"] == "over_max_price")
            let within = try await client.send(
                .post, "/v1/items/\(id)/bids", json: ["dailyPriceCents": 800, "from": dayFromToday(3), "until": dayFromToday(4)],
                token: bob.token)
            #expect(within.status == .created, "\(within)")

            let past = try await client.send(
                .post, "/v1/requests",
                json: [
                    "title": "Tent", "category": "sports", "neededFrom": dayFromToday(-5), "neededUntil": "9999-12-31",
                    "location": ["lat": 27.7, "lng": 85.3],
                ], token: ada.token)
            #expect(past.fieldCodes == ["neededFrom": "in_the_past", "neededUntil": "too_far_ahead"], "\(past)")
        }
    }

    @Test func aTwoDigitExpiryYearAsksForFourDigits() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let response = try await client.addCard(ada.token, expMonth: 12, expYear: 30)
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes["expYear"] == "invalid_expiry")
            #expect(response.problem?.errors?.first?.message.contains("four digits") == true)
        }
    }

    @Test func theSectorFilterIgnoresCase() async throws {
        try await withServer { client, _ in
            let rita = try await client.user("rita")
            _ = try await client.postLoan(rita.token, amount: 10_000, title: "Loom")
            let lower = try await client.send(.get, "/v1/loans?sector=manufacturing", token: rita.token)
            let upper = try await client.send(.get, "/v1/loans?sector=MANUFACTURING", token: rita.token)
            #expect(try lower.decode(Page<LoanResource>.self).data.count == 1, "\(lower)")
            #expect(try upper.decode(Page<LoanResource>.self).data.count == 1)
        }
    }
}

@Suite("Every bad field at once")
struct AllFieldErrorsTests {
    @Test func aMissingFieldAndABadCategoryDoNotHideATitleTooLong() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let response = try await client.send(
                .post, "/v1/rentals",
                json: ["title": String(repeating: "t", count: 300), "category": "spaceships", "location": ["lat": 27.7, "lng": 85.3]],
                token: ada.token)
            #expect(response.status == .unprocessableContent)
            let codes = response.fieldCodes
            #expect(codes["category"] == "invalid_category", "\(codes)")
            #expect(codes["dailyPriceCents"] == "required")
            #expect(codes["title"] != nil, "the title's own problem, named with the others: \(codes)")
        }
    }
}

@Suite("Refreshing the market")
struct MarketRefreshTests {
    @Test func aRefreshAnswersItemsThatLeftTheMarketWithTheirStatus() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let since = ISO8601DateFormatter().string(from: Date().addingTimeInterval(-1))
            let kept = try await client.postRental(ada.token, title: "Kept").id
            let gone = try await client.postRental(ada.token, title: "Gone").id
            _ = try await client.send(.post, "/v1/items/\(gone)/withdraw", token: ada.token)
            let market = try await client.send(.get, "/v1/market", token: ada.token)
            #expect(try market.decode(Page<ItemResource>.self).data.map(\.id) == [kept])
            let refresh = try await client.send(.get, "/v1/market?updatedSince=\(since)", token: ada.token)
            let items = try refresh.decode(Page<ItemResource>.self).data
            let status = Dictionary(uniqueKeysWithValues: items.map { ($0.id, $0.status) })
            #expect(status[gone] == "withdrawn", "\(refresh)")
            #expect(status[kept] == "available")
        }
    }
}

@Suite("One price field per kind")
struct PriceFieldTests {
    @Test func aRentalsPriceIsDailyPriceCentsAndARequestsMaxDailyPriceCentsInRevisionsAndErrors() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let rental = try await client.postRental(ada.token).id
            let wrongName = try await client.send(.patch, "/v1/items/\(rental)", json: ["maxDailyPriceCents": 100], token: ada.token)
            #expect(wrongName.status == .unprocessableContent)
            #expect(wrongName.fieldCodes == ["maxDailyPriceCents": "not_for_this_kind"])
            let unchanged = try await client.send(.get, "/v1/items/\(rental)", token: ada.token)
            #expect(try unchanged.decode(ItemResource.self).dailyPriceCents == 1500, "a refused revision changes nothing: \(unchanged)")
            let badPrice = try await client.send(.patch, "/v1/items/\(rental)", json: ["dailyPriceCents": 0], token: ada.token)
            #expect(badPrice.fieldCodes == ["dailyPriceCents": "invalid_price"], "named as sent, not priceCents")
            let revised = try await client.send(.patch, "/v1/items/\(rental)", json: ["dailyPriceCents": 1800], token: ada.token)
            #expect(try revised.decode(ItemResource.self).dailyPriceCents == 1800)
        }
    }
}

@Suite("Country, one name")
struct CountryTests {
    @Test func loansSayCountryAndTheMarketFiltersByTheOwnersCountry() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            _ = try await client.send(.patch, "/v1/me", json: ["country": "NP"], token: ada.token)
            _ = try await client.send(.patch, "/v1/me", json: ["country": "KE"], token: bob.token)
            let nepali = try await client.postRental(ada.token, title: "Nepali bike").id
            _ = try await client.postRental(bob.token, title: "Kenyan bike")
            let market = try await client.send(.get, "/v1/market?country=np", token: ada.token)
            #expect(try market.decode(Page<ItemResource>.self).data.map(\.id) == [nepali])
            #expect(try await client.send(.get, "/v1/market?country=ZZ", token: ada.token).fieldCodes["country"] == "invalid_country")

            let loan = try await client.postLoan(ada.token, amount: 10_000, title: "Loom")
            let resource = try await client.send(.get, "/v1/loans/\(loan)", token: ada.token)
            #expect(try resource.decode(LoanResource.self).country == "NP")
            // The old name must be gone from the JSON, which a typed read cannot see.
            #expect(resource.json["countryCode"] == nil, "one name: country")
        }
    }
}

@Suite("One resource for me")
struct MeResourceTests {
    @Test func patchAndBlocksAnswerWhatGetAnswers() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            _ = try await client.postRental(ada.token)
            let patched = try await client.send(.patch, "/v1/me", json: ["displayName": "Ada L."], token: ada.token)
            let blocked = try await client.send(.post, "/v1/me/blocks", json: ["userId": "\(bob.id)"], token: ada.token)
            let read = try await client.send(.get, "/v1/me", token: ada.token)
            // One resource: the same keys in every answer, read from the JSON itself.
            let (patchedKeys, blockedKeys, readKeys) = (Set(patched.json.keys), Set(blocked.json.keys), Set(read.json.keys))
            #expect(patchedKeys == readKeys, "PATCH: \(patchedKeys.sorted()), GET: \(readKeys.sorted())")
            #expect(blockedKeys == readKeys)
            #expect(try patched.decode(PrivateProfile.self).posts.count == 1)
            let profile = try read.decode(PrivateProfile.self)
            #expect(profile.blocked == [bob.id])
            #expect(profile.displayName == "Ada L.")
            #expect(patched.json["position"] is Int && read.json["position"] is NSNull, "a read's position is there, as null")
        }
    }
}

@Suite("NUL on every route that takes text")
struct NulEveryRouteTests {
    @Test func everyBodyRouteRefusesANulNamingTheField() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let before = try await eventCount(admin)
            let id = "6f1c1b4e-7e5a-4c5e-9a53-0a8f2f4d3c11"
            let nul = #"\u0000"#
            let routes: [(HTTPRequest.Method, String, String, String)] = [
                (.post, "/v1/users", #"{"handle": "x", "displayName": "X", "email": "x\#(nul)@example.org", "password": "long enough pass"}"#, "email"),
                (.post, "/v1/sessions", #"{"handle": "ada", "password": "pass\#(nul)word"}"#, "password"),
                (.patch, "/v1/me", #"{"displayName": "A\#(nul)"}"#, "displayName"),
                (.post, "/v1/me/blocks", #"{"userId": "\#(nul)"}"#, "userId"),
                (.post, "/v1/requests", #"{"title": "Tent", "description": "\#(nul)", "category": "sports", "neededFrom": "2026-12-10", "neededUntil": "2026-12-11", "location": {"lat": 1, "lng": 2}}"#, "description"),
                (.patch, "/v1/items/\(id)", #"{"title": "T\#(nul)"}"#, "title"),
                (.post, "/v1/items/\(id)/bids", #"{"dailyPriceCents": 100, "from": "2026-12-10", "until": "2026-12-11", "message": "hi\#(nul)"}"#, "message"),
                (.post, "/v1/bids/\(id)/reject", #"{"reason": "no\#(nul)"}"#, "reason"),
                (.post, "/v1/me/cards", #"{"number": "4242\#(nul)", "expMonth": 12, "expYear": 2030, "cvv": "123", "holderName": "Ada"}"#, "number"),
                (.post, "/v1/me/deposits", #"{"amountCents": 1000, "cardId": "\#(nul)"}"#, "cardId"),
                (.post, "/v1/loans", #"{"title": "Loom\#(nul)", "description": "", "sector": "Arts", "activity": "Weaving", "country": "NP", "location": {"lat": 1, "lng": 2}, "amountCents": 10000, "deadline": "2026-12-20"}"#, "title"),
                (.post, "/v1/loans/\(id)/repayments", #"{"amountCents": 100, "payWith": "balance\#(nul)"}"#, "payWith"),
                (.post, "/v1/cart/items", #"{"loanId": "\#(nul)", "amountCents": 2500}"#, "loanId"),
                (.patch, "/v1/cart/items/\(id)", #"{"amountCents": 2500, "note": "\#(nul)"}"#, "note"),
                (.post, "/v1/cart/checkout", #"{"payWith": "card", "cardId": "\#(nul)"}"#, "cardId"),
            ]
            for (method, path, body, field) in routes {
                let response = try await client.send(method, path, raw: body, token: ada.token)
                #expect(response.status == .unprocessableContent, "\(method) \(path): \(response.status)")
                #expect(response.fieldCodes[field] == "control_character", "\(method) \(path): \(response)")
            }
            for path in ["/v1/loans?q=\u{0}".addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed)!, "/v1/events?after=%00", "/v1/audit/checkpoints?after=%00", "/v1/items/\(id)/bids?cursor=%00"] {
                let response = try await client.send(.get, path, token: ada.token)
                #expect(response.status == .unprocessableContent, "\(path): \(response.status)")
            }
            #expect(try await eventCount(admin) == before)
        }
    }
}

@Suite("Every bad field at once, registration and loans")
struct AllFieldErrorsMoreTests {
    @Test func registrationAndLoansNameEveryBadFieldWithTheMissingOnes() async throws {
        try await withServer { client, _ in
            let register = try await client.send(.post, "/v1/users", json: ["handle": "A B", "password": "short"])
            #expect(
                register.fieldCodes
                    == ["handle": "invalid_handle", "password": "invalid_password", "displayName": "required", "email": "required"],
                "\(register)")
            let ada = try await client.user("ada")
            let loan = try await client.send(
                .post, "/v1/loans", json: ["title": "", "country": "ZZ", "amountCents": 3000], token: ada.token)
            let codes = loan.fieldCodes
            #expect(codes["title"] == "invalid_title" && codes["country"] == "invalid_country" && codes["amountCents"] == "invalid_amount", "\(codes)")
            #expect(codes["sector"] == "required" && codes["deadline"] == "required")
        }
    }
}

@Suite("Retry-After of a login limit")
struct LoginRetryAfterTests {
    @Test func theWaitIsUntilTheLimitThatWasHitClears() async throws {
        try await withAccounts { accounts in
            _ = try await accounts.register(
                handle: "ada", displayName: "Ada", email: "ada@example.org", password: "correct horse battery", country: nil)
            // Five failures for ada from this address ten minutes ago, and an older one for
            // another handle from it: the pair's limit is hit, and clears in five minutes.
            try await accounts.pool.query(
                """
                INSERT INTO login_failures (handle, address, at)
                SELECT 'ada', '203.0.113.9', now() - interval '10 minutes' FROM generate_series(1, 5)
                UNION ALL SELECT 'bob', '203.0.113.9', now() - interval '14 minutes'
                """)
            let refused = await #expect(throws: TryLater.self) {
                try await accounts.login(handle: "ada", password: "correct horse battery", address: "203.0.113.9")
            }
            let wait = refused?.retryAfterSeconds ?? 0
            #expect((280...310).contains(wait), "Retry-After \(wait)")
        }
    }
}

@Suite("Write limits on every change")
struct ChangeLimitTests {
    @Test func revisionsProfileAndCartChangesShareABucketPastWhichTheyAre429() async throws {
        try await withServer(writeLimits: WriteLimits(postingsPerHour: 0, bidsPerHour: 0, changesPerHour: 8)) { client, _ in
            let ada = try await client.user("ada")
            let item = try await client.postRental(ada.token).id
            #expect(try await client.send(.patch, "/v1/me", json: ["displayName": "A"], token: ada.token).status == .ok)
            #expect(try await client.send(.patch, "/v1/items/\(item)", json: ["title": "B"], token: ada.token).status == .ok)
            let third = try await client.send(.delete, "/v1/cart", token: ada.token)
            #expect(third.status == .tooManyRequests)
            #expect(third.code == "too_many_writes")
            #expect(try await client.send(.get, "/v1/me", token: ada.token).status == .ok, "reads are not counted")
        }
    }
}

@Suite("Unknown nested fields")
struct UnknownNestedFieldTests {
    @Test func aNestedFieldTheRouteDoesNotTakeIsNamedByItsPath() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let response = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3, "altitude": 1400}}"#,
                token: ada.token)
            #expect(response.status == .unprocessableContent)
            #expect(response.fieldCodes == ["location.altitude": "unknown_field"], "\(response)")
            let fine = try await client.send(
                .post, "/v1/rentals",
                raw: #"{"title": "Drill", "category": "tools", "dailyPriceCents": 500, "location": {"lat": 27.7, "lng": 85.3, "place": "Patan"}}"#,
                token: ada.token)
            #expect(fine.status == .created, "\(fine)")
        }
    }
}
