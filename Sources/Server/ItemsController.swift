import Aggregates
import EventStore
import Foundation
import Hummingbird
import Marketplace
import Projections
import UseCases

/// Rentals, requests, items and bids. Commands go through the gateway and the bidding use
/// case; answers come from the inline views, which the command's own transaction has
/// already brought up to date.
struct ItemsController: Sendable {
    let gateway: CommandGateway
    let bidding: Bidding
    let items: ItemsView
    let auditors: Auditors
    /// The clock's day, passed to the rules that need it.
    let today: @Sendable () -> Day


    struct PostingBody: Decodable {
        var title: String?
        var description: String?
        var category: String?
        var dailyPriceCents: Int?
        var maxDailyPriceCents: Int?
        var location: LocationBody?
        /// A revision tells an absent end (kept) from a null one (opened).
        var availableFrom: Presence<String>
        var availableUntil: Presence<String>
        var neededFrom: String?
        var neededUntil: String?
        var cancellationPolicy: String?
        var securityDepositCents: Int?

        enum CodingKeys: String, CodingKey {
            case title, description, category, dailyPriceCents, maxDailyPriceCents, location, availableFrom, availableUntil,
                neededFrom, neededUntil, cancellationPolicy, securityDepositCents
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            title = try container.decodeIfPresent(String.self, forKey: .title)
            description = try container.decodeIfPresent(String.self, forKey: .description)
            category = try container.decodeIfPresent(String.self, forKey: .category)
            dailyPriceCents = try container.decodeIfPresent(Int.self, forKey: .dailyPriceCents)
            maxDailyPriceCents = try container.decodeIfPresent(Int.self, forKey: .maxDailyPriceCents)
            location = try container.decodeIfPresent(LocationBody.self, forKey: .location)
            availableFrom = try Presence(container, .availableFrom)
            availableUntil = try Presence(container, .availableUntil)
            neededFrom = try container.decodeIfPresent(String.self, forKey: .neededFrom)
            neededUntil = try container.decodeIfPresent(String.self, forKey: .neededUntil)
            cancellationPolicy = try container.decodeIfPresent(String.self, forKey: .cancellationPolicy)
            securityDepositCents = try container.decodeIfPresent(Int.self, forKey: .securityDepositCents)
        }
    }

    struct RejectionBody: Decodable {
        var reason: String?
    }

    struct BidBody: Decodable {
        var dailyPriceCents: Int?
        var from: String?
        var until: String?
        var message: String?
        /// `balance` or `card` (with `cardId`): how a rental's charge is held.
        var payWith: String?
        var cardId: String?
    }

    // MARK: Commands

    @Sendable func postRental(_ request: Request, context: UserContext) async throws -> EditedResponse<ItemResource> {
        let body = try await request.decodeBody(PostingBody.self, context: context)
        let today = today()
        var fields = FieldCheck()
        let parsedCategory = fields.category(body.category)
        let parsedLocation = fields.location(body.location)
        let from = fields.day(body.availableFrom.value, "availableFrom", required: false)
        fields.bookable(from, "availableFrom", today: today)
        let until = fields.day(body.availableUntil.value, "availableUntil", required: false)
        fields.bookable(until, "availableUntil", today: today)
        fields.require(("title", body.title), ("dailyPriceCents", body.dailyPriceCents))
        fields.alongside(
            ItemDecider.givenFieldProblems(
                title: body.title, description: body.description, priceCents: body.dailyPriceCents, priceField: "dailyPriceCents"))
        let parsedPolicy = body.cancellationPolicy.map { CancellationPolicy(rawValue: $0) } ?? .flexible
        if parsedPolicy == nil {
            fields.problems.append(
                FieldError(field: "cancellationPolicy", code: "invalid_policy", message: "flexible, moderate or strict"))
        }
        let (title, dailyPriceCents, category, location, policy) = try fields.checked(
            body.title, body.dailyPriceCents, parsedCategory, parsedLocation, parsedPolicy)
        let post = PostRental(
            title: title, description: body.description ?? "", category: category, dailyPriceCents: dailyPriceCents,
            location: location, availableFrom: from, availableUntil: until, cancellationPolicy: policy,
            securityDepositCents: body.securityDepositCents ?? 0)
        let handled = try await gateway.handle(
            .postRental(post, today: today), on: .item, id: post.itemID, actor: context.user, first: .newStream)
        return try await posted(handled)
    }

