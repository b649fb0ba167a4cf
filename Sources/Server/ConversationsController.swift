import Foundation
import Hummingbird
import Marketplace
import Projections
import UseCases

/// Reviews after a deal, messages on a bid, and each user's feed (SPEC §11.4). Commands go
/// through the gateway like every other; answers come from the inline views.
struct ConversationsController: Sendable {
    let gateway: CommandGateway
    let bidding: Bidding
    let items: ItemsView
    let views: ConversationsView
    let hub: FeedHub
    /// Whose sessions a stream's reader must still hold, checked once a `heartbeat`.
    let accounts: Accounts
    let heartbeat: Duration

    struct ReviewBody: Decodable {
        var stars: Int?
        var text: String?
    }

    struct MessageBody: Decodable {
        var text: String?
    }

    // MARK: Reviews

    /// `POST /v1/items/{id}/reviews`: the owner or the approved bidder of a completed deal.
    @Sendable func review(_ request: Request, context: UserContext) async throws -> EditedResponse<ReviewResource> {
        let itemID = ItemID(try context.parameters.requireUUID("itemID"))
        let body = try await request.decodeBody(ReviewBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("stars", body.stars))
        let stars = try fields.checked(body.stars)
        _ = try await gateway.handle(
            .review(WriteReview(stars: stars, text: body.text ?? "")), on: .item, id: itemID, actor: context.user)
        guard let review = try await views.review(onItem: itemID, by: context.user) else { throw DomainError.itemNotFound }
        return EditedResponse(status: .created, response: review)
    }

    @Sendable func itemReviews(_ request: Request, context: UserContext) async throws -> Page<ReviewResource> {
        let item = try await items.item(ItemID(try context.parameters.requireUUID("itemID")))
        return try await views.reviews(ofItem: item.id, limit: try request.pageLimit(), after: try Self.cursor(request))
    }

    @Sendable func userReviews(_ request: Request, context: UserContext) async throws -> Page<ReviewResource> {
        let user = UserID(try context.parameters.requireUUID("userID"))
        return try await views.reviews(about: user, limit: try request.pageLimit(), after: try Self.cursor(request))
    }

    // MARK: Messages

    /// `POST /v1/bids/{id}/messages`: the item's owner to the bidder, or the bidder to the owner.
    @Sendable func sendMessage(_ request: Request, context: UserContext) async throws -> EditedResponse<MessageResource> {
        let bidID = BidID(try context.parameters.requireUUID("bidID"))
        let body = try await request.decodeBody(MessageBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("text", body.text))
        let text = try fields.checked(body.text)
        let (messageID, _) = try await bidding.send(SendMessage(bidID: bidID, text: text), by: context.user)
        guard let message = try await views.message(messageID) else { throw DomainError.bidNotFound }
        return EditedResponse(status: .created, response: message)
    }

    /// Newest first; only the bid's two parties read it.
    @Sendable func messages(_ request: Request, context: UserContext) async throws -> Page<MessageResource> {
        let bid = try await items.bid(BidID(try context.parameters.requireUUID("bidID")))
        let owner = try await items.item(bid.itemId).ownerId
        guard context.user == bid.bidderId || context.user == owner else {
            throw DomainError(.forbidden, "not_a_party", "Only the item's owner and the bidder read their messages.")
        }
        let limit = try request.pageLimit()
        var before: Int64?
        if let text = request.uri.queryParameters["cursor"].map(String.init), !text.isEmpty {
            guard let position = Int64(text), position > 0 else {
                throw DomainError.invalid([FieldError(field: "cursor", code: "invalid_cursor", message: "not a cursor this server gave")])
            }
            before = position
        }
        return try await views.messages(onBid: bid.id, limit: limit, before: before)
    }

    // MARK: Feed

