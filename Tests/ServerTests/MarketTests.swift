import Foundation
import Hummingbird
import HummingbirdTesting
import Marketplace
import Server
import ServerTestSupport
import Testing
import TestSupport
@testable import Projections

/// Reproducible random numbers, so that a failure can be run again.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next(in range: ClosedRange<Double>) -> Double {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return range.lowerBound + Double(z >> 11) / Double(1 << 53) * (range.upperBound - range.lowerBound)
    }
}

/// Great-circle kilometres by the haversine formula: the reference the market is checked against.
func haversineKm(_ a: (Double, Double), _ b: (Double, Double)) -> Double {
    let radius = 6371.0088
    let (lat1, lng1, lat2, lng2) = (a.0 * .pi / 180, a.1 * .pi / 180, b.0 * .pi / 180, b.1 * .pi / 180)
    let h = pow(sin((lat2 - lat1) / 2), 2) + cos(lat1) * cos(lat2) * pow(sin((lng2 - lng1) / 2), 2)
    return 2 * radius * asin(min(1, sqrt(h)))
}

extension TestClientProtocol {
    func post(
        _ token: String, title: String, at point: (Double, Double), category: String = "bikes", price: Int = 1000,
        request: Bool = false
    ) async throws -> ItemID {
        let kind = try #require(API.Category(rawValue: category))
        let location = API.LocationInput(lat: point.0, lng: point.1, place: title)
        let response: Reply
        if request {
            let body = API.RequestBody(
                title: title, category: kind, maxDailyPriceCents: price, location: location, neededFrom: "2026-12-01",
                neededUntil: "2026-12-03")
            response = try await send(.post, "/v1/requests", body: body, token: token)
        } else {
            let body = API.RentalBody(title: title, category: kind, dailyPriceCents: price, location: location)
            response = try await send(.post, "/v1/rentals", body: body, token: token)
        }
        #expect(response.status == .created, "\(response)")
        return try response.decode(ItemResource.self).id
    }

    /// A bid that fits a request `post` made: 900 a day (under its default maximum) for its days.
    fileprivate func offerOnRequest(_ item: ItemID, _ token: String) async throws -> Reply {
        try await send(
            .post, "/v1/items/\(item)/bids", body: API.BidBody(dailyPriceCents: 900, from: "2026-12-01", until: "2026-12-03"), token: token)
    }

    func market(_ query: String, _ token: String) async throws -> Reply {
        try await send(.get, "/v1/market?\(query)", token: token)
    }

    /// A page of the market; fails the test when the answer is not one.
    func marketPage(_ query: String, _ token: String) async throws -> Page<ItemResource> {
        let reply = try await market(query, token)
        #expect(reply.status == .ok, "\(reply)")
        return try reply.decode()
    }
}

@Suite("The market")
struct MarketTests {
    let kathmandu = (27.7172, 85.3240)
    let bhaktapur = (27.6710, 85.4298)
    let pokhara = (28.2096, 83.9856)
    let delhi = (28.6139, 77.2090)

