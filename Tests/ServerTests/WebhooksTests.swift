import Crypto
import EventStore
import Foundation
import HTTPTypes
import Postgres
import ServerTestSupport
import Testing
import TestSupport
import UseCases

#if canImport(Glibc)
import Glibc
#endif

/// Webhooks (SPEC §12.6), through a real `lender serve` and a real receiver (an HTTP server in
/// this process, `WebhookReceiver`): what the tests read is what the receiver was sent.
@Suite("Webhooks to a real receiver", .serialized)
struct WebhooksTests {
    /// A delivery's body, as a receiver reads it.
    struct DeliveredEvent: Decodable, Sendable {
        var id: String
        var position: Int64
        var type: String
        var stream: String
        var occurredAt: Date
        var data: JSONValue
    }

    struct WebhookList: Decodable, Sendable {
        var data: [WebhookResource]
    }

    /// A server that may post to the receiver (127.0.0.1, listed by address), retrying each
    /// second so that the tests need not wait.
    func server(_ database: PostgresConfiguration, _ environment: [String: String] = [:]) async throws -> ServerProcess {
        try await ServerProcess(
            database: database,
            environment: [
                "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1", "WEBHOOK_RETRY_SECONDS": "1", "WEBHOOK_RETRY_MAX_SECONDS": "1",
                "WEBHOOK_TIMEOUT_SECONDS": "2",
            ].merging(environment) { $1 })
    }

    /// `desk`, registered and made an operator: its token.
    func operatorToken(_ lender: ServerProcess, _ admin: PostgresPool) async throws -> String {
        let desk = try await lender.user("desk")
        _ = try runLender(["users", "grant-operator", "desk"], database: try await ownerURL(admin))
        return desk.token
    }

    func register(
        _ lender: ServerProcess, _ token: String, _ url: String, types: [String] = ["*"], position: Int64? = 0
    ) async throws -> CreatedWebhook {
        let reply = try await lender.send(
            .post, "/v1/admin/webhooks", body: API.WebhookBody(url: url, types: types, position: position), token: token)
        #expect(reply.status == .created, "\(reply)")
        return try reply.decode(CreatedWebhook.self)
    }

    func endpoint(_ lender: ServerProcess, _ token: String, _ id: UUID) async throws -> WebhookResource? {
        try await lender.send(.get, "/v1/admin/webhooks", token: token).decode(WebhookList.self).data.first { $0.id == id }
    }

    /// Waits until `condition` holds of the endpoint as the server lists it; the last read.
    func endpoint(
        _ lender: ServerProcess, _ token: String, _ id: UUID, until condition: (WebhookResource) -> Bool
    ) async throws -> WebhookResource? {
        var last: WebhookResource?
        for _ in 0..<150 {
            last = try await endpoint(lender, token, id)
            if let last, condition(last) { return last }
            try await Task.sleep(for: .milliseconds(200))
        }
        return last
    }

    /// The positions of the log's events, of `types` only when given, in order.
    func positions(_ admin: PostgresPool, types: [String]? = nil) async throws -> [Int64] {
        let rows: PostgresRows
        if let types {
            rows = try await admin.query("SELECT position FROM events WHERE type = ANY (\(types)) ORDER BY position")
        } else {
            rows = try await admin.query("SELECT position FROM events ORDER BY position")
        }
        return try rows.map { try $0.decode("position", as: Int64.self) }
    }