    @Sendable func postRequest(_ request: Request, context: UserContext) async throws -> EditedResponse<ItemResource> {
        let body = try await request.decodeBody(PostingBody.self, context: context)
        let today = today()
        var fields = FieldCheck()
        let parsedCategory = fields.category(body.category)
        let parsedLocation = fields.location(body.location)
        let parsedFrom = fields.day(body.neededFrom, "neededFrom", required: true)
        fields.bookable(parsedFrom, "neededFrom", today: today)
        let parsedUntil = fields.day(body.neededUntil, "neededUntil", required: true)
        fields.bookable(parsedUntil, "neededUntil", today: today)
        fields.require(("title", body.title))
        fields.alongside(
            ItemDecider.givenFieldProblems(
                title: body.title, description: body.description, priceCents: body.maxDailyPriceCents,
                priceField: "maxDailyPriceCents"))
        fields.refuse(body.cancellationPolicy, "cancellationPolicy", "a rental's, fixed when it is posted")
        fields.refuse(body.securityDepositCents, "securityDepositCents", "a rental's, fixed when it is posted")
        let (title, category, from, until, location) = try fields.checked(
            body.title, parsedCategory, parsedFrom, parsedUntil, parsedLocation)
        let post = PostRequest(
            title: title, description: body.description ?? "", category: category,
            maxDailyPriceCents: body.maxDailyPriceCents, neededFrom: from, neededUntil: until, location: location)
        let handled = try await gateway.handle(
            .postRequest(post, today: today), on: .item, id: post.itemID, actor: context.user, first: .newStream)
        return try await posted(handled)
    }

    /// The item a posting made: named by its state, since a repeated request answers the
    /// first one's item, not the id it made up itself.
    func posted(_ handled: Handled<ItemState, ItemEvent>) async throws -> EditedResponse<ItemResource> {
        guard let itemID = handled.state.itemID else { throw DomainError.itemNotFound }
        // Just appended: the view holds what the event says (a read back cost a posting 18%).
        if let append = handled.append, let recordedAt = append.recordedAt, handled.events.count == 1,
            let item = try await ItemResource(
                posted: handled.events[0], at: recordedAt, position: append.lastPosition, ownerHandle: items.handle(of:))
        {
            return EditedResponse(status: .created, response: item)
        }
        return EditedResponse(status: .created, response: try await items.item(itemID, position: handled.append?.lastPosition))
    }

    @Sendable func placeBid(_ request: Request, context: UserContext) async throws -> EditedResponse<BidResource> {
        let itemID = ItemID(try context.parameters.requireUUID("itemID"))
        let body = try await request.decodeBody(BidBody.self, context: context)
        let today = today()
        var fields = FieldCheck()
        let parsedFrom = fields.day(body.from, "from", required: true)
        fields.bookable(parsedFrom, "from", today: today)
        let parsedUntil = fields.day(body.until, "until", required: true)
        fields.bookable(parsedUntil, "until", today: today)
        fields.require(("dailyPriceCents", body.dailyPriceCents))
        let payWith = fields.payWith(body.payWith, cardID: body.cardId)
        let (dailyPriceCents, from, until) = try fields.checked(body.dailyPriceCents, parsedFrom, parsedUntil)
        let bid = PlaceBid(
            dailyPriceCents: dailyPriceCents, from: from, until: until, message: body.message, isBlockedByOwner: false,
            payWith: payWith)
        let (placed, append, event, item) = try await bidding.place(bid, on: itemID, by: context.user, today: today)
        // Just appended: the view holds what the event says, as for a posting.
        if let event, let item, let recordedAt = append?.recordedAt {
            let answer = try await BidResource(
                placed: event, on: item, at: recordedAt, position: append?.lastPosition, bidderHandle: items.handle(of:))
            return EditedResponse(status: .created, response: answer)
        }
        return EditedResponse(status: .created, response: try await items.bid(placed, position: append?.lastPosition))
    }

    @Sendable func revise(_ request: Request, context: UserContext) async throws -> ItemResource {
        // A revision is a posting's fields, all optional; a rental's window ends may be given as
        // null (open). A request's days are not revisable (422 `not_for_this_kind`).
        let body = try await request.decodeBody(PostingBody.self, context: context)
        let today = today()
        var fields = FieldCheck()
        let windowFrom = fields.windowEnd(body.availableFrom, "availableFrom", today: today)
        let windowUntil = fields.windowEnd(body.availableUntil, "availableUntil", today: today)
        let category = body.category == nil ? nil : fields.category(body.category)
        let location = body.location == nil ? nil : fields.location(body.location)
        fields.refuse(body.cancellationPolicy, "cancellationPolicy", "fixed when the rental is posted")
        if body.dailyPriceCents != nil, body.maxDailyPriceCents != nil {
            fields.problems.append(
                FieldError(field: "maxDailyPriceCents", code: "not_for_this_kind", message: "one price: dailyPriceCents or maxDailyPriceCents"))
        }
        try fields.throwIfAny()
        let revision = ReviseItem(
            title: body.title, description: body.description, category: category,
            priceCents: body.dailyPriceCents ?? body.maxDailyPriceCents,
            priceFor: body.dailyPriceCents != nil ? .rental : body.maxDailyPriceCents != nil ? .request : nil, location: location,
            availableFrom: windowFrom, availableUntil: windowUntil)
        return try await itemCommand(.revise(revision, today: today), request, context)
    }

    @Sendable func withdraw(_ request: Request, context: UserContext) async throws -> ItemResource {
        try await itemCommand(.withdraw, request, context)
    }