    @Test func nearestFirstWithDistancesWithinOnePercentOfHaversine() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            for (title, point) in [("Delhi bike", delhi), ("Pokhara bike", pokhara), ("Bhaktapur bike", bhaktapur)] {
                _ = try await client.post(owner.token, title: title, at: point)
            }
            let viewer = try await client.user("viewer")
            let near = try await client.marketPage("near=\(kathmandu.0),\(kathmandu.1)&sort=distance", viewer.token)
            #expect(near.data.map(\.title) == ["Bhaktapur bike", "Pokhara bike", "Delhi bike"])
            for (item, point) in zip(near.data, [bhaktapur, pokhara, delhi]) {
                let distance = try #require(item.distanceKm)
                let reference = haversineKm(kathmandu, point)
                #expect(abs(distance - reference) / reference < 0.01, "\(distance) vs \(reference)")
            }
            let within = try await client.marketPage("near=\(kathmandu.0),\(kathmandu.1)&radiusKm=200&sort=distance", viewer.token)
            #expect(within.data.map(\.title) == ["Bhaktapur bike", "Pokhara bike"])
            let close = try await client.marketPage("near=\(kathmandu.0),\(kathmandu.1)&radiusKm=20", viewer.token)
            #expect(close.data.map(\.title) == ["Bhaktapur bike"])
            // Spaces around either number are allowed, as they were.
            let spaced = try await client.marketPage("near=%20\(kathmandu.0)%20,%20%20\(kathmandu.1)%20&radiusKm=20", viewer.token)
            #expect(spaced.data.map(\.title) == ["Bhaktapur bike"])
            // Without `near`, no distance: an explicit null, read from the JSON itself.
            let far = try await client.market("", viewer.token).json["data"] as? [[String: Any]]
            #expect(far?.count == 3 && far?.allSatisfy { $0["distanceKm"] is NSNull } == true)
        }
    }

    @Test func filtersNarrowTheMarketAndOnlyAvailableItemsAreInIt() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            _ = try await client.post(owner.token, title: "Red road bike", at: kathmandu, price: 1500)
            _ = try await client.post(owner.token, title: "Blue mountain bike", at: kathmandu, price: 900)
            _ = try await client.post(owner.token, title: "Cordless drill", at: kathmandu, category: "tools", price: 700)
            _ = try await client.post(owner.token, title: "Need a road bike", at: kathmandu, price: 800, request: true)
            // Out of the market: a request reserved by an approved bid, and a withdrawn rental.
            let reserved = try await client.post(owner.token, title: "Need a reserved bike", at: kathmandu, request: true)
            let bidder = try await client.user("bidder")
            let bid = try await client.offerOnRequest(reserved, bidder.token).decode(BidResource.self).id
            #expect(try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token).status == .ok)
            let withdrawn = try await client.post(owner.token, title: "Withdrawn bike", at: kathmandu)
            #expect(try await client.send(.post, "/v1/items/\(withdrawn)/withdraw", token: owner.token).status == .ok)
            // Still in it: a rental with an approved bid, which books only the bid's days.
            let booked = try await client.post(owner.token, title: "Booked bike", at: kathmandu, price: 2000)
            let booking = try await client.bid(booked, bidder.token).decode(BidResource.self).id
            #expect(try await client.send(.post, "/v1/bids/\(booking)/approve", token: owner.token).status == .ok)

            func titles(_ query: String) async throws -> Set<String> {
                Set(try await client.marketPage(query, bidder.token).data.map(\.title))
            }
            #expect(try await titles("") == ["Red road bike", "Blue mountain bike", "Cordless drill", "Need a road bike", "Booked bike"])
            #expect(try await titles("kind=request") == ["Need a road bike"])
            #expect(try await titles("category=tools") == ["Cordless drill"])
            #expect(try await titles("q=road%20BIKE") == ["Red road bike", "Need a road bike"])
            #expect(try await titles("q=100%25") == [])
            #expect(try await titles("minPriceCents=800&maxPriceCents=1000&kind=rental") == ["Blue mountain bike"])
        }
    }

    /// A map's viewport (`bbox=minLng,minLat,maxLng,maxLat`), on the market and the loans, and
    /// one across the antimeridian (Fiji's 178° and -179°, not Greenwich).
    @Test func aViewportHoldsWhatLiesWithinItAcrossTheAntimeridianToo() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            _ = try await client.post(owner.token, title: "Kathmandu bike", at: kathmandu)
            _ = try await client.post(owner.token, title: "Suva bike", at: (-18.14, 178.44))
            _ = try await client.post(owner.token, title: "Taveuni bike", at: (-16.8, -179.9))
            _ = try await client.post(owner.token, title: "Greenwich bike", at: (51.48, 0.0))
            func titles(_ query: String) async throws -> Set<String> {
                Set(try await client.marketPage(query, owner.token).data.map(\.title))
            }
            #expect(try await titles("bbox=85,27,86,28") == ["Kathmandu bike"])
            #expect(try await titles("bbox=170,-20,-170,-10") == ["Suva bike", "Taveuni bike"], "across the antimeridian")
            #expect(try await titles("bbox=-170,-20,170,-10") == [], "the other way round: the rest of the world at those latitudes")
            #expect(try await titles("bbox=-1,50,1,52&near=51.5,0.1&sort=distance") == ["Greenwich bike"])

            _ = try await client.postLoan(owner.token, title: "Suva loan", lat: -18.14, lng: 178.44)
            _ = try await client.postLoan(owner.token, title: "Pokhara loan")
            let loans = try await client.send(.get, "/v1/loans?bbox=175,-20,-175,-15", token: owner.token)
            #expect(loans.status == .ok)
            #expect((loans.json["data"] as? [[String: Any]])?.compactMap { $0["title"] as? String } == ["Suva loan"])

            for bad in ["1,2,3", "0,10,1,5", "200,0,201,1", "1e1,0,2,1", "a,b,c,d"] {
                let refused = try await client.send(.get, "/v1/market?bbox=\(bad)", token: owner.token)
                #expect(refused.status == .unprocessableContent, "\(bad)")
                #expect(refused.fieldCodes["bbox"] == "invalid_bbox", "\(bad): \(refused)")
            }
        }
    }

    /// A zoomed-out map's counts: every available item in the box in exactly one cell, at
    /// every zoom, across the antimeridian too; a withdrawn item counts nowhere.
    @Test func clustersSumToTheItemsInTheBox() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            var posted = [ItemID: (Double, Double)]()
            let places = [kathmandu, bhaktapur, pokhara, delhi, (-18.14, 178.44), (-16.8, -179.9), (51.48, 0.0), (89.9, 10)]
            for (index, place) in places.enumerated() {
                posted[try await client.post(owner.token, title: "Thing \(index)", at: place)] = place
            }
            let gone = try await client.post(owner.token, title: "Gone", at: kathmandu)
            #expect(try await client.send(.post, "/v1/items/\(gone)/withdraw", token: owner.token).status == .ok)
            func clusters(_ query: String) async throws -> [[String: Any]] {
                let reply = try await client.send(.get, "/v1/market/clusters?\(query)", token: owner.token)
                #expect(reply.status == .ok, "\(reply)")
                return reply.json["cells"] as? [[String: Any]] ?? []
            }
            func total(_ cells: [[String: Any]]) -> Int { cells.compactMap { $0["count"] as? Int }.reduce(0, +) }
            for zoom in [0, 2, 5] {
                let cells = try await clusters("zoom=\(zoom)")
                #expect(total(cells) == places.count, "zoom \(zoom): \(cells)")
                for cell in cells {
                    let sample = try #require((cell["sampleItemId"] as? String).flatMap(ItemID.init))
                    #expect(posted[sample] != nil, "a sample is an item of the market")
                }
            }
            // Far apart at zoom 5; the Kathmandu valley's two in one cell at zoom 2.
            #expect(try await clusters("zoom=5").count > (try await clusters("zoom=2")).count)
            let valley = try await clusters("zoom=5&bbox=85,27,86,28")
            #expect(valley.count == 1 && total(valley) == 2, "\(valley)")
            let lat = try #require(valley.first?["lat"] as? Double)
            #expect(abs(lat - (kathmandu.0 + bhaktapur.0) / 2) < 1e-6, "a cluster sits where its items are on average")
            let pacific = try await clusters("zoom=4&bbox=170,-20,-170,-10")
            #expect(total(pacific) == 2 && pacific.count == 2, "across the antimeridian: \(pacific)")
            #expect(try await clusters("zoom=3&bbox=170,-20,-170,-10&kind=request").isEmpty, "the market's filters apply")

            for (query, field, code) in [
                ("", "zoom", "invalid_zoom"), ("zoom=21", "zoom", "invalid_zoom"), ("zoom=x", "zoom", "invalid_zoom"),
                ("zoom=12", "bbox", "bbox_too_wide"), ("zoom=3&bbox=1,2,3", "bbox", "invalid_bbox"),
                ("zoom=3&kind=boat", "kind", "invalid_kind"),
            ] {
                let refused = try await client.send(.get, "/v1/market/clusters?\(query)", token: owner.token)
                #expect(refused.status == .unprocessableContent, "\(query)")
                #expect(refused.fieldCodes[field] == code, "\(query): \(refused)")
            }
        }
    }

    /// The cells the projection keeps answer as counting the items would, at every zoom and
    /// box, after items come, go and move, rentals are booked and requests reserved and
    /// closed: the same cells, counts and samples.
    @Test func keptCellsCountAsTheItemsDo() async throws {
        let clock = TestClock()
        try await withServer(today: clock.today) { client, admin in
            let owner = try await client.user("owner")
            var generator = SplitMix(seed: 19)
            var items = [ItemID]()
            // Dense around Kathmandu, a few far away, some on the antimeridian and the poles.
            for index in 0..<150 {
                let place: (Double, Double) =
                    switch index % 10 {
                    case 0: (generator.next(in: -89...89), generator.next(in: -180...180))
                    case 1: (generator.next(in: -20...(-10)), index % 20 == 1 ? 179.99 : -179.99)
                    default: (27.7 + generator.next(in: -2...2), 85.3 + generator.next(in: -2...2))
                    }
                items.append(try await client.post(owner.token, title: "Thing \(index)", at: place))
            }
            for place in [(86.0, 10.0), (89.5, 20.0), (-89.0, -100.0), (-16.0, -179.5), (-17.0, 179.5)] {
                _ = try await client.post(owner.token, title: "Far", at: place)
            }
            // Someone who leaves: their available items move to 0, 0, as the sealed places read.
            // Theirs are the least ids of a cell that also holds an item of someone else's, so
            // that the cell's sample must pass from theirs to the other's as they all leave.
            let leaver = try await client.user("leaver")
            let spot = (-45.0, -70.0)
            var leaving = [String]()
            for index in 0..<5 {
                leaving.append("\(try await client.post(leaver.token, title: "Leaving \(index)", at: (spot.0 + Double(index) * 1e-4, spot.1)))")
            }
            leaving.sort()
            var staying = ""
            while staying <= leaving[1] { staying = "\(try await client.post(owner.token, title: "Staying", at: spot))" }
            let closed = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: leaver.token)
            #expect(closed.status == .noContent, "\(closed)")
            for item in items[0..<20] {
                #expect(try await client.send(.post, "/v1/items/\(item)/withdraw", token: owner.token).status == .ok)
            }
            for item in items[20..<40] {
                let moved = try await client.send(
                    .patch, "/v1/items/\(item)", body: API.RevisionBody(location: .init(lat: 28.0, lng: 84.0, place: "Moved")),
                    token: owner.token)
                #expect(moved.status == .ok)
            }
            // Booked rentals stay in the market, but for one withdrawn instead (a booked one is
            // not withdrawn from under its renter).
            let renter = try await client.user("renter")
            for item in items[40..<50] {
                if item == items[45] {
                    #expect(try await client.send(.post, "/v1/items/\(item)/withdraw", token: owner.token).status == .ok)
                    continue
                }
                let bid = try await client.bid(item, renter.token).decode(BidResource.self).id
                #expect(try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token).status == .ok)
            }
            // Requests come into the market and leave it as they are reserved and completed,
            // among the rentals' cells; none is left in it, so `kind=rental` still holds every item.
            for index in 0..<6 {
                let place = (27.7 + generator.next(in: -2...2), 85.3 + generator.next(in: -2...2))
                let need = try await client.post(owner.token, title: "Need \(index)", at: place, request: true)
                let bid = try await client.offerOnRequest(need, renter.token).decode(BidResource.self).id
                #expect(try await client.send(.post, "/v1/bids/\(bid)/approve", token: owner.token).status == .ok)
                if index.isMultiple(of: 2) {
                    #expect(try await client.complete(need, owner.token, clock: clock).status == .ok)
                }
            }
            let available = try await count(admin, "SELECT count(*) FROM items_view WHERE status = 'available'")
            let kept = try await admin.query(
                "SELECT level, sum(count)::int AS n FROM market_cells GROUP BY level ORDER BY level")
            #expect(try kept.map { try $0.decode("n", as: Int.self) } == Array(repeating: available, count: 7), "every level holds every item once")
            // The moves went through a setting of each batch's transaction: the table they went
            // through before never held a row, so no dead ones pile up for each batch to read
            // past until autovacuum comes.
            let shared = try await count(admin, "SELECT pg_relation_size('public.market_cell_moves')::int")
            #expect(shared == 0, "\(shared) bytes of dead moves in the shared table")

            func cells(_ query: String) async throws -> [String] {
                let reply = try await client.send(.get, "/v1/market/clusters?\(query)", token: owner.token)
                #expect(reply.status == .ok, "\(query): \(reply)")
                return (reply.json["cells"] as? [[String: Any]] ?? []).map { cell in
                    let lat = (cell["lat"] as? Double).map { String(format: "%.5f", $0) } ?? "?"
                    let lng = (cell["lng"] as? Double).map { String(format: "%.5f", $0) } ?? "?"
                    return "\(cell["count"] ?? "?") \(lat) \(lng) \(cell["sampleItemId"] ?? "?")"
                }.sorted()
            }
            // `kind=rental` holds every item here, and counts them one by one.
            for (zoom, box) in [
                (0, nil), (1, "-180,-90,180,90"), (3, "80,20,90,35"), (5, "83.3,25.7,87.3,29.7"), (6, "84.1,26.9,86.2,28.5"),
                (9, "85,27.5,85.6,28"), (13, "85.3,27.7,85.32,27.72"), (4, "170,-25,-170,-5"), (2, "-10,-60,10,89.5"),
                // Narrower than a kept cell, against the world's ends: the antimeridian, the poles.
                (5, "178,-20,-179,-15"), (4, "179,-20,-179.2,-15"), (3, "-180,84,180,90"), (3, "0,80,30,90"),
                (4, "-120,-90,-90,-88"), (1, "-1,-1,1,1"), (14, "-70.01,-45.01,-69.99,-44.99"),
            ] as [(Int, String?)] {
                let query = "zoom=\(zoom)" + (box.map { "&bbox=\($0)" } ?? "")
                let fromKept = try await cells(query)
                #expect(fromKept == (try await cells(query + "&kind=rental")), "\(query)")
                #expect(!fromKept.isEmpty || box != nil, "\(query)")
            }
            #expect(try await cells("zoom=5&bbox=178,-20,-179,-15").count >= 2, "both sides of the antimeridian")
            #expect(try await cells("zoom=3&bbox=-180,84,180,90").count >= 2, "near the pole")
            // And a rebuild from the log makes the same cells.
            let verified = try runLender(["replay", "--verify"], database: try await ownerURL(admin))
            #expect(verified.contains("no differences"), "\(verified)")
        }
    }

    @Test func pagesNeitherRepeatNorSkipWhileItemsArrive() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            var originals = Set<ItemID>()
            for index in 0..<7 { originals.insert(try await client.post(owner.token, title: "Item \(index)", at: kathmandu)) }
            var seen = [ItemID]()
            var cursor: String? = nil
            var added = 0
            repeat {
                let page = try await client.marketPage("limit=3" + (cursor.map { "&cursor=\($0)" } ?? ""), owner.token)
                seen += page.data.map(\.id)
                cursor = page.nextCursor
                // Newer items arrive between pages; they belong before the first page.
                _ = try await client.post(owner.token, title: "Late \(added)", at: kathmandu)
                added += 1
            } while cursor != nil
            #expect(seen.count == Set(seen).count)
            #expect(Set(seen) == originals)
        }
    }

    @Test func nearestFirstPagesAreStableToo() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            var all = Set<ItemID>()
            for index in 0..<6 {
                all.insert(try await client.post(owner.token, title: "Spot \(index)", at: (27.70 + Double(index) * 0.05, 85.32)))
            }
            var seen = [Double]()
            var ids = [ItemID]()
            var cursor: String? = nil
            repeat {
                let page = try await client.market(
                    "near=27.70,85.32&sort=distance&limit=4" + (cursor.map { "&cursor=\($0)" } ?? ""), owner.token
                ).decode(Page<ItemResource>.self)
                seen += page.data.compactMap(\.distanceKm)
                ids += page.data.map(\.id)
                cursor = page.nextCursor
            } while cursor != nil
            #expect(Set(ids) == all)
            #expect(ids.count == all.count)
            #expect(seen == seen.sorted())
        }
    }

    /// Items at one and the same point tie on distance: the keyset's id settles the order,
    /// and a page boundary inside the tie neither repeats nor skips one, within a radius too.
    @Test func nearestFirstPagesThroughTiesAtOnePoint() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            var all = Set<ItemID>()
            for index in 0..<9 { all.insert(try await client.post(owner.token, title: "Stall \(index)", at: kathmandu)) }
            for index in 0..<3 { all.insert(try await client.post(owner.token, title: "Near \(index)", at: bhaktapur)) }
            _ = try await client.post(owner.token, title: "Far away", at: delhi)
            var ids = [ItemID]()
            var cursor: String? = nil
            repeat {
                let page = try await client.marketPage(
                    "near=\(kathmandu.0),\(kathmandu.1)&radiusKm=50&sort=distance&limit=4" + (cursor.map { "&cursor=\($0)" } ?? ""),
                    owner.token)
                ids += page.data.map(\.id)
                cursor = page.nextCursor
            } while cursor != nil
            #expect(ids.count == 12, "\(ids.count) items, Delhi is beyond 50 km")
            #expect(Set(ids) == all)
            #expect(Array(ids.prefix(9)).map(\.rawValue.uuidString) == Array(ids.prefix(9)).map(\.rawValue.uuidString).sorted(),
                "the tie at Kathmandu in id order")
        }
    }

    /// A cursor made before the distance was kept as the index measures it (great-circle
    /// kilometres in `km`) still pages on.
    @Test func anOlderDistanceCursorStillPages() async throws {
        var old = Cursor(at: Date(), id: UUID())
        old.km = 1.0
        #expect(old.sortChordKm.map { abs($0 - 1.0) < 1e-6 } == true)
        let decoded = try #require(try Cursor(query: old.encoded))
        #expect(decoded.sortChordKm != nil)
    }

    /// A cursor is its JSON in base64url without padding, as Foundation's base64 with `+`,
    /// `/` and `=` replaced would write it, and reads back as it was: bytes whose base64 holds
    /// each of those characters, then many cursors.
    @Test func cursorsAreBase64URLAndReadBack() throws {
        #expect(Data([0xFB, 0xFF, 0xBF, 0xFB]).base64EncodedString() == "+/+/+w==")
        #expect(Cursor.base64URL(Data([0xFB, 0xFF, 0xBF, 0xFB])) == "-_-_-w")
        // A cursor whose base64 holds `+`, `/` and `=`, read from its base64url.
        let json = #"{"at":0,"id":"00000000-0000-0000-0000-000000000000","key":"~~~???>>>ÿÿÿ"}"#
        let url = Cursor.base64URL(Data(json.utf8))
        #expect(url.contains("-") && url.contains("_") && !url.contains("="))
        #expect(try Cursor(query: url)?.key == "~~~???>>>ÿÿÿ")
        for index in 0..<500 {
            let cursor = Cursor(
                at: Date(timeIntervalSince1970: Double(index) * 86_399.123456), id: UUID(),
                chordKm: index % 2 == 0 ? Double(index) / 7 : nil, key: index % 3 == 0 ? nil : "?>~ ÿ✓ \(index)")
            let json = try JSONEncoder.cursor.encode(cursor)
            let expected = json.base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Cursor.base64URL(json) == expected)
            // Written out or by JSONEncoder, it is the same JSON to a reader.
            let written = try JSONSerialization.jsonObject(with: cursor.json) as? NSDictionary
            #expect(written == (try JSONSerialization.jsonObject(with: json) as? NSDictionary))
            let back = try #require(try Cursor(query: cursor.encoded))
            #expect(abs(back.at.timeIntervalSince(cursor.at)) < 1e-6, "microseconds, as PostgreSQL keeps them")
            #expect(back.id == cursor.id && back.chordKm == cursor.chordKm && back.key == cursor.key)
        }
    }

    @Test func badParametersAreListedNot500() async throws {
        try await withServer { client, _ in
            let viewer = try await client.user("viewer")
            let bad = try await client.market("kind=boat&near=100,0&radiusKm=-1&sort=cheapest&limit=500&updatedSince=yesterday", viewer.token)
            #expect(bad.status == .unprocessableContent)
            let fields = Set((bad.problem?.errors ?? []).map(\.field))
            #expect(fields == ["kind", "near", "radiusKm", "sort", "limit", "updatedSince"])
            let lonely = try await client.market("sort=distance&radiusKm=5", viewer.token)
            #expect(lonely.status == .unprocessableContent)
            #expect(try await client.market("", "not-a-token").status == .unauthorized)
        }
    }
}

