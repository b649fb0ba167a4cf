import Foundation
import HummingbirdTesting
import Marketplace
import Postgres
import ServerTestSupport
import Testing
import TestSupport
@testable import Projections

/// Search a renter would call good (SPEC §12.7, issue 55): the title and the description,
/// accents and case folded, a typo forgiven, relevance, the orders by value, facets.
@Suite("Search")
struct SearchTests {
    let kathmandu = (27.7172, 85.3240)

    func rental(
        _ client: any TestClientProtocol, _ token: String, _ title: String, description: String = "", category: String = "tools",
        price: Int = 1000
    ) async throws -> ItemID {
        let reply = try await client.send(
            .post, "/v1/rentals",
            body: API.RentalBody(
                title: title, description: description, category: try #require(API.Category(rawValue: category), "a category: \(category)"),
                dailyPriceCents: price, location: API.LocationInput(lat: kathmandu.0, lng: kathmandu.1, place: "Thamel")
            ), token: token)
        #expect(reply.status == .created, "\(reply)")
        return try reply.decode(ItemResource.self).id
    }

    func titles(_ client: any TestClientProtocol, _ query: String, _ token: String) async throws -> [String] {
        let reply = try await client.send(.get, "/v1/market?\(query)", token: token)
        #expect(reply.status == .ok, "\(query): \(reply)")
        return try reply.decode(Page<ItemResource>.self).data.map(\.title)
    }

    @Test func wordsOfTheDescriptionAccentsAndATypoFindWhatARenterMeans() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            _ = try await rental(client, ada.token, "Makita drill", description: "Cordless, two batteries and a case")
            _ = try await rental(client, ada.token, "Perçeuse Bosch", description: "Une perceuse à percussion")
            _ = try await rental(client, ada.token, "Garden hose", description: "Twenty metres", category: "sports")