    /// The delivery's event, once its signature is checked as a receiver checks it: HMAC-SHA-256
    /// of `t.body` keyed by the secret, with the headers the contract names.
    func verified(_ delivery: WebhookReceiver.Delivery, secret: String) throws -> DeliveredEvent {
        let signature = try #require(delivery.header("Lender-Signature"), "\(delivery.headers)")
        var parts: [String: String] = [:]
        for part in signature.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { parts[String(pair[0])] = String(pair[1]) }
        }
        let time = try #require(parts["t"], "\(signature)")
        var code = HMAC<SHA256>(key: SymmetricKey(data: Data(secret.utf8)))
        code.update(data: Data("\(time).".utf8))
        code.update(data: delivery.body)
        let expected = code.finalize().map { String(format: "%02x", $0) }.joined()
        #expect(parts["v1"] == expected, "a signature that does not verify: \(signature)")
        let seconds = try #require(Int(time))
        #expect(abs(seconds - Int(Date().timeIntervalSince1970)) < 600, "t is the time of sending: \(time)")
        let event = try JSONDecoder.lender().decode(DeliveredEvent.self, from: delivery.body)
        #expect(delivery.header("Lender-Event-Position") == String(event.position))
        #expect(delivery.header("Content-Type") == "application/json")
        #expect(delivery.header("User-Agent")?.isEmpty == false)
        return event
    }

    /// Waits until `name` has been sent every event of the log (of `types`); what it was sent.
    func everyEvent(
        _ receiver: WebhookReceiver, _ name: String, secret: String, _ admin: PostgresPool, types: [String]? = nil
    ) async throws -> [DeliveredEvent] {
        for _ in 0..<150 {
            let expected = try await positions(admin, types: types)
            let events = try receiver.deliveries(name).map { try verified($0, secret: secret) }
            if Set(events.map { $0.position }).isSuperset(of: expected) { return events }
            try await Task.sleep(for: .milliseconds(200))
        }
        return try receiver.deliveries(name).map { try verified($0, secret: secret) }
    }

    /// In log order: a repeat (at least once) may come again, never an earlier event after a later.
    func inLogOrder(_ events: [DeliveredEvent]) -> Bool {
        zip(events, events.dropFirst()).allSatisfy { $0.position <= $1.position }
    }

    @Test func aReceiverGetsEveryEventOfItsTypesInLogOrderSignedAndSealed() async throws {
        try await withServerDatabase { database, admin in
            try await WebhookReceiver.run { receiver in
                let lender = try await server(database)
                defer { lender.kill(SIGTERM) }
                let token = try await operatorToken(lender, admin)
                let all = try await register(lender, token, receiver.url("all"))
                let some = try await register(lender, token, receiver.url("some"), types: ["ProfileUpdated", "ProfileUpdated"])
                #expect(some.types == ["ProfileUpdated"], "named twice, kept once")
                #expect(all.secret.count == 64 && all.secret.allSatisfy { $0.isHexDigit } && all.secret != some.secret)

                // Personal data: e-mail addresses and display names, at registration and changed.
                for handle in ["ada", "bob", "cyd"] {
                    let user = try await lender.user(handle)
                    let changed = try await lender.send(
                        .patch, "/v1/me", body: API.ProfileBody(displayName: "Hidden \(handle) Name"), token: user.token)
                    #expect(changed.status == .ok, "\(changed)")
                }

                let everything = try await everyEvent(receiver, "all", secret: all.secret, admin)
                let expected = try await positions(admin)
                #expect(Set(everything.map { $0.position }) == Set(expected))
                #expect(inLogOrder(everything), "\(everything.map { $0.position })")
                let profiles = try await everyEvent(receiver, "some", secret: some.secret, admin, types: ["ProfileUpdated"])
                let profileChanges = try await positions(admin, types: ["ProfileUpdated"])
                #expect(Set(profiles.map { $0.position }) == Set(profileChanges))
                #expect(profiles.count >= 3 && profiles.allSatisfy { $0.type == "ProfileUpdated" }, "\(profiles.map { $0.type })")
                #expect(inLogOrder(profiles))
                // Each event is one id, whichever time it was sent; one event, one id.
                let ids = Dictionary(grouping: everything, by: { $0.position }).mapValues { Set($0.map { $0.id }) }
                #expect(ids.values.allSatisfy { $0.count == 1 })
                #expect(Set(ids.values.flatMap { $0 }).count == Set(expected).count)
                #expect(everything.contains { $0.type == "UserRegistered" && $0.stream.hasPrefix("user") })

                // Never personal data in clear: the addresses and the names are sealed, as auditors read them.
                for delivery in receiver.deliveries("all") + receiver.deliveries("some") {
                    #expect(!delivery.text.contains("@example.org"), "an e-mail address in clear: \(delivery.text)")
                    #expect(!delivery.text.contains("Hidden "), "a display name in clear: \(delivery.text)")
                }

                // The list says how far each has got, and never shows a secret.
                let listed = try await lender.send(.get, "/v1/admin/webhooks", token: token)
                #expect(listed.status == .ok, "\(listed)")
                #expect(!listed.text.contains(all.secret) && !listed.text.contains(some.secret))
                #expect(!listed.text.contains("\"secret\""), "\(listed)")
                let done = try await endpoint(lender, token, all.id) { $0.position == expected.last }
                #expect(done?.position == expected.last, "\(String(describing: done))")
                #expect(done.map { $0.delivered >= Int64(expected.count) && $0.attempts == 0 && $0.deadLetters == 0 } == true)
            }
        }
    }

    @Test func aReceiverThatFailsForAWhileGetsEveryEventInOrderOnceItRecovers() async throws {
        try await withServerDatabase { database, admin in
            try await WebhookReceiver.run { receiver in
                let lender = try await server(database, ["WEBHOOK_MAX_ATTEMPTS": "50"])
                defer { lender.kill(SIGTERM) }
                let token = try await operatorToken(lender, admin)
                receiver.answer("flaky", with: .status(500))
                let flaky = try await register(lender, token, receiver.url("flaky"))
                for handle in ["ada", "bob"] { _ = try await lender.user(handle) }

                // It fails: the first event is tried again and again, the later ones wait behind it.
                let failing = try await receiver.wait(for: "flaky") { $0.count >= 4 }
                #expect(failing.count >= 4)
                let tried = try failing.map { try verified($0, secret: flaky.secret).position }
                #expect(Set(tried).count == 1, "only the first event is tried while it fails: \(tried)")
                let stuck = try await endpoint(lender, token, flaky.id)
                #expect(stuck.map { $0.attempts >= 1 && $0.lastError?.contains("500") == true && $0.nextAttemptAt != nil } == true,
                    "\(String(describing: stuck))")

                receiver.answer("flaky", with: .ok)
                let events = try await everyEvent(receiver, "flaky", secret: flaky.secret, admin)
                let logged = try await positions(admin)
                #expect(Set(events.map { $0.position }) == Set(logged))
                #expect(inLogOrder(events), "\(events.map { $0.position })")
                let mended = try await endpoint(lender, token, flaky.id) { $0.attempts == 0 }
                #expect(mended?.attempts == 0 && mended?.deadLetters == 0 && mended?.lastError == nil, "\(String(describing: mended))")
            }
        }
    }

    @Test func anEventTriedTheLastTimeIsDeadLetteredTheEndpointMovesOnAndAnOperatorReplaysIt() async throws {
        try await withServerDatabase { database, admin in
            try await WebhookReceiver.run { receiver in
                let lender = try await server(database, ["WEBHOOK_MAX_ATTEMPTS": "3"])
                defer { lender.kill(SIGTERM) }
                let token = try await operatorToken(lender, admin)
                let ada = try await lender.user("ada")
                receiver.answer("dead", with: .status(503))
                // From now on (the log's head), profile changes only.
                let dead = try await register(lender, token, receiver.url("dead"), types: ["ProfileUpdated"], position: nil)
                let first = try await lender.send(.patch, "/v1/me", body: API.ProfileBody(displayName: "One"), token: ada.token)
                #expect(first.status == .ok, "\(first)")
                let lost = try #require(try await positions(admin, types: ["ProfileUpdated"]).last)
                #expect(dead.position < lost)

                let given = try await endpoint(lender, token, dead.id) { $0.deadLetters == 1 }
                #expect(given?.deadLetters == 1 && given?.position == lost && given?.attempts == 0, "\(String(describing: given))")
                #expect(receiver.deliveries("dead").count == 3, "three tries, then no more")
                let letter = try await admin.query(
                    "SELECT position, event_type, attempts, last_error FROM webhook_dead_letters WHERE webhook_id = \(dead.id)"
                ).single()
                #expect(try letter.decode("position", as: Int64.self) == lost)
                #expect(try letter.decode("event_type", as: String.self) == "ProfileUpdated")
                #expect(try letter.decode("attempts", as: Int.self) == 3)
                #expect(try letter.decode("last_error", as: String.self).contains("503"))

                // The receiver mended, the next event goes; the dead one is not sent again by itself.
                receiver.answer("dead", with: .ok)
                let second = try await lender.send(.patch, "/v1/me", body: API.ProfileBody(displayName: "Two"), token: ada.token)
                #expect(second.status == .ok, "\(second)")
                let next = try #require(try await positions(admin, types: ["ProfileUpdated"]).last)
                let after = try await receiver.wait(for: "dead") { $0.count >= 4 }
                #expect(try after.map { try verified($0, secret: dead.secret).position } == [lost, lost, lost, next])

                // Resumable by position: an operator replays from before the lost one.
                let stranger = try await lender.send(
                    .post, "/v1/admin/webhooks/\(dead.id)/position", body: API.WebhookPositionBody(position: lost - 1), token: ada.token)
                #expect(stranger.status == .forbidden && stranger.code == "not_operator", "\(stranger)")
                let beyond = try await lender.send(
                    .post, "/v1/admin/webhooks/\(dead.id)/position", body: API.WebhookPositionBody(position: Int64.max), token: token)
                #expect(beyond.status == .unprocessableContent && beyond.fieldCodes["position"] == "beyond_head", "\(beyond)")
                let rewound = try await lender.send(
                    .post, "/v1/admin/webhooks/\(dead.id)/position", body: API.WebhookPositionBody(position: lost - 1), token: token)
                #expect(rewound.status == .ok, "\(rewound)")
                #expect(try rewound.decode(WebhookResource.self).position == lost - 1)
                let replayed = try await receiver.wait(for: "dead") { $0.count >= 6 }
                #expect(try replayed.map { try verified($0, secret: dead.secret).position } == [lost, lost, lost, next, lost, next])
            }
        }
    }

    @Test func aRedirectIsNotFollowed() async throws {
        try await withServerDatabase { database, admin in
            try await WebhookReceiver.run { receiver in
                let lender = try await server(database)
                defer { lender.kill(SIGTERM) }
                let token = try await operatorToken(lender, admin)
                receiver.answer("moved", with: .redirect(to: receiver.url("elsewhere")))
                let moved = try await register(lender, token, receiver.url("moved"))
                let tries = try await receiver.wait(for: "moved") { $0.count >= 2 }
                #expect(tries.count >= 2, "a 302 is a failure, tried again")
                let failing = try await endpoint(lender, token, moved.id) { $0.attempts >= 1 }
                #expect(failing?.lastError?.contains("302") == true, "\(String(describing: failing))")
                #expect(failing?.delivered == 0)
                #expect(receiver.deliveries("elsewhere").isEmpty, "the redirect's target is never asked")
            }
        }
    }

    @Test func aReceiverThatNeverAnswersTimesOutHoldsFewConnectionsAndHoldsUpNoOtherEndpoint() async throws {
        try await withServerDatabase { database, admin in
            try await WebhookReceiver.run { receiver in
                let lender = try await server(database, ["WEBHOOK_TIMEOUT_SECONDS": "1", "WEBHOOK_CONCURRENCY": "2"])
                defer { lender.kill(SIGTERM) }
                let token = try await operatorToken(lender, admin)
                let silent = ["silent1", "silent2", "silent3"]
                for name in silent { receiver.answer(name, with: .hang) }
                var hanging: [CreatedWebhook] = []
                for name in silent { hanging.append(try await register(lender, token, receiver.url(name))) }
                let fast = try await register(lender, token, receiver.url("fast"))

                // For a while, each silent endpoint is tried again and again, each try given up
                // after its timeout: the sender's connections to the receiver stay a handful,
                // the server answers, and new events reach the endpoint that answers.
                var most = 0
                let clock = ContinuousClock()
                let started = clock.now
                var user = 0
                while clock.now - started < .seconds(8) {
                    most = max(most, receiver.openConnections)
                    if user < 3 {
                        user += 1
                        _ = try await lender.user("user\(user)")
                    }
                    try await Task.sleep(for: .milliseconds(100))
                }
                let tries = silent.map { receiver.deliveries($0).count }
                #expect(tries.allSatisfy { $0 >= 2 }, "each silent endpoint tried again after its timeout: \(tries)")
                #expect(most >= 1, "the silent endpoints were being tried")
                #expect(most <= silent.count + 1, "at most one connection an endpoint at once, \(most) seen after \(tries) tries")
                let events = try await everyEvent(receiver, "fast", secret: fast.secret, admin)
                let logged = try await positions(admin)
                #expect(Set(events.map { $0.position }) == Set(logged), "the answering endpoint got every event")
                for webhook in hanging {
                    let failing = try await endpoint(lender, token, webhook.id)
                    #expect(failing.map { $0.attempts >= 1 && $0.lastError != nil && $0.delivered == 0 } == true, "\(String(describing: failing))")
                }

                // Stopped, they leave no connection behind.
                for webhook in hanging {
                    #expect(try await lender.send(.delete, "/v1/admin/webhooks/\(webhook.id)", token: token).status == .noContent)
                }
                var open = receiver.openConnections
                for _ in 0..<50 where open > 0 {
                    try await Task.sleep(for: .milliseconds(100))
                    open = receiver.openConnections
                }
                #expect(open == 0, "connections to the receiver left open: \(open)")
            }
        }
    }

    @Test func aDeletedEndpointIsSentNothingMore() async throws {
        try await withServerDatabase { database, admin in
            try await WebhookReceiver.run { receiver in
                let lender = try await server(database)
                defer { lender.kill(SIGTERM) }
                let token = try await operatorToken(lender, admin)
                let stranger = try await lender.user("ada")
                let gone = try await register(lender, token, receiver.url("gone"))
                let witness = try await register(lender, token, receiver.url("witness"))
                _ = try await everyEvent(receiver, "gone", secret: gone.secret, admin)
                let before = receiver.deliveries("gone").count

                let refused = try await lender.send(.delete, "/v1/admin/webhooks/\(gone.id)", token: stranger.token)
                #expect(refused.status == .forbidden && refused.code == "not_operator", "\(refused)")
                #expect(try await lender.send(.delete, "/v1/admin/webhooks/\(gone.id)", token: token).status == .noContent)
                let again = try await lender.send(.delete, "/v1/admin/webhooks/\(gone.id)", token: token)
                #expect(again.status == .notFound && again.code == "webhook_not_found", "\(again)")
                #expect(try await endpoint(lender, token, gone.id) == nil, "no longer listed")

                // New events: the witness gets them all; the deleted endpoint none.
                for handle in ["bob", "cyd"] { _ = try await lender.user(handle) }
                _ = try await everyEvent(receiver, "witness", secret: witness.secret, admin)
                try await Task.sleep(for: .seconds(1))
                let after = receiver.deliveries("gone").count
                #expect(after == before, "\(before) before, \(after) after")
            }
        }
    }

    @Test func onlyOperatorsManageWebhooks() async throws {
        try await withServerDatabase { database, admin in
            let lender = try await server(database)
            defer { lender.kill(SIGTERM) }
            let ada = try await lender.user("ada")
            let body = API.WebhookBody(url: "http://127.0.0.1:9/hooks/a", types: ["*"])
            let post = try await lender.send(.post, "/v1/admin/webhooks", body: body, token: ada.token)
            let list = try await lender.send(.get, "/v1/admin/webhooks", token: ada.token)
            let delete = try await lender.send(.delete, "/v1/admin/webhooks/\(UUID())", token: ada.token)
            let move = try await lender.send(
                .post, "/v1/admin/webhooks/\(UUID())/position", body: API.WebhookPositionBody(position: 0), token: ada.token)
            for reply in [post, list, delete, move] {
                #expect(reply.status == .forbidden && reply.code == "not_operator", "\(reply)")
            }
            #expect(try await lender.send(.get, "/v1/admin/webhooks").status == .unauthorized)
            #expect(try await count(admin, "SELECT count(*) FROM webhooks") == 0)

            // An operator's mistakes, each named.
            let token = try await operatorToken(lender, admin)
            let cases: [([String: Any], String, String)] = [
                (["types": ["*"]], "url", "required"),
                (["url": "http://127.0.0.1:9/"], "types", "required"),
                (["url": "http://127.0.0.1:9/", "types": [String]()], "types", "invalid_types"),
                (["url": "http://127.0.0.1:9/", "types": ["NoSuchEvent"]], "types[0]", "unknown_type"),
                (["url": "ftp://127.0.0.1/", "types": ["*"]], "url", "invalid_url"),
                (["url": "http://user:secret@127.0.0.1:9/", "types": ["*"]], "url", "invalid_url"),
                // A port past 65535 once stopped the whole server at its first send.
                (["url": "http://127.0.0.1:70000/", "types": ["*"]], "url", "invalid_url"),
                (["url": "http://127.0.0.1:0/", "types": ["*"]], "url", "invalid_url"),
                (["url": "http://127.0.0.1:9/", "types": ["*"], "position": -1], "position", "invalid_position"),
                (["url": "http://127.0.0.1:9/", "types": ["*"], "position": 1_000_000], "position", "beyond_head"),
            ]
            for (json, field, code) in cases {
                let reply = try await lender.send(.post, "/v1/admin/webhooks", json: json, token: token)
                #expect(reply.status == .unprocessableContent && reply.fieldCodes[field] == code, "\(json): \(reply)")
            }
            #expect(try await count(admin, "SELECT count(*) FROM webhooks") == 0)
            let missing = try await lender.send(.delete, "/v1/admin/webhooks/\(UUID())", token: token)
            #expect(missing.status == .notFound && missing.code == "webhook_not_found", "\(missing)")
        }
    }

    /// SSRF: only hosts the list allows; loopback, link-local (the metadata service) and the
    /// private ranges only when a host is listed by name, never through a wildcard; and the
    /// check holds at every send, not only at registration.
    @Test func onlyAllowedHostsAndNoPrivateAddressesThroughAWildcard() async throws {
        try await withServerDatabase { database, admin in
            try await WebhookReceiver.run { receiver in
                // Listed by name: other hosts are refused, the receiver's loopback address too.
                let listed = try await server(database, ["WEBHOOK_ALLOWED_HOSTS": "hooks.lender.test"])
                let token = try await operatorToken(listed, admin)
                for url in [receiver.url("x"), "http://169.254.169.254/latest/meta-data/", "https://other.lender.test/hooks"] {
                    let reply = try await listed.send(
                        .post, "/v1/admin/webhooks", body: API.WebhookBody(url: url, types: ["*"]), token: token)
                    #expect(reply.status == .unprocessableContent && reply.code == "host_not_allowed", "\(url): \(reply)")
                    #expect(reply.fieldCodes["url"] == "host_not_allowed", "\(url): \(reply)")
                }
                #expect(try await count(admin, "SELECT count(*) FROM webhooks") == 0, "nothing written")
                listed.kill(SIGTERM)
                _ = await listed.waitForExit()

                // A listed name that resolves to this machine: refused (a partner's DNS must not
                // turn the sender inward); only a listed address reaches loopback.
                let named = try await server(database, ["WEBHOOK_ALLOWED_HOSTS": "localhost"])
                let inward = try await named.send(
                    .post, "/v1/admin/webhooks", body: API.WebhookBody(url: "http://localhost:\(receiver.port)/hooks/x", types: ["*"]),
                    token: token)
                #expect(inward.status == .unprocessableContent && inward.code == "host_not_allowed", "\(inward)")
                named.kill(SIGTERM)
                _ = await named.waitForExit()

                // Registered while 127.0.0.1 was listed (and failing, so that nothing arrives yet).
                receiver.answer("x", with: .status(500))
                let allowing = try await server(database)
                let registered = try await register(allowing, token, receiver.url("x"))
                _ = try await receiver.wait(for: "x") { !$0.isEmpty }
                allowing.kill(SIGTERM)
                _ = await allowing.waitForExit()

                // Any public host: loopback, link-local, private, unspecified and multicast
                // addresses are refused, whatever spelling reaches them.
                let wildcard = try await server(database, ["WEBHOOK_ALLOWED_HOSTS": "*"])
                defer { wildcard.kill(SIGTERM) }
                let refused = [
                    receiver.url("x"), "http://localhost:\(receiver.port)/hooks/x", "http://[::1]:\(receiver.port)/hooks/x",
                    "http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/", "http://172.16.0.1/", "http://192.168.1.1/",
                    "http://0.0.0.0:\(receiver.port)/", "http://[fe80::1]/", "http://[fd00::1]/", "http://224.0.0.1/",
                ]
                for url in refused {
                    let reply = try await wildcard.send(
                        .post, "/v1/admin/webhooks", body: API.WebhookBody(url: url, types: ["*"]), token: token)
                    #expect(reply.status == .unprocessableContent && reply.code == "host_not_allowed", "\(url): \(reply)")
                }
                // 127.0.0.1 spelled as one number: refused, whether the resolver reads it as that
                // address (as glibc does) or not at all.
                let spelled = try await wildcard.send(
                    .post, "/v1/admin/webhooks", body: API.WebhookBody(url: "http://2130706433:\(receiver.port)/hooks/x", types: ["*"]),
                    token: token)
                #expect(
                    spelled.status == .unprocessableContent && ["host_not_allowed", "host_unresolvable"].contains(spelled.code ?? ""),
                    "\(spelled)")
                #expect(try await count(admin, "SELECT count(*) FROM webhooks") == 1, "only the one registered before")

                // At send time too: the endpoint registered before is refused before any connection.
                receiver.answer("x", with: .ok)
                let sentBefore = receiver.deliveries("x").count
                _ = try await wildcard.user("ada")
                let refusedAtSend = try await endpoint(wildcard, token, registered.id) {
                    $0.lastError?.contains("host_not_allowed") == true
                }
                #expect(refusedAtSend?.lastError?.contains("host_not_allowed") == true, "\(String(describing: refusedAtSend))")
                #expect(receiver.deliveries("x").count == sentBefore, "nothing reaches a host the list no longer allows")
            }
        }
    }
}

