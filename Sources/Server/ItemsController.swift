import EventStore
import Foundation
import Hummingbird
import Marketplace
import Postgres
import Projections

/// Rentals, requests, items and bids. Commands go through the gateway; reads come from the
/// inline views, which the command's own transaction has already brought up to date.
struct ItemsController<Context: AuthenticatedRequestContext>: Sendable {
    let gateway: CommandGateway
    var pool: PostgresPool { gateway.store.pool }

    struct PostingBody: Decodable {
        var title: String?
        var description: String?
        var category: String?
        var dailyPriceCents: Int?
        var maxDailyPriceCents: Int?
        var location: LocationBody?
        var availableFrom: String?
        var availableUntil: String?
        var neededFrom: String?
        var neededUntil: String?
    }

    struct RejectionBody: Decodable {
        var reason: String?
    }

    struct BidBody: Decodable {
        var dailyPriceCents: Int?
        var from: String?
        var until: String?
        var message: String?
    }

    func addRoutes(
        to router: Router<Context>, authentication: AuthenticationMiddleware<Context>, idempotency: IdempotencyMiddleware<Context>,
        limiter: WriteLimiter
    ) {
        let v1 = router.group("/v1").add(middleware: authentication).add(middleware: idempotency)
        let postings = v1.group().add(middleware: WriteLimitMiddleware(limiter: limiter, kind: .postings))
        postings.post("rentals", use: postRental)
        postings.post("requests", use: postRequest)
        v1.get("items/:itemID", use: item)
        let changes = v1.group().add(middleware: WriteLimitMiddleware(limiter: limiter, kind: .changes))
        changes.patch("items/:itemID", use: revise)
        changes.post("items/:itemID/withdraw") { request, context in try await itemCommand(.withdraw, request, context) }
        changes.post("items/:itemID/complete") { request, context in try await itemCommand(.complete, request, context) }
        changes.post("items/:itemID/relist") { request, context in try await itemCommand(.relist, request, context) }
        v1.group().add(middleware: WriteLimitMiddleware(limiter: limiter, kind: .bids)).post("items/:itemID/bids", use: placeBid)
        v1.get("items/:itemID/bids", use: bids)
        v1.get("items/:itemID/bids/history", use: bidHistory)
        changes.post("bids/:bidID/approve") { request, context in
            try await bidCommand(request, context) { .approveBid($0) }
        }
        changes.post("bids/:bidID/withdraw") { request, context in
            try await bidCommand(request, context) { .withdrawBid($0) }
        }
        changes.post("bids/:bidID/reject") { request, context in
            let body = try await request.decodeBody(RejectionBody.self, context: context, allowEmpty: true)
            return try await bidCommand(request, context) { .rejectBid($0, reason: body?.reason) }
        }
    }

    // MARK: Commands

    @Sendable func postRental(_ request: Request, context: Context) async throws -> EditedResponse<ItemResource> {
        let body = try await request.decodeBody(PostingBody.self, context: context)
        var fields = FieldCheck()
        let category = fields.category(body.category)
        let location = fields.location(body.location)
        let from = fields.day(body.availableFrom, "availableFrom", required: false, bookable: true)
        let until = fields.day(body.availableUntil, "availableUntil", required: false, bookable: true)
        fields.require(("title", body.title), ("dailyPriceCents", body.dailyPriceCents))
        fields.alongside(
            ItemDecider.givenFieldProblems(
                title: body.title, description: body.description, priceCents: body.dailyPriceCents, priceField: "dailyPriceCents"))
        try fields.throwIfAny()
        let post = PostRental(
            title: body.title!, description: body.description ?? "", category: category!, dailyPriceCents: body.dailyPriceCents!,
            location: location!, availableFrom: from, availableUntil: until)
        let handled = try await gateway.handle(
            .postRental(post), on: .item, id: post.itemID, actor: try context.requireIdentity(), newStream: true)
        return try await posted(handled)
    }

    @Sendable func postRequest(_ request: Request, context: Context) async throws -> EditedResponse<ItemResource> {
        let body = try await request.decodeBody(PostingBody.self, context: context)
        var fields = FieldCheck()
        let category = fields.category(body.category)
        let location = fields.location(body.location)
        let from = fields.day(body.neededFrom, "neededFrom", required: true, bookable: true)
        let until = fields.day(body.neededUntil, "neededUntil", required: true, bookable: true)
        fields.require(("title", body.title))
        fields.alongside(
            ItemDecider.givenFieldProblems(
                title: body.title, description: body.description, priceCents: body.maxDailyPriceCents,
                priceField: "maxDailyPriceCents"))
        try fields.throwIfAny()
        let post = PostRequest(
            title: body.title!, description: body.description ?? "", category: category!,
            maxDailyPriceCents: body.maxDailyPriceCents, neededFrom: from!, neededUntil: until!, location: location!)
        let handled = try await gateway.handle(
            .postRequest(post), on: .item, id: post.itemID, actor: try context.requireIdentity(), newStream: true)
        return try await posted(handled)
    }