            // A word of the description and one of the title: both must be there, in either.
            #expect(try await titles(client, "q=cordless%20drill", ada.token) == ["Makita drill"])
            #expect(try await titles(client, "q=cordless%20hose", ada.token) == [])
            // Accents and case folded both ways, and a word begun finds the word.
            #expect(try await titles(client, "q=perceuse", ada.token) == ["Perçeuse Bosch"])
            #expect(try await titles(client, "q=PER%C3%87EUSE", ada.token) == ["Perçeuse Bosch"])
            #expect(try await titles(client, "q=batter", ada.token) == ["Makita drill"])
            // A typo in a word of five letters or more: forgiven once the jobs have learned the
            // listings' words (a letter swapped, changed, dropped, added).
            #expect(try await titles(client, "q=drlil", ada.token) == [])
            #expect(try await SearchWords(admin).learn() > 10)
            for typo in ["drlil", "drell", "dril%20makita", "drrill", "cordles"] {
                #expect(try await titles(client, "q=\(typo)", ada.token) == ["Makita drill"], "\(typo)")
            }
            // Short words are taken as typed: "hise" is not "hose".
            #expect(try await titles(client, "q=hise", ada.token) == [])
            // Two edits is not a typo.
            #expect(try await titles(client, "q=drolel", ada.token) == [])
            #expect(try await SearchWords(admin).learn() == 0, "nothing new since")
            // Numbers are taken as typed, never spelled: "18651" is no typo of "18650".
            _ = try await rental(client, ada.token, "Battery 18650", description: "Li-ion, 3000 mAh")
            #expect(try await SearchWords(admin).learn() > 0)
            #expect(try await count(admin, "SELECT count(*) FROM search_words WHERE word ~ '^[0-9]+$'") == 0)
            #expect(try await titles(client, "q=18650", ada.token) == ["Battery 18650"])
            #expect(try await titles(client, "q=18651", ada.token) == [])
            // A word that begins known words is spelled out as them: "batter" still finds both.
            #expect(try await titles(client, "q=batter", ada.token) == ["Battery 18650", "Makita drill"])
            // A word of 300 letters is not learned, and a query word of 300 letters ("ﬃ" folds to
            // "ffi") looks for no typo: levenshtein refuses over 255, and made this a 500.
            _ = try await rental(client, ada.token, "Long", description: String(repeating: "x", count: 300))
            _ = try await SearchWords(admin).learn()
            #expect(try await count(admin, "SELECT count(*) FROM search_words WHERE length(word) > 64") == 0)
            let ligatures = String(repeating: "\u{FB03}", count: 100).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            #expect(try await titles(client, "q=\(ligatures)", ada.token) == [])
            // Found as typed, as a prefix of the word it begins (not learned, so not spelled out).
            #expect(try await titles(client, "q=\(String(repeating: "x", count: 200))", ada.token) == ["Long"])
        }
    }

    @Test func aTitleMatchRanksAboveADescriptionMatchThenTheNewest() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            _ = try await rental(client, ada.token, "Makita drill", description: "Cordless")
            _ = try await rental(client, ada.token, "Cordless lamp", description: "Bright")
            _ = try await rental(client, ada.token, "Bosch drill", description: "Cordless too")
            _ = try await rental(client, ada.token, "Cordless saw", description: "Sharp")
            // Title matches first (the newest of them first), then description matches.
            let expected = ["Cordless saw", "Cordless lamp", "Bosch drill", "Makita drill"]
            #expect(try await titles(client, "q=cordless", ada.token) == expected)
            #expect(try await titles(client, "q=cordless&sort=relevance", ada.token) == expected)
            // Newest first on request, and every order pages without a row twice or skipped.
            #expect(try await titles(client, "q=cordless&sort=newest", ada.token) == ["Cordless saw", "Bosch drill", "Cordless lamp", "Makita drill"])
            var seen: [String] = []
            var cursor: String?
            repeat {
                let query = "q=cordless&limit=1" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try await client.send(.get, "/v1/market?\(query)", token: ada.token).decode(Page<ItemResource>.self)
                seen += page.data.map(\.title)
                cursor = page.nextCursor
                // One arriving while a renter pages: it is newer, so it never lands in their pages.
                if seen.count == 2 { _ = try await rental(client, ada.token, "Cordless fan") }
            } while cursor != nil
            #expect(seen == expected)
        }
    }

    @Test func pricesAndRatingsSortAndPageAndMinRatingFilters() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let cheap = try await rental(client, ada.token, "Cheap drill", price: 300)
            let dear = try await rental(client, ada.token, "Dear drill", price: 3000)
            let middle = try await rental(client, ada.token, "Middle drill", price: 1000)
            let twin = try await rental(client, ada.token, "Twin drill", price: 1000)
            // Ratings as the reviews' projection keeps them (sum and count).
            for (item, stars, count) in [(cheap, 9, 2), (dear, 5, 1), (middle, 12, 3), (twin, 11, 10)] {
                try await admin.query(
                    "UPDATE items_view SET review_stars = \(stars), review_count = \(count) WHERE item_id = \(item.rawValue)")
            }
            func paged(_ query: String) async throws -> [String] {
                var seen: [String] = []
                var cursor: String?
                repeat {
                    let page = try await client.send(
                        .get, "/v1/market?\(query)&limit=1" + (cursor.map { "&cursor=\($0)" } ?? ""), token: ada.token)
                    #expect(page.status == .ok, "\(page)")
                    let decoded = try page.decode(Page<ItemResource>.self)
                    seen += decoded.data.map(\.title)
                    cursor = decoded.nextCursor
                } while cursor != nil && seen.count < 10
                return seen
            }
            // Ties by the newest first.
            #expect(try await paged("sort=price_asc") == ["Cheap drill", "Twin drill", "Middle drill", "Dear drill"])
            #expect(try await paged("sort=price_desc") == ["Dear drill", "Twin drill", "Middle drill", "Cheap drill"])
            // 5.0, 4.5, 4.0, 1.1.
            #expect(try await paged("sort=rating") == ["Dear drill", "Cheap drill", "Middle drill", "Twin drill"])
            // 11 stars of 10 reviews is 1.1, exactly (in float8, 1.1 * 10 is 11.000000000000002).
            #expect(try await titles(client, "minRating=1.1&sort=rating", ada.token) == ["Dear drill", "Cheap drill", "Middle drill", "Twin drill"])
            #expect(try await titles(client, "minRating=1.2&sort=rating", ada.token) == ["Dear drill", "Cheap drill", "Middle drill"])
            #expect(try await titles(client, "minRating=4.5&sort=rating", ada.token) == ["Dear drill", "Cheap drill"])
            #expect(try await titles(client, "minRating=4.6", ada.token) == ["Dear drill"])
            // A cursor of one order is refused by another.
            let first = try await client.send(.get, "/v1/market?sort=price_asc&limit=1", token: ada.token).decode(Page<ItemResource>.self)
            let cursor = try #require(first.nextCursor)
            for other in ["sort=price_desc", "sort=newest", "sort=rating", ""] {
                let refused = try await client.send(.get, "/v1/market?\(other)&cursor=\(cursor)", token: ada.token)
                #expect(refused.fieldCodes["cursor"] == "invalid_cursor", "\(other): \(refused)")
            }
        }
    }

    @Test func badQueriesAre422sNever500s() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            _ = try await rental(client, ada.token, "Makita drill", description: "Cordless")
            let long = String(repeating: "a", count: 201)
            let refusals: [(String, String, String)] = [
                ("q=\(long)", "q", "q_too_long"),
                ("sort=relevance", "sort", "relevance_needs_q"),
                ("sort=relevance&q=%21%21%21", "sort", "relevance_needs_q"),
                ("sort=cheapest", "sort", "invalid_sort"),
                ("minRating=6", "minRating", "invalid_rating"),
                ("minRating=abc", "minRating", "invalid_rating"),
                ("q=drill%00", "q", "control_character"),
            ]
            for (query, field, code) in refusals {
                let reply = try await client.send(.get, "/v1/market?\(query)", token: ada.token)
                #expect(reply.status == .unprocessableContent, "\(query): \(reply)")
                #expect(reply.fieldCodes[field] == code, "\(query): \(reply)")
            }
            // 200 characters is a query; punctuation, tsquery and SQL operators are not words.
            #expect(try await titles(client, "q=\(String(repeating: "a", count: 200))", ada.token) == [])
            for query in ["%21%21%21", "%26%7C%21%3A%2A", "drill%20%26%20%21makita", "drill%27%3B%20DROP%20TABLE%20items_view%3B--", "%3A%2A", "%28%29"] {
                let reply = try await client.send(.get, "/v1/market?q=\(query)", token: ada.token)
                #expect(reply.status == .ok, "\(query): \(reply)")
            }
            #expect(try await titles(client, "q=drill%20%26%20%21makita", ada.token) == ["Makita drill"])
            #expect(try await titles(client, "q=%27drill%27%3A%2A", ada.token) == ["Makita drill"])
            // Invalid UTF-8: refused or read as text, never a 5xx.
            for query in ["%FF%FE", "%C3%28", "dri%E2%28%A1"] {
                let reply = try await client.send(.get, "/v1/market?q=\(query)", token: ada.token)
                #expect(reply.status.code < 500, "\(query): \(reply)")
            }
            // The loans have no price or rating to sort by.
            let loans = try await client.send(.get, "/v1/loans?sort=price_asc", token: ada.token)
            #expect(loans.fieldCodes["sort"] == "invalid_sort", "\(loans)")
        }
    }

    @Test func facetsCountPerCategoryAndKindUnderEveryFilter() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            _ = try await rental(client, ada.token, "Makita drill", description: "Cordless", price: 700)
            _ = try await rental(client, ada.token, "Bosch drill", description: "Corded", price: 1500)
            _ = try await rental(client, ada.token, "Garden drill", description: "For fence posts", category: "sports", price: 900)
            _ = try await client.post(ada.token, title: "Need a drill", at: kathmandu, category: "tools", price: 800, request: true)
            _ = try await client.post(ada.token, title: "Far away drill", at: (28.6139, 77.2090), category: "tools", price: 800)

            func facets(_ query: String) async throws -> (categories: [String: Int], kinds: [String: Int]) {
                let reply = try await client.send(.get, "/v1/market/facets?\(query)", token: ada.token)
                #expect(reply.status == .ok, "\(query): \(reply)")
                let json = reply.json
                return (json["categories"] as? [String: Int] ?? [:], json["kinds"] as? [String: Int] ?? [:])
            }
            let all = try await facets("q=drill")
            #expect(all.categories["tools"] == 4 && all.categories["sports"] == 1 && all.categories["bikes"] == 0, "\(all)")
            #expect(all.kinds == ["rental": 4, "request": 1], "\(all)")
            let filtered = try await facets(
                "q=drill&kind=rental&minPriceCents=800&maxPriceCents=2000&near=27.7172,85.3240&radiusKm=50"
                    + "&bbox=80,20,90,30&country=NP&minRating=1")
            #expect(filtered.categories.values.reduce(0, +) == 0, "no item is rated: \(filtered)")
            let near = try await facets(
                "q=drill&kind=rental&minPriceCents=800&maxPriceCents=2000&near=27.7172,85.3240&radiusKm=50&bbox=80,20,90,30"
                    + "&availableFrom=\(dayFromToday(40))&availableUntil=\(dayFromToday(41))")
            #expect(near.categories["tools"] == 1 && near.categories["sports"] == 1, "\(near)")
            #expect(near.kinds == ["rental": 2, "request": 0], "\(near)")
            // The facets take filters, not an order or a page.
            for query in ["sort=newest", "limit=5", "cursor=abc", "q=\(String(repeating: "a", count: 201))"] {
                let reply = try await client.send(.get, "/v1/market/facets?\(query)", token: ada.token)
                #expect(reply.status == .unprocessableContent || reply.status == .badRequest, "\(query): \(reply)")
            }
        }
    }

    @Test func loansAreSearchedByTitleAndDescriptionToo() async throws {
        try await withServer { client, _ in
            let rita = try await client.user("rita")
            for (title, description) in [("Sewing machine", "For a tailoring shop in Pokhara"), ("Two cows", "Milk for the café")] {
                let reply = try await client.send(
                    .post, "/v1/loans",
                    body: API.LoanBody(
                        title: title, description: description, sector: "Retail", activity: "Shop", country: "NP",
                        location: API.LocationInput(lat: 28.2, lng: 83.98, place: "Pokhara"), amountCents: 50_000,
                        deadline: dayFromToday(30)
                    ), token: rita.token)
                #expect(reply.status == .created, "\(reply)")
            }
            func titles(_ query: String) async throws -> [String] {
                let reply = try await client.send(.get, "/v1/loans?\(query)", token: rita.token)
                #expect(reply.status == .ok, "\(reply)")
                return try reply.decode(Page<LoanResource>.self).data.map(\.title)
            }
            #expect(try await titles("q=tailoring") == ["Sewing machine"])
            #expect(try await titles("q=CAFE") == ["Two cows"])
            #expect(try await titles("q=pokhara&sort=relevance") == ["Sewing machine"])
        }
    }

    // MARK: Saved searches

    func save(_ client: any TestClientProtocol, _ token: String, _ name: String, _ query: String) async throws -> Reply {
        try await client.send(.post, "/v1/me/saved-searches", body: API.SavedSearchBody(name: name, query: query), token: token)
    }

    func newMatches(_ client: any TestClientProtocol, _ token: String) async throws -> [[String: Any]] {
        let feed = try await client.send(.get, "/v1/me/feed", token: token).json["data"] as? [[String: Any]] ?? []
        return feed.filter { $0["kind"] as? String == "new_match" }
    }

    @Test func aNewPostingThatMeetsASavedSearchIsNewsToItsOwnerAndOnlyThen() async throws {
        try await withServer { client, admin in
            let ada = try await client.user("ada")
            let bob = try await client.user("bob")
            let eve = try await client.user("eve")
            let saved = try await save(client, bob.token, "Drills nearby", "q=cordless+drill&category=tools&near=27.7172,85.3240&radiusKm=10")
            #expect(saved.status == .created, "\(saved)")
            #expect(saved.json["query"] as? String == "q=cordless+drill&category=tools&near=27.7172,85.3240&radiusKm=10")
            // Eve's searches: cheap things (any words), and a typo'd word corrected once learned.
            _ = try await rental(client, ada.token, "Old Makita drill", description: "Corded")
            #expect(try await SearchWords(admin).learn() > 0)
            #expect(try await save(client, eve.token, "Cheap", "maxPriceCents=800").status == .created)
            #expect(try await save(client, eve.token, "Typo", "q=makitta").status == .created)
            // Ada's own search never tells her of her own posting.
            #expect(try await save(client, ada.token, "Mine", "q=drill").status == .created)

            let makita = try await rental(client, ada.token, "Makita drill", description: "Cordless, 18 V", price: 700)
            _ = try await rental(client, ada.token, "Garden hose", description: "Twenty metres", category: "sports", price: 500)
            _ = try await client.post(ada.token, title: "Cordless drill in Delhi", at: (28.6139, 77.2090), category: "tools", price: 900)
            _ = try await rental(client, ada.token, "Bosch drill", description: "Corded, 900 W", price: 1500)
            // Told by the follower of the log (`lender serve` runs it every second), once.
            let owner = try await ownerURL(admin)
            #expect(try await newMatches(client, bob.token).isEmpty)
            _ = try runLender(["searches", "alert"], database: owner)
            _ = try runLender(["searches", "alert"], database: owner)

            let bobs = try await newMatches(client, bob.token)
            #expect(bobs.map { $0["itemId"] as? String } == [makita.rawValue.uuidString.lowercased()], "\(bobs)")
            #expect(bobs.first?["fromUserId"] as? String == ada.id.rawValue.uuidString.lowercased(), "\(bobs)")
            let eves = try await newMatches(client, eve.token)
            // Makita (700, and "makitta" corrected) is one notice; the hose (500) another.
            #expect(eves.count == 2, "\(eves)")
            #expect(try await newMatches(client, ada.token).isEmpty)

            // Deleted, it tells no more.
            let list = try await client.send(.get, "/v1/me/saved-searches", token: bob.token)
            let id = try #require((list.json["data"] as? [[String: Any]])?.first?["id"] as? String)
            #expect(try await client.send(.delete, "/v1/me/saved-searches/\(id)", token: eve.token).status == .notFound)
            #expect(try await client.send(.delete, "/v1/me/saved-searches/\(id)", token: bob.token).status == .noContent)
            #expect(try await client.send(.delete, "/v1/me/saved-searches/\(id)", token: bob.token).status == .notFound)
            _ = try await rental(client, ada.token, "Cordless drill, another", price: 700)
            _ = try runLender(["searches", "alert"], database: owner)
            #expect(try await newMatches(client, bob.token).count == 1)
            #expect(try await newMatches(client, eve.token).count == 3, "Eve's cheap search still tells her")

            // The notices are the log's: a rebuild makes the same feed.
            let verified = try runLender(["replay", "--verify"], database: owner)
            #expect(verified.contains("no differences"), "\(verified)")
        }
    }

    /// The rule of telling (the decider's): once, while the item is in the market, never its owner.
    @Test func savedSearchesAreToldOnceWhileTheItemIsInTheMarketNeverItsOwner() throws {
        let owner = UserID(), bob = UserID(), eve = UserID()
        let post = PostRental(
            title: "Drill", description: "", category: .tools, dailyPriceCents: 500, location: Location(lat: 27.7, lng: 85.3, place: "K"))
        func apply(_ events: [ItemEvent], to state: ItemState) -> ItemState { events.reduce(state, ItemDecider.evolve) }
        let posted = apply(
            try ItemDecider.decide(.postRental(post, today: Day("2026-11-01")!), ItemDecider.initial, actor: owner), to: ItemDecider.initial)
        let matches = [owner, bob, eve].map { SavedSearchMatch(userID: $0, searchID: UUID()) }
        let told = try ItemDecider.decide(.tellSavedSearches(matches), posted, actor: .system)
        #expect(told == [.savedSearchesMatched(SavedSearchesMatched(ownerID: owner, matches: Array(matches[1...])))])
        #expect(try ItemDecider.decide(.tellSavedSearches(matches), apply(told, to: posted), actor: .system).isEmpty, "once")
        #expect(try ItemDecider.decide(.tellSavedSearches([matches[0]]), posted, actor: .system).isEmpty, "only the owner's")
        let withdrawn = apply(try ItemDecider.decide(.withdraw, posted, actor: owner), to: posted)
        #expect(try ItemDecider.decide(.tellSavedSearches(matches), withdrawn, actor: .system).isEmpty, "out of the market")
        #expect(try ItemDecider.decide(.tellSavedSearches(matches), ItemDecider.initial, actor: .system).isEmpty, "no item")
        let many = (0..<1_500).map { _ in SavedSearchMatch(userID: UserID(), searchID: UUID()) }
        guard case .savedSearchesMatched(let capped) = try ItemDecider.decide(.tellSavedSearches(many), posted, actor: .system).first
        else { Issue.record("not told"); return }
        #expect(capped.matches.count == SavedSearchLimits.matchesPerPosting)
    }

    @Test func savedSearchesAreCheckedLimitedAndOnlyTheOwnersOwn() async throws {
        try await withServer { client, _ in
            let bob = try await client.user("bob")
            let refusals: [(String, String, String, String)] = [
                ("Bad", "category=boats", "query.category", "invalid_category"),
                ("Bad", "catgory=tools", "query.catgory", "unknown_parameter"),
                ("Bad", "q=drill&cursor=abc", "query.cursor", "not_for_saved_searches"),
                ("Bad", "updatedSince=2026-01-01T00:00:00Z", "query.updatedSince", "not_for_saved_searches"),
                ("Bad", "minRating=4", "query.minRating", "not_for_saved_searches"),
                ("Bad", "q=drill&" + String(repeating: "a", count: 2_000), "query", "too_long"),
                ("Bad", "q=\(String(repeating: "a", count: 201))", "query.q", "q_too_long"),
                ("Bad", "radiusKm=5", "query.radiusKm", "needs_near"),
                ("Bad", "q=drill%00", "query.q", "control_character"),
                ("", "q=drill", "name", "invalid_name"),
                (String(repeating: "n", count: 81), "q=drill", "name", "invalid_name"),
            ]
            for (name, query, field, code) in refusals {
                let reply = try await save(client, bob.token, name, query)
                #expect(reply.status == .unprocessableContent, "\(query): \(reply)")
                #expect(reply.fieldCodes[field] == code, "\(query): \(reply)")
            }
            let missing = try await client.send(.post, "/v1/me/saved-searches", json: ["name": "No query"], token: bob.token)
            #expect(missing.fieldCodes["query"] == "required", "\(missing)")
            #expect(try await client.send(.delete, "/v1/me/saved-searches/not-an-id", token: bob.token).status == .notFound)

            // Twenty-five at once: never more than twenty kept. (Under the whole suite's load some
            // wait out the test server's pool of four and are refused 503, saving nothing.)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<25 {
                    group.addTask { Int(try await save(client, bob.token, "Search \(index)", "q=drill\(index)").status.code) }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 201 }.count <= 20, "\(statuses.sorted())")
            #expect(Set(statuses).isSubset(of: [201, 409, 503]), "\(statuses.sorted())")
            #expect(statuses.filter { $0 == 201 }.count == 20 || statuses.contains(503), "\(statuses.sorted())")
            func saved() async throws -> Int {
                (try await client.send(.get, "/v1/me/saved-searches", token: bob.token).json["data"] as? [[String: Any]])?.count ?? -1
            }
            #expect(try await saved() == statuses.filter { $0 == 201 }.count)
            // Then one at a time up to twenty, and the twenty-first is refused.
            var next = 100
            while try await saved() < 20 {
                #expect(try await save(client, bob.token, "Search \(next)", "q=saw\(next)").status == .created)
                next += 1
            }
            let over = try await save(client, bob.token, "One more", "q=saw")
            #expect(over.status == .conflict && over.json["code"] as? String == "too_many_saved_searches", "\(over)")
            #expect(try await saved() == 20)
        }
    }
}

