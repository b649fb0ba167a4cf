import Foundation
import Marketplace
import Testing
import UUIDs

@Suite("User decider")
struct UserDeciderTests {
    let me = UserID()

    func register(
        handle: String = "ada_99", email: String = "Ada@Example.org", password: String = "correct horse", country: String? = "NP"
    ) -> UserCommand {
        .register(userID: me, handle: handle, displayName: "Ada", email: email, password: password, country: country)
    }

    var registered: [UserEvent] {
        [.registered(UserRegistered(userID: me, handle: "ada_99", displayName: "Ada", email: "ada@example.org", country: "NP"))]
    }

    @Test func lookAlikeNamesAreFoldedAndMarkFloodsRefused() throws {
        let named = { (name: String) in
            given(.user).when(.register(userID: me, handle: "ada_99", displayName: name, email: "a@example.org", password: "correct horse", country: nil))
        }
        // Full-width letters, a ligature, a superscript: stored as they read (NFKC).
        guard case .registered(let folded) = try named("Ｂｏｂ ﬁsh²").thenEvents().first else { Issue.record("not registered"); return }
        #expect(folded.displayName == "Bob fish2")
        // A letter under a flood of combining marks is one character, and refused.
        let flood = "Z" + String(repeating: "\u{0301}", count: 60)
        #expect(flood.count == 1)
        let error = try named(flood).thenError()
        #expect(error.fields.map(\.code) == ["invalid_display_name"])
        // Four marks on a letter (a script's vowels and tones) are a name.
        named("Nguyễn Thị " + "a\u{0300}\u{0301}\u{0302}\u{0303}").thenAccepted()
        // A fold that makes a name longer than 80 characters is refused, not stored long.
        #expect(named(String(repeating: "\u{337F}", count: 30)).error != nil, "㍿ folds to four letters")
    }

    @Test func registrationKeepsNoPassword() throws {
        let events = try given(.user).when(register()).thenEvents()
        #expect(events == registered)
        #expect(!String(describing: events).contains("correct horse"))
    }

    @Test func handleRules() {
        for bad in ["ab", String(repeating: "a", count: 33), "Ada", "ada-99", "ada 99", "ädä"] {
            // Refused for the handle alone (were it accepted, there would be no codes to match).
            #expect(given(.user).when(register(handle: bad)).error?.fields.map(\.code) == ["invalid_handle"], "\(bad)")
        }
        given(.user).when(register(handle: "abc")).thenAccepted()
        given(.user).when(register(handle: String(repeating: "z", count: 32))).thenAccepted()
    }

    @Test func everyInvalidFieldAtOnce() throws {
        let error = try given(.user).when(register(handle: "x", email: "not-an-email", password: "short", country: "Nepal")).thenError()
        #expect(error.kind == .invalid)
        #expect(error.fields.map(\.code) == ["invalid_handle", "invalid_email", "invalid_password", "invalid_country"])
    }

    @Test func passwordLengthBounds() {
        #expect(given(.user).when(register(password: String(repeating: "p", count: 9))).error != nil)
        given(.user).when(register(password: String(repeating: "p", count: 10))).thenAccepted()
        given(.user).when(register(password: String(repeating: "p", count: 128))).thenAccepted()
        #expect(given(.user).when(register(password: String(repeating: "p", count: 129))).error != nil)
    }

    @Test func emailShapes() {
        for good in ["a@b.co", "first.last+tag@sub.example.org"] { #expect(UserDecider.isValidEmail(good), "\(good)") }
        for bad in ["", "a@b", "@b.co", "a@.co", "a b@c.co", "a@b..co", "a@@b.co"] { #expect(!UserDecider.isValidEmail(bad), "\(bad)") }
    }

    @Test func aUserRegistersOnce() {
        given(.user, registered).when(register()).thenRefused("user_exists")
    }

    @Test func defaultShareIsOneOfFourSizes() throws {
        let error = try given(.user, registered).when(.updateProfile(displayName: nil, country: nil, defaultShareCents: 3000)).thenError()
        #expect(error.fields.map(\.code) == ["invalid_share"])
        let events = try given(.user, registered).when(.updateProfile(displayName: nil, country: nil, defaultShareCents: 5000)).thenEvents()
        #expect(given(.user, registered + events).state.defaultShareCents == 5000)
        let empty = try given(.user, registered).when(.updateProfile(displayName: nil, country: nil, defaultShareCents: nil)).thenError()
        #expect(empty.fields.map(\.code) == ["nothing_to_change"])
    }

    @Test func blockingIsNotForOneselfAndIsIdempotent() throws {
        let other = UserID()
        given(.user, registered).when(.block(me)).thenRefused("cannot_block_self")
        let blocked = try given(.user, registered).when(.block(other)).thenEvents()
        #expect(blocked == [.blocked(UserBlocked(userID: other))])
        given(.user, registered + blocked).when(.block(other)).then([])
        #expect(given(.user, registered + blocked).state.blocked == [other])
        let unblocked = try given(.user, registered + blocked).when(.unblock(other)).thenEvents()
        #expect(given(.user, registered + blocked + unblocked).state.blocked.isEmpty)
        given(.user, registered).when(.unblock(other)).then([])
    }
}

@Suite("Values")
struct ValueTests {
    @Test func daysAreRealDates() {
        #expect(Day("2026-02-28") != nil)
        #expect(Day("2026-02-29") == nil)
        #expect(Day("2028-02-29") != nil)
        #expect(Day("2026-13-01") == nil)
        #expect(Day("2026-1-01") == nil)
        #expect(Day("26-01-01") == nil)
        #expect(Day("2026-01-01")!.description == "2026-01-01")
        #expect(Day("2026-01-31")! < Day("2026-02-01")!)
    }

    @Test func daysAndIdsEncodeAsPlainStrings() throws {
        let value = BidPlaced(bidID: BidID(), bidderID: UserID(), dailyPriceCents: 1, from: Day("2026-12-01")!, until: Day("2026-12-02")!, message: nil)
        let json = String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
        #expect(json.contains("\"from\":\"2026-12-01\""))
        #expect(json.contains("\"bidID\":\"\(value.bidID.rawValue.uuidString.lowercased())\""))
        #expect(try JSONDecoder().decode(BidPlaced.self, from: Data(json.utf8)) == value)
    }
}

@Suite("Identifiers as text")
struct IdentifierTextTests {
    @Test func lowercaseTextIsTheLowercasedUUIDString() {
        for _ in 0..<1000 {
            let uuid = UUID()
            #expect(uuid.lowercaseText == uuid.uuidString.lowercased())
            #expect(UserID(uuid).description == uuid.uuidString.lowercased())
        }
        let zero = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        #expect(zero.lowercaseText == "00000000-0000-0000-0000-000000000000")
        let max = UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255))
        #expect(max.lowercaseText == "ffffffff-ffff-ffff-ffff-ffffffffffff")
    }

