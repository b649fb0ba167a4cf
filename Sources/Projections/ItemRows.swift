import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

/// A row of `items_view`: an item as the log leaves it. `table` is its one declaration.
struct ItemRow: Sendable, Equatable {
    var id = ItemID.none
    var kind = ItemKind.rental
    var owner = UserID.none
    var ownerHandle = ""
    var title = ""
    var description = ""
    var category = Marketplace.Category.other
    /// A rental's daily price, a request's most it would pay.
    var priceCents: Int?
    var location = Location(lat: 0, lng: 0, place: "")
    /// A rental's bookable window, a request's days needed.
    var from: Day?
    var until: Day?
    var status = ItemStatus.available
    var bidCount = 0
    var reviewCount = 0
    var reviewStars = 0
    var photos: [String] = []
    /// The bidder of the deal it is reserved for (a second release's request).
    var deal: UserID?
    var createdAt = Date(timeIntervalSince1970: 0)
    var updatedAt = Date(timeIntervalSince1970: 0)
    var position: Int64 = 0
    /// A rental's security deposit; nil for a request.
    var deposit: Int?

    /// Every column of `items_view` but the generated ones (`earth`, `map_x`, `map_y`, `search`).
    static let table = ViewTable<ItemRow>(
        "items_view", blank: ItemRow(),
        [
            ViewColumn("item_id", "uuid", \.id),
            ViewColumn("kind", \.kind),
            ViewColumn("owner_id", "uuid", \.owner),
            ViewColumn("owner_handle", "text", \.ownerHandle),
            ViewColumn("title", "text", \.title),
            ViewColumn("description", "text", \.description),
            ViewColumn("category", \.category),
            ViewColumn("price_cents", "integer", \.priceCents),
            ViewColumn("lat", "double precision", \.location.lat),
            ViewColumn("lng", "double precision", \.location.lng),
            ViewColumn("place", "text", \.location.place),
            ViewColumn("window_from", day: \.from),
            ViewColumn("window_until", day: \.until),
            ViewColumn("status", \.status),
            ViewColumn("bid_count", "integer", \.bidCount),
            ViewColumn("review_count", "integer", \.reviewCount),
            ViewColumn("review_stars", "integer", \.reviewStars),
            ViewColumn("photos", "text[]", \.photos),
            ViewColumn("deal_bidder_id", "uuid", \.deal),
            ViewColumn("created_at", "timestamp with time zone", \.createdAt),
            ViewColumn("updated_at", "timestamp with time zone", \.updatedAt),
            ViewColumn("position", "bigint", \.position),
            ViewColumn("security_deposit_cents", "integer", \.deposit),
        ])

    /// A rental or request as its posting makes it; nil for any other event. The appends insert
    /// this row, a rebuild holds it, and the command answers with it.
    init?(posted event: ItemEvent, ownerHandle: String, at recordedAt: Date, position: Int64) {
        switch event {
        case .rentalPosted(let posted):
            (id, kind, owner, title, description, category) =
                (posted.itemID, .rental, posted.ownerID, posted.title, posted.description, posted.category)
            (priceCents, location, from, until) = (posted.dailyPriceCents, posted.location, posted.availableFrom, posted.availableUntil)
            // As the log has it: none is NULL, which a rental's answer reads as 0 (`ItemResource`).
            deposit = posted.securityDepositCents
        case .requestPosted(let posted):
            (id, kind, owner, title, description, category) =
                (posted.itemID, .request, posted.ownerID, posted.title, posted.description, posted.category)
            (priceCents, location, from, until) = (posted.maxDailyPriceCents, posted.location, posted.neededFrom, posted.neededUntil)
        default:
            return nil
        }
        self.ownerHandle = ownerHandle
        (createdAt, updatedAt, self.position) = (recordedAt, recordedAt, position)
    }

    init() {}

    /// Every change to a row sets both.
    mutating func touch(_ event: ProjectedEvent) {
        updatedAt = event.recordedAt
        position = event.position
    }

    /// What a revision names, and nothing else.
    mutating func revise(_ revised: ItemRevised, _ event: ProjectedEvent) {
        title = revised.title ?? title
        description = revised.description ?? description
        category = revised.category ?? category
        priceCents = revised.priceCents ?? priceCents
        location = revised.location ?? location
        touch(event)
    }
}

/// A row of `bids_view`: a bid and its fate. `table` is its one declaration.
struct BidRow: Sendable, Equatable {
    var id = BidID.none
    var item: ItemID?
    var owner: UserID?
    var bidder = UserID.none
    var bidderHandle = ""
    var dailyPriceCents = 0
    var from = Day(year: 2000, month: 1, day: 1)!
    var until = Day(year: 2000, month: 1, day: 1)!
    var message: String?
    var status = BidStatus.pending
    var reason: String?
    var createdAt = Date(timeIntervalSince1970: 0)
    var updatedAt = Date(timeIntervalSince1970: 0)

    static let table = ViewTable<BidRow>(
        "bids_view", blank: BidRow(),
        [
            ViewColumn("bid_id", "uuid", \.id),
            ViewColumn("item_id", "uuid", \.item),
            ViewColumn("owner_id", "uuid", \.owner),
            ViewColumn("bidder_id", "uuid", \.bidder),
            ViewColumn("bidder_handle", "text", \.bidderHandle),
            ViewColumn("daily_price_cents", "integer", \.dailyPriceCents),
            ViewColumn("from_day", day: \.from),
            ViewColumn("until_day", day: \.until),
            ViewColumn("message", "text", \.message),
            ViewColumn("status", \.status),
            ViewColumn("reason", "text", \.reason),
            ViewColumn("created_at", "timestamp with time zone", \.createdAt),
            ViewColumn("updated_at", "timestamp with time zone", \.updatedAt),
        ])

    /// A bid as its placing makes it. The appends insert this row, a rebuild holds it until
    /// its fate, and the command answers with it.
    init(placed: BidPlaced, item: ItemID?, owner: UserID?, bidderHandle: String, at recordedAt: Date) {
        (id, self.item, self.owner, bidder, self.bidderHandle) = (placed.bidID, item, owner, placed.bidderID, bidderHandle)
        (dailyPriceCents, from, until, message) = (placed.dailyPriceCents, placed.from, placed.until, placed.message)
        (createdAt, updatedAt) = (recordedAt, recordedAt)
    }

    init() {}
}

extension UUID {
    /// All zeros: a blank row's id until a read sets it.
    static let none = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
}