    /// `GET /v1/me/feed?after=`: my notices after a position, oldest first.
    /// `GET /v1/me/feed`: newest first, paged by `cursor` as every list is; or, with `after`
    /// (a position) or `Last-Event-ID`, oldest first from there, to catch up as the stream
    /// does. Either way `nextCursor` goes back as `cursor`, and reads on the same way.
    @Sendable func feed(_ request: Request, context: UserContext) async throws -> Page<Notice> {
        var fields = [FieldError]()
        let limit = request.pageLimit(1...100, default: 50, problems: &fields)
        let query = request.uri.queryParameters
        let cursor = query["cursor"].map(String.init)
        let resumed = request.headers[.lastEventID] != nil || query["after"] != nil
        let (after, problems) = EventsController.after(request)
        fields += problems
        var read = FeedCursor.newestFirst(before: nil)
        if let cursor {
            if resumed {
                fields.append(FieldError(field: "cursor", code: "invalid_cursor", message: "a cursor, or after: not both"))
            } else if let decoded = FeedCursor(cursor) {
                read = decoded
            } else {
                fields.append(FieldError(field: "cursor", code: "invalid_cursor", message: "not a cursor of this list"))
            }
        } else if resumed {
            read = .oldestFirst(after: after)
        }
        if !fields.isEmpty { throw DomainError.invalid(fields) }
        switch read {
        case .newestFirst(let before):
            let (notices, more) = try await views.feed(of: context.user, before: before, limit: limit)
            return Page(data: notices, nextCursor: more ? notices.last.map { FeedCursor.newestFirst(before: $0.position).encoded } : nil)
        case .oldestFirst(let after):
            let page = try await views.feed(of: context.user, after: after, limit: limit)
            return Page(
                data: page.data, nextCursor: page.nextCursor == nil ? nil : page.data.last.map { FeedCursor.oldestFirst(after: $0.position).encoded })
        }
    }

    /// `GET /v1/me/feed/stream`: my notices after `after` or `Last-Event-ID`, then each new one
    /// as it commits, as server-sent events; a comment line when there is nothing to say.
    @Sendable func feedStream(_ request: Request, context: UserContext) async throws -> Response {
        let (after, problems) = EventsController.after(request)
        if !problems.isEmpty { throw DomainError.invalid(problems) }
        let user = context.user
        let views = views
        let hub = hub
        let watching = StreamWatch(accounts: accounts, token: context.token, user: user, every: heartbeat)
        return Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
            body: ResponseBody { writer in
                // Subscribed before the backlog is read: whatever commits in between comes from
                // the hub, and what both give is sent once (positions only grow). Here, not
                // before the response: a body never written never holds a subscription.
                let subscription = try await hub.subscribe(user)
                defer { subscription.cancel() }
                var watch = watching
                try await writer.write(ByteBuffer(string: ": your feed after \(after)\n\n"))
                var sent = after
                while true {
                    let page = try await views.feed(of: user, after: sent, limit: 100)
                    for notice in page.data { try await writer.write(try Self.event(notice)) }
                    sent = page.data.last?.position ?? sent
                    if page.nextCursor == nil { break }
                }
                for await step in subscription.steps.cancelOnGracefulShutdown() {
                    // Logged out (here or on another server): the stream ends.
                    guard await watch.mayGoOn() else { break }
                    switch step {
                    case .notice(let notice):
                        guard notice.position > sent else { continue }
                        try await writer.write(try Self.event(notice))
                        sent = notice.position
                    case .heartbeat:
                        try await writer.write(ByteBuffer(string: ": heartbeat\n\n"))
                    }
                }
                try await writer.finish(nil)
            })
    }

    /// One notice as a server-sent event: its position is the id a reconnection resumes after.
    /// The JSON is the same as `GET /v1/me/feed`'s, nulls included.
    static func event(_ notice: Notice) throws -> ByteBuffer {
        var buffer = ByteBuffer(string: "id: \(notice.position)\nevent: \(notice.kind)\ndata: ")
        buffer.writeBytes(try StreamingJSONEncoder.encode(notice))
        buffer.writeString("\n\n")
        return buffer
    }

    static func cursor(_ request: Request) throws -> Cursor? {
        try Cursor(query: request.uri.queryParameters["cursor"].map(String.init))
    }
}

/// Where a feed page goes on from, and which way: opaque to clients (base64url of
/// `before:N` or `after:N`), as every list's cursor is.
enum FeedCursor: Equatable {
    case newestFirst(before: Int64?)
    case oldestFirst(after: Int64)

    init?(_ text: String) {
        guard text.utf8.count <= 64, let data = Cursor.base64URLDecoded(text) else { return nil }
        let parts = String(decoding: data, as: UTF8.self).split(separator: ":", maxSplits: 1)
        guard parts.count == 2, let position = Int64(parts[1]), position >= 0 else { return nil }
        switch parts[0] {
        case "before": self = .newestFirst(before: position)
        case "after": self = .oldestFirst(after: position)
        default: return nil
        }
    }

    var encoded: String {
        let text =
            switch self {
            case .newestFirst(let before): "before:\(before ?? Int64.max)"
            case .oldestFirst(let after): "after:\(after)"
            }
        return Cursor.base64URL(Data(text.utf8))
    }
}