    /// The item a posting made: named by its state, since a repeated request answers the
    /// first one's item, not the id it made up itself.
    func posted(_ handled: Handled<ItemState, ItemEvent>) async throws -> EditedResponse<ItemResource> {
        guard let itemID = handled.state.itemID else { throw ItemDecider.itemNotFound }
        return EditedResponse(status: .created, response: try await itemResource(itemID.rawValue, position: handled.append?.lastPosition))
    }

    @Sendable func placeBid(_ request: Request, context: Context) async throws -> EditedResponse<BidResource> {
        let actor = try context.requireIdentity()
        let itemID = try context.parameters.requireUUID("itemID")
        let body = try await request.decodeBody(BidBody.self, context: context)
        var fields = FieldCheck()
        let from = fields.day(body.from, "from", required: true, bookable: true)
        let until = fields.day(body.until, "until", required: true, bookable: true)
        fields.require(("dailyPriceCents", body.dailyPriceCents))
        try fields.throwIfAny()
        let bid = PlaceBid(
            dailyPriceCents: body.dailyPriceCents!, from: from!, until: until!, message: body.message, isBlockedByOwner: false)
        // Whether the owner has blocked the bidder is the owner's stream's to say: the bid is
        // decided on the owner's blocks as read, and appended only if the owner's stream is
        // still at that version (a block committed meanwhile makes it decide again).
        let (placed, append) = try await gateway.handleAcross("placeBid", actor: actor) {
            (reads: inout StreamReads) -> (writes: [StreamWrite], outcome: BidID) in
            let item = try await reads.load(.item, id: ItemID(itemID))
            var checks = [StreamWrite]()
            var decided = bid
            if let owner = item.ownerID {
                decided.isBlockedByOwner = try await reads.load(.user, id: owner).blocked.contains(actor)
                checks.append(try StreamWrite([UserEvent](), to: .user, id: owner))
            }
            let events = try Aggregate.item.decide(.placeBid(decided), item, actor)
            // The bid the events name: a repeated request answers the first one's bid.
            guard case .bidPlaced(let placed)? = events.first else {
                throw DomainError(.notFound, "bid_not_found", "No bid was placed.")
            }
            return ([try StreamWrite(events, to: .item, id: ItemID(itemID))] + checks, placed.bidID)
        }
        return EditedResponse(status: .created, response: try await bidResource(placed.rawValue, position: append?.lastPosition))
    }

    @Sendable func revise(_ request: Request, context: Context) async throws -> ItemResource {
        // A revision is a posting's fields, all optional; the window ones are not revisable and ignored.
        let body = try await request.decodeBody(PostingBody.self, context: context)
        var fields = FieldCheck()
        let category = body.category == nil ? nil : fields.category(body.category)
        let location = body.location == nil ? nil : fields.location(body.location)
        if body.dailyPriceCents != nil, body.maxDailyPriceCents != nil {
            fields.problems.append(
                FieldError(field: "maxDailyPriceCents", code: "not_for_this_kind", message: "one price: dailyPriceCents or maxDailyPriceCents"))
        }
        try fields.throwIfAny()
        let revision = ReviseItem(
            title: body.title, description: body.description, category: category,
            priceCents: body.dailyPriceCents ?? body.maxDailyPriceCents,
            priceFor: body.dailyPriceCents != nil ? .rental : body.maxDailyPriceCents != nil ? .request : nil, location: location)
        return try await itemCommand(.revise(revision), request, context)
    }

    /// A command on the item named in the path; answers the item as it now stands.
    func itemCommand(_ command: ItemCommand, _ request: Request, _ context: Context) async throws -> ItemResource {
        let itemID = try context.parameters.requireUUID("itemID")
        let handled = try await gateway.handle(command, on: .item, id: ItemID(itemID), actor: try context.requireIdentity())
        return try await itemResource(itemID, position: handled.append?.lastPosition)
    }