@Suite("Earth")
struct EarthTests {
    /// The market's point, box and radius, written in Swift, are the views' SQL functions.
    @Test func theQueryGeometryIsTheViewsGeometry() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let radius = try await pool.query("SELECT earth_radius_km() AS r")[0].decode("r", as: Double.self)
                #expect(radius == Earth.radiusKm)
                for (lat, lng) in [(27.7172, 85.324), (-33.8688, 151.2093), (0.0, 0.0), (89.99, -179.99), (-90.0, 180.0), (51.5, -0.1275)] {
                    for km in [0.001, 25.0, 20_000.0] {
                        let point = Earth.point(lat: lat, lng: lng), box = Earth.box(lat: lat, lng: lng, km: km)
                        let row = try await pool.query(
                            """
                            SELECT cube_distance(earth_point(\(lat), \(lng)), \(point)::cube) AS apart,
                                   cube_enlarge(earth_point(\(lat), \(lng)), \(km), 3) <@ cube_enlarge(\(box)::cube, 1e-9, 3)
                                   AND \(box)::cube <@ cube_enlarge(cube_enlarge(earth_point(\(lat), \(lng)), \(km), 3), 1e-9, 3) AS same_box
                            """)[0]
                        #expect(try row.decode("apart", as: Double.self) < 1e-9, "\(lat), \(lng)")
                        #expect(try row.decode("same_box", as: Bool.self), "\(lat), \(lng), \(km) km")
                    }
                }
            }
        }
    }

    /// Projections write `earth_point(lat, lng)` per row: it must be inlined into C calls, not
    /// run as a SQL function (parsed and planned again each time), and NULL must stay NULL.
    @Test func earthPointIsInlinedAndKeepsNull() async throws {
        try await TestDatabase.withMigrated { configuration in
            try await TestDatabase.withPool(configuration, size: 1) { pool in
                let plan = try await pool.query("EXPLAIN (VERBOSE, COSTS OFF) SELECT earth_point(lat, lng) FROM items_view")
                    .map { try $0.decode("QUERY PLAN", as: String.self) }.joined(separator: "\n")
                #expect(plan.contains("cube(cube(cube("), "\(plan)")
                #expect(!plan.contains("earth_point"), "\(plan)")
                let null = try await pool.query("SELECT earth_point(NULL, 1) IS NULL AND earth_point(1, NULL) IS NULL AS n")
                #expect(try null.single().decode("n", as: Bool.self))
            }
        }
    }
}