    @Sendable func complete(_ request: Request, context: UserContext) async throws -> ItemResource {
        try await itemCommand(.complete(today: today()), request, context)
    }

    @Sendable func relist(_ request: Request, context: UserContext) async throws -> ItemResource {
        try await itemCommand(.relist, request, context)
    }

    @Sendable func approveBid(_ request: Request, context: UserContext) async throws -> BidResource {
        let bidID = BidID(try context.parameters.requireUUID("bidID"))
        let append = try await bidding.approve(bidID, by: context.user, today: today())
        return try await items.bid(bidID, position: append?.lastPosition)
    }

    @Sendable func withdrawBid(_ request: Request, context: UserContext) async throws -> BidResource {
        try await bidCommand(context) { .withdrawBid($0) }
    }

    @Sendable func rejectBid(_ request: Request, context: UserContext) async throws -> BidResource {
        let body = try await request.decodeBody(RejectionBody.self, context: context, allowEmpty: true)
        return try await bidCommand(context) { .rejectBid($0, reason: body?.reason) }
    }

    /// A command on the item named in the path; answers the item as it now stands.
    func itemCommand(_ command: ItemCommand, _ request: Request, _ context: UserContext) async throws -> ItemResource {
        let itemID = ItemID(try context.parameters.requireUUID("itemID"))
        let handled = try await bidding.commands.handle(command, on: itemID, actor: context.user)
        return try await items.item(itemID, position: handled.append?.lastPosition)
    }

    /// A command on the bid named in the path, decided on its item's stream; answers the bid.
    func bidCommand(_ context: UserContext, _ command: (BidID) -> ItemCommand) async throws -> BidResource {
        let bidID = BidID(try context.parameters.requireUUID("bidID"))
        let append = try await bidding.decide(command(bidID), onBid: bidID, by: context.user)
        return try await items.bid(bidID, position: append?.lastPosition)
    }

    // MARK: Views

    @Sendable func item(_ request: Request, context: UserContext) async throws -> ItemResource {
        var item = try await items.item(ItemID(try context.parameters.requireUUID("itemID")))
        // Taken down: its owner's still, no one else's to read (SPEC §12.5).
        guard item.status != ItemStatus.takenDown.rawValue || item.ownerId == context.user else { throw DomainError.itemNotFound }
        item.contactEmail = try await items.contactEmail(item, for: context.user)
        return item
    }

    /// Every bid event of the item, from the log, with hashes: the owner and auditors see all of
    /// them, a bidder the events of their own bids, anyone else nothing (403).
    @Sendable func bidHistory(_ request: Request, context: UserContext) async throws -> Page<BidHistoryEntry> {
        let actor = context.user
        let item = try await items.item(ItemID(try context.parameters.requireUUID("itemID")))
        let entries = try await BidHistory.entries(of: item.id, in: gateway.store)
        if actor == item.ownerId { return Page(data: entries, nextCursor: nil) }
        if try await auditors.contains(actor) { return Page(data: entries, nextCursor: nil) }
        let own = entries.filter { $0.bidderId == actor }
        guard !own.isEmpty else {
            throw DomainError(.forbidden, "not_allowed", "Only the owner, auditors and bidders may read this history.")
        }
        return Page(data: own, nextCursor: nil)
    }

    /// The owner sees every bid on the item; anyone else, only their own. Newest first.
    @Sendable func bids(_ request: Request, context: UserContext) async throws -> Page<BidResource> {
        let itemID = ItemID(try context.parameters.requireUUID("itemID"))
        let limit = try request.pageLimit()
        let after = try Cursor(query: request.uri.queryParameters["cursor"].map(String.init))
        let item = try await items.item(itemID)
        return try await items.bids(
            on: item.id, onlyBy: context.user == item.ownerId ? nil : context.user, limit: limit, after: after)
    }
}

/// A field of a body that may be absent, null, or a value: a revision keeps what is absent
/// and clears what is null.
enum Presence<Value: Decodable & Sendable>: Sendable {
    case absent, null, value(Value)

    init<Key: CodingKey>(_ container: KeyedDecodingContainer<Key>, _ key: Key) throws {
        if !container.contains(key) {
            self = .absent
        } else if try container.decodeNil(forKey: key) {
            self = .null
        } else {
            self = .value(try container.decode(Value.self, forKey: key))
        }
    }

    var value: Value? { if case .value(let value) = self { value } else { nil } }
}

extension FieldCheck {
    /// A rental window's end in a revision: nil when absent, `.some(nil)` when null (open).
    /// A day given is judged bookable as of `today` (`bookable`).
    mutating func windowEnd(_ given: Presence<String>, _ field: String, today: Day) -> WindowEnd {
        switch given {
        case .absent: return nil
        case .null: return .some(nil)
        case .value(let text):
            let end = day(text, field, required: true)
            bookable(end, field, today: today)
            return end.map { .some($0) }
        }
    }
}

/// `{ "lat", "lng", "place" }` as sent; the domain checks the ranges.
struct LocationBody: Decodable {
    var lat: Double?
    var lng: Double?
    var place: String?
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