    /// A command on the bid named in the path, decided on its item's stream; answers the bid.
    func bidCommand(_ request: Request, _ context: Context, _ command: (BidID) -> ItemCommand) async throws -> BidResource {
        let actor = try context.requireIdentity()
        let bidID = try context.parameters.requireUUID("bidID")
        let rows = try await pool.query("SELECT item_id FROM bids_view WHERE bid_id = \(bidID)")
        guard let itemID = try rows.first?.decode("item_id", as: UUID.self) else {
            throw Problem(DomainError(.notFound, "bid_not_found", "No such bid."))
        }
        let handled = try await gateway.handle(command(BidID(bidID)), on: .item, id: ItemID(itemID), actor: actor)
        return try await bidResource(bidID, position: handled.append?.lastPosition)
    }

    // MARK: Views

    @Sendable func item(_ request: Request, context: Context) async throws -> ItemResource {
        let itemID = try context.parameters.requireUUID("itemID")
        var item = try await itemResource(itemID, position: nil)
        item.contactEmail = try await contactEmail(item, for: try context.requireIdentity())
        return item
    }

    /// After an approval, and only then, the owner and the approved bidder see each other's
    /// e-mail, while the item is reserved or closed. Nobody else ever does.
    func contactEmail(_ item: ItemResource, for actor: UserID) async throws -> String? {
        guard item.status == ItemStatus.reserved.rawValue || item.status == ItemStatus.closed.rawValue else { return nil }
        let rows = try await pool.query(
            """
            SELECT b.bidder_id, bidder.email AS bidder_email, owner.email AS owner_email
            FROM bids_view b
            JOIN users_view bidder ON bidder.user_id = b.bidder_id
            JOIN users_view owner ON owner.user_id = \(item.ownerId.rawValue)
            WHERE b.item_id = \(item.id.rawValue) AND b.status = 'approved'
            ORDER BY b.updated_at DESC LIMIT 1
            """)
        guard let row = rows.first else { return nil }
        if actor == item.ownerId { return try row.decode("bidder_email") }
        if actor.rawValue == (try row.decode("bidder_id", as: UUID.self)) { return try row.decode("owner_email") }
        return nil
    }

    /// Every bid event of the item, from the log, with hashes: the owner and auditors see all of
    /// them, a bidder the events of their own bids, anyone else nothing (403).
    @Sendable func bidHistory(_ request: Request, context: Context) async throws -> Page<BidHistoryEntry> {
        let actor = try context.requireIdentity()
        let itemID = try context.parameters.requireUUID("itemID")
        let item = try await itemResource(itemID, position: nil)
        let entries = try await BidHistory.entries(of: ItemID(itemID), in: gateway.store)
        if actor == item.ownerId { return Page(data: entries, nextCursor: nil) }
        if try await isAuditor(actor, pool) { return Page(data: entries, nextCursor: nil) }
        let own = entries.filter { $0.bidderId == actor }
        guard !own.isEmpty else {
            throw Problem(DomainError(.forbidden, "not_allowed", "Only the owner, auditors and bidders may read this history."))
        }
        return Page(data: own, nextCursor: nil)
    }

    /// The owner sees every bid on the item; anyone else, only their own. Newest first.
    @Sendable func bids(_ request: Request, context: Context) async throws -> Page<BidResource> {
        let actor = try context.requireIdentity()
        let itemID = try context.parameters.requireUUID("itemID")
        let limit = try request.pageLimit()
        let after = try Cursor(query: request.uri.queryParameters["cursor"].map(String.init))
        let item = try await itemResource(itemID, position: nil)
        let onlyBidder: UUID? = actor == item.ownerId ? nil : actor.rawValue
        let rows = try await pool.query(
            """
            SELECT \(unsafeRaw: BidResource.columns) FROM bids_view
            WHERE item_id = \(itemID)
              AND (\(onlyBidder)::uuid IS NULL OR bidder_id = \(onlyBidder))
              AND (\(after?.at)::timestamptz IS NULL OR (created_at, bid_id) < (\(after?.at), \(after?.id)))
            ORDER BY created_at DESC, bid_id DESC
            LIMIT \(limit + 1)
            """)
        let bids = try rows.prefix(limit).map { try BidResource($0, position: nil) }
        let next = rows.count > limit ? bids.last.map { Cursor(at: $0.createdAt, id: $0.id.rawValue).encoded } : nil
        return Page(data: bids, nextCursor: next)
    }

    func itemResource(_ id: UUID, position: Int64?) async throws -> ItemResource {
        let rows = try await pool.query(
            "SELECT \(unsafeRaw: ItemResource.columns), NULL::float8 AS distance_km FROM items_view WHERE item_id = \(id)",
            prepared: true)
        guard let row = rows.first else { throw Problem(DomainError(.notFound, "item_not_found", "No such item.")) }
        return try ItemResource(row, position: position)
    }