    @Test func textReadsWhatFoundationReadsAndNothingElse() throws {
        for _ in 0..<1000 {
            let uuid = UUID()
            #expect(UUID(text: uuid.uuidString) == uuid)
            #expect(UUID(text: uuid.lowercaseText) == uuid)
            #expect(UUID(text: "item-\(uuid.lowercaseText)".dropFirst(5)) == uuid, "a stream name's tail")
        }
        let good = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
        var hostile = [
            "", good.uppercased(), String(good.dropLast()), good + "0", "{\(good)}", " \(good)", good.replacingOccurrences(of: "-", with: ""),
            good.replacingOccurrences(of: "0f", with: "0g"), good.replacingOccurrences(of: "-4b", with: "4-b"),
            good.replacingOccurrences(of: "0f", with: "0\u{0}"), good.replacingOccurrences(of: "0f", with: "é"),
            good.replacingOccurrences(of: "-", with: "_"), String(repeating: "-", count: 36),
        ]
        for index in good.indices { hostile.append(good.replacingCharacters(in: index...index, with: "z")) }
        for text in hostile { #expect(UUID(text: text) == UUID(uuidString: text), "\(text.debugDescription)") }

        // An identifier decodes as Foundation decodes a UUID: the same value, the same error.
        struct Typed: Decodable { var id: UserID }
        struct Plain: Decodable { var id: UUID }
        let decoder = JSONDecoder()
        #expect(try decoder.decode(Typed.self, from: Data(#"{"id":"\#(good)"}"#.utf8)).id.rawValue == UUID(uuidString: good))
        func failure(_ result: Result<some Any, any Error>) -> String {
            if case .failure(let error) = result { "\(error)" } else { "decoded" }
        }
        for body in [#"{"id":"nope"}"#, #"{"id":12}"#, #"{"id":null}"#, #"{}"#] {
            let data = Data(body.utf8)
            let typed = failure(Result { try decoder.decode(Typed.self, from: data) })
            #expect(typed != "decoded")
            #expect(typed == failure(Result { try decoder.decode(Plain.self, from: data) }), "\(body)")
        }
    }

    @Test func randomUUIDsAreVersionFourAndDistinct() {
        var seen = Set<UUID>()
        var bitsSeen = [Int](repeating: 0, count: 128)
        for _ in 0..<10_000 {
            let uuid = UUID.random()
            seen.insert(uuid)
            let text = uuid.lowercaseText
            // xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx, as Foundation reads it back.
            #expect(Array(text)[14] == "4")
            #expect("89ab".contains(Array(text)[19]))
            #expect(UUID(uuidString: text) == uuid)
            withUnsafeBytes(of: uuid.uuid) { bytes in
                for bit in 0..<128 where bytes[bit / 8] & (1 << (bit % 8)) != 0 { bitsSeen[bit] += 1 }
            }
        }
        #expect(seen.count == 10_000)
        // The 122 random bits each set about half the time (never stuck); the 6 fixed ones always or never.
        let fixed: Set<Int> = [52, 53, 54, 55, 70, 71]
        for bit in 0..<128 where !fixed.contains(bit) { #expect((4_000...6_000).contains(bitsSeen[bit]), "bit \(bit)") }
        #expect(bitsSeen[54] == 10_000 && bitsSeen[52] == 0 && bitsSeen[53] == 0 && bitsSeen[55] == 0)
        #expect(bitsSeen[71] == 10_000 && bitsSeen[70] == 0)
    }
}