    func bidResource(_ id: UUID, position: Int64?) async throws -> BidResource {
        let rows = try await pool.query(
            "SELECT \(unsafeRaw: BidResource.columns) FROM bids_view WHERE bid_id = \(id)", prepared: true)
        guard let row = rows.first else { throw Problem(DomainError(.notFound, "bid_not_found", "No such bid.")) }
        return try BidResource(row, position: position)
    }
}

/// `{ "lat", "lng", "place" }` as sent; the domain checks the ranges.
struct LocationBody: Decodable {
    var lat: Double?
    var lng: Double?
    var place: String?
}

/// An item as clients read it (SPEC §6).
struct ItemResource: ResponseEncodable {
    var id: ItemID
    var kind: String
    var title: String
    var description: String
    var category: String
    var dailyPriceCents: Int?
    var maxDailyPriceCents: Int?
    var status: String
    var ownerId: UserID
    var ownerHandle: String
    var location: Location
    var availableFrom: String?
    var availableUntil: String?
    var neededFrom: String?
    var neededUntil: String?
    var bidCount: Int
    var createdAt: Date
    var updatedAt: Date
    /// The other party's e-mail, for the owner and the approved bidder only.
    var contactEmail: String?
    /// From the point a market query was `near`.
    var distanceKm: Double?
    var position: Int64?

    /// What `init(_:position:)` reads, besides `distance_km`.
    static let columns = """
        item_id, kind, owner_id, owner_handle, title, description, category, price_cents, lat, lng, place,
        window_from::text AS window_from, window_until::text AS window_until, status, bid_count, created_at, updated_at
        """

    init(_ row: PostgresRow, position: Int64?) throws {
        id = ItemID(try row.decode("item_id", as: UUID.self))
        kind = try row.decode("kind")
        title = try row.decode("title")
        description = try row.decode("description")
        category = try row.decode("category")
        let price = try row.decode("price_cents", as: Int?.self)
        let from = try row.decode("window_from", as: String?.self)
        let until = try row.decode("window_until", as: String?.self)
        if kind == ItemKind.rental.rawValue {
            (dailyPriceCents, availableFrom, availableUntil) = (price, from, until)
        } else {
            (maxDailyPriceCents, neededFrom, neededUntil) = (price, from, until)
        }
        status = try row.decode("status")
        ownerId = UserID(try row.decode("owner_id", as: UUID.self))
        ownerHandle = try row.decode("owner_handle")
        location = Location(lat: try row.decode("lat"), lng: try row.decode("lng"), place: try row.decode("place"))
        bidCount = try row.decode("bid_count")
        createdAt = try row.decode("created_at")
        updatedAt = try row.decode("updated_at")
        distanceKm = try row.decode("distance_km", as: Double?.self)
        self.position = position
    }
}

/// A bid as clients read it (SPEC §6).
struct BidResource: ResponseEncodable {
    var id: BidID
    var itemId: ItemID
    var bidderId: UserID
    var bidderHandle: String
    var dailyPriceCents: Int
    var from: String
    var until: String
    var message: String?
    var status: String
    var reason: String?
    var createdAt: Date
    var position: Int64?

    /// What `init(_:position:)` reads.
    static let columns = """
        bid_id, item_id, bidder_id, bidder_handle, daily_price_cents, from_day::text AS from_day,
        until_day::text AS until_day, message, status, reason, created_at
        """

    init(_ row: PostgresRow, position: Int64?) throws {
        id = BidID(try row.decode("bid_id", as: UUID.self))
        itemId = ItemID(try row.decode("item_id", as: UUID.self))
        bidderId = UserID(try row.decode("bidder_id", as: UUID.self))
        bidderHandle = try row.decode("bidder_handle")
        dailyPriceCents = try row.decode("daily_price_cents")
        from = try row.decode("from_day")
        until = try row.decode("until_day")
        message = try row.decode("message", as: String?.self)
        status = try row.decode("status")
        reason = try row.decode("reason", as: String?.self)
        createdAt = try row.decode("created_at")
        self.position = position
    }
}

extension Parameters {
    /// A path parameter that must be a UUID; 404 otherwise (no such resource can exist).
    func requireUUID(_ name: String) throws -> UUID {
        guard let text = get(name), let id = UUID(uuidString: text) else {
            throw Problem(.notFound, code: "not_found", detail: "No such \(name.replacingOccurrences(of: "ID", with: "")).")
        }
        return id
    }
}
