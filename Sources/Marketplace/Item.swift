import Foundation

// MARK: Events (stream `item-{itemID}`: the item and all its bids)

public enum ItemKind: String, Hashable, Sendable, Codable, CaseIterable {
    case rental, request
}

public enum ItemStatus: String, Hashable, Sendable, Codable {
    case available, reserved, closed, withdrawn
    /// Past its window (a rental's `availableUntil`, a request's `neededUntil`): out of the market.
    case expired
    /// Taken out of the market by an operator (SPEC §12.5).
    case takenDown = "taken_down"
    /// Its owner suspended by an operator: out of the market until they are reinstated.
    case suspended
}

public enum BidStatus: String, Hashable, Sendable, Codable {
    case pending, approved, rejected, withdrawn
}

public struct RentalPosted: EventBody, Hashable {
    public static let eventType = "RentalPosted"
    public var itemID: ItemID
    public var ownerID: UserID
    public var title: String
    public var description: String
    public var category: Category
    public var dailyPriceCents: Int
    public var location: Location
    public var availableFrom: Day?
    public var availableUntil: Day?
    /// Absent in rentals posted before rentals were paid: `flexible`.
    public var cancellationPolicy: CancellationPolicy?
    /// Held with each bid's charge (SPEC §12.5); absent: none.
    public var securityDepositCents: Int?

    public init(
        itemID: ItemID, ownerID: UserID, title: String, description: String, category: Category,
        dailyPriceCents: Int, location: Location, availableFrom: Day? = nil, availableUntil: Day? = nil,
        cancellationPolicy: CancellationPolicy? = nil, securityDepositCents: Int? = nil
    ) {
        self.securityDepositCents = securityDepositCents
        self.itemID = itemID
        self.ownerID = ownerID
        self.title = title
        self.description = description
        self.category = category
        self.dailyPriceCents = dailyPriceCents
        self.location = location
        self.availableFrom = availableFrom
        self.availableUntil = availableUntil
        self.cancellationPolicy = cancellationPolicy
    }
}

public struct RequestPosted: EventBody, Hashable {
    public static let eventType = "RequestPosted"
    public var itemID: ItemID
    public var ownerID: UserID
    public var title: String
    public var description: String
    public var category: Category
    public var maxDailyPriceCents: Int?
    public var neededFrom: Day
    public var neededUntil: Day
    public var location: Location

    public init(
        itemID: ItemID, ownerID: UserID, title: String, description: String, category: Category,
        maxDailyPriceCents: Int? = nil, neededFrom: Day, neededUntil: Day, location: Location
    ) {
        self.itemID = itemID
        self.ownerID = ownerID
        self.title = title
        self.description = description
        self.category = category
        self.maxDailyPriceCents = maxDailyPriceCents
        self.neededFrom = neededFrom
        self.neededUntil = neededUntil
        self.location = location
    }
}

/// Only the fields that changed. `priceCents` is the daily price of a rental, the maximum of a request.
public struct ItemRevised: EventBody, Hashable {
    public static let eventType = "ItemRevised"
    public var title: String?
    public var description: String?
    public var category: Category?
    public var priceCents: Int?
    public var location: Location?

    public init(
        title: String? = nil, description: String? = nil, category: Category? = nil, priceCents: Int? = nil,
        location: Location? = nil
    ) {
        self.title = title
        self.description = description
        self.category = category
        self.priceCents = priceCents
        self.location = location
    }
}

public struct ItemWithdrawn: EventBody, Hashable {
    public static let eventType = "ItemWithdrawn"

    public init() {}
}

public struct BidPlaced: EventBody, Hashable {
    public static let eventType = "BidPlaced"
    public var bidID: BidID
    public var bidderID: UserID
    public var dailyPriceCents: Int
    public var from: Day
    public var until: Day
    public var message: String?
    /// A rental's prices and the hold on the renter's money (absent before rentals were paid,
    /// and on requests).
    public var price: RentalPrice?
    public var hold: RentalHold?

    public init(
        bidID: BidID, bidderID: UserID, dailyPriceCents: Int, from: Day, until: Day, message: String? = nil,
        price: RentalPrice? = nil, hold: RentalHold? = nil
    ) {
        self.bidID = bidID
        self.bidderID = bidderID
        self.dailyPriceCents = dailyPriceCents
        self.from = from
        self.until = until
        self.message = message
        self.price = price
        self.hold = hold
    }
}

public struct BidWithdrawn: EventBody, Hashable {
    public static let eventType = "BidWithdrawn"
    public var bidID: BidID

    public init(bidID: BidID) {
        self.bidID = bidID
    }
}

public struct BidRejected: EventBody, Hashable {
    public static let eventType = "BidRejected"
    public var bidID: BidID
    /// `item_withdrawn`, `another_bid_approved`, or the owner's own words.
    public var reason: String?

    public init(bidID: BidID, reason: String? = nil) {
        self.bidID = bidID
        self.reason = reason
    }
}

public struct BidApproved: EventBody, Hashable {
    public static let eventType = "BidApproved"
    public var bidID: BidID

    public init(bidID: BidID) {
        self.bidID = bidID
    }
}

public struct ItemReserved: EventBody, Hashable {
    public static let eventType = "ItemReserved"
    public var bidID: BidID
    public var bidderID: UserID

    public init(bidID: BidID, bidderID: UserID) {
        self.bidID = bidID
        self.bidderID = bidderID
    }
}

public struct ItemClosed: EventBody, Hashable {
    public static let eventType = "ItemClosed"

    public init() {}
}

public struct ItemRelisted: EventBody, Hashable {
    public static let eventType = "ItemRelisted"

    public init() {}
}

public enum ItemEvent: Hashable, Sendable {
    case rentalPosted(RentalPosted)
    case requestPosted(RequestPosted)
    case revised(ItemRevised)
    case withdrawn(ItemWithdrawn)
    case bidPlaced(BidPlaced)
    case bidWithdrawn(BidWithdrawn)
    case bidRejected(BidRejected)
    case bidApproved(BidApproved)
    case reserved(ItemReserved)
    case closed(ItemClosed)
    case relisted(ItemRelisted)
    case reviewWritten(ReviewWritten)
    case messageSent(MessageSent)
    case photoAdded(ItemPhotoAdded)
    case photoRemoved(ItemPhotoRemoved)
    case bookingConfirmed(BookingConfirmed)
    case bookingCompleted(BookingCompleted)
    case bookingCancelled(BookingCancelled)
    case blackoutAdded(BlackoutAdded)
    case blackoutRemoved(BlackoutRemoved)
    case windowRevised(ItemWindowRevised)
    case expired(ItemExpired)
    case takenDown(ItemTakenDown)
    case suspended(ItemSuspended)
    case reinstated(ItemReinstated)
    case depositReleased(DepositReleased)
    case depositClaimed(DepositClaimed)
    case disputeOpened(DisputeOpened)
    case disputeResolved(DisputeResolved)
    case messageHidden(MessageHidden)
    case reviewHidden(ReviewHidden)
    case reviewsPublished(ReviewsPublished)
    case reviewWindowClosed(ReviewWindowClosed)
    case bookingReminded(BookingReminded)
    case savedSearchesMatched(SavedSearchesMatched)
}

// MARK: Commands

public struct PostRental: Hashable, Sendable {
    public var itemID: ItemID
    public var title: String
    public var description: String
    public var category: Category
    public var dailyPriceCents: Int
    public var location: Location
    public var availableFrom: Day?
    public var availableUntil: Day?
    public var cancellationPolicy: CancellationPolicy
    public var securityDepositCents: Int

    public init(
        itemID: ItemID = ItemID(), title: String, description: String, category: Category, dailyPriceCents: Int,
        location: Location, availableFrom: Day? = nil, availableUntil: Day? = nil,
        cancellationPolicy: CancellationPolicy = .flexible, securityDepositCents: Int = 0
    ) {
        self.securityDepositCents = securityDepositCents
        self.itemID = itemID
        self.title = title
        self.description = description
        self.category = category
        self.dailyPriceCents = dailyPriceCents
        self.location = location
        self.availableFrom = availableFrom
        self.availableUntil = availableUntil
        self.cancellationPolicy = cancellationPolicy
    }
}

public struct PostRequest: Hashable, Sendable {
    public var itemID: ItemID
    public var title: String
    public var description: String
    public var category: Category
    public var maxDailyPriceCents: Int?
    public var neededFrom: Day
    public var neededUntil: Day
    public var location: Location

    public init(
        itemID: ItemID = ItemID(), title: String, description: String, category: Category, maxDailyPriceCents: Int? = nil,
        neededFrom: Day, neededUntil: Day, location: Location
    ) {
        self.itemID = itemID
        self.title = title
        self.description = description
        self.category = category
        self.maxDailyPriceCents = maxDailyPriceCents
        self.neededFrom = neededFrom
        self.neededUntil = neededUntil
        self.location = location
    }
}

public struct ReviseItem: Hashable, Sendable {
    public var title: String?
    public var description: String?
    public var category: Category?
    public var priceCents: Int?
    /// The kind whose price field the price came in: a rental's `dailyPriceCents`, a
    /// request's `maxDailyPriceCents`. A price under the other kind's name is refused.
    public var priceFor: ItemKind?
    public var location: Location?
    /// A rental's window: nil leaves an end as it is, `.some(nil)` opens it.
    public var availableFrom: WindowEnd
    public var availableUntil: WindowEnd

    public init(
        title: String? = nil, description: String? = nil, category: Category? = nil, priceCents: Int? = nil,
        priceFor: ItemKind? = nil, location: Location? = nil, availableFrom: WindowEnd = nil, availableUntil: WindowEnd = nil
    ) {
        self.title = title
        self.description = description
        self.category = category
        self.priceCents = priceCents
        self.priceFor = priceFor
        self.location = location
        self.availableFrom = availableFrom
        self.availableUntil = availableUntil
    }

    /// Whether it changes any of the posting's own fields (the window aside).
    var revisesPosting: Bool {
        title != nil || description != nil || category != nil || priceCents != nil || location != nil
    }

    /// The name of an item kind's price field, as requests and responses spell it.
    public static func priceField(of kind: ItemKind) -> String {
        kind == .rental ? "dailyPriceCents" : "maxDailyPriceCents"
    }
}

public struct PlaceBid: Hashable, Sendable {
    public var bidID: BidID
    public var dailyPriceCents: Int
    public var from: Day
    public var until: Day
    public var message: String?
    /// Whether the item's owner has blocked the bidder: a fact from the owner's stream.
    public var isBlockedByOwner: Bool
    /// How a rental's charge is held (a rental's bid needs it).
    public var payWith: PayWith?
    /// The fees in force, passed in: the bid's event fixes them.
    public var fees: RentalFees
    /// The card's authorisation for the charge, once the processor gave it.
    public var authorizationID: String?

    public init(
        bidID: BidID = BidID(), dailyPriceCents: Int, from: Day, until: Day, message: String? = nil,
        isBlockedByOwner: Bool = false, payWith: PayWith? = nil, fees: RentalFees = .standard, authorizationID: String? = nil
    ) {
        self.bidID = bidID
        self.dailyPriceCents = dailyPriceCents
        self.from = from
        self.until = until
        self.message = message
        self.isBlockedByOwner = isBlockedByOwner
        self.payWith = payWith
        self.fees = fees
        self.authorizationID = authorizationID
    }
}

public enum ItemCommand: Hashable, Sendable {
    /// `today`, here and in `postRequest`, `revise`, `placeBid` and `addBlackout`: the clock's
    /// day, passed in; the days they give must be bookable by it (`bookableProblems`).
    case postRental(PostRental, today: Day)
    case postRequest(PostRequest, today: Day)
    case revise(ReviseItem, today: Day)
    case withdraw
    case placeBid(PlaceBid, today: Day)
    case withdrawBid(BidID)
    case rejectBid(BidID, reason: String?)
    /// `today`: the clock's day, passed in (a bid whose first day has begun is too late).
    /// `chargeID`: the processor's capture of a card-held bid's authorisation.
    case approveBid(BidID, today: Day, chargeID: String? = nil)
    case completeBooking(BookingID, today: Day)
    /// By either party before its first day; refunded by the rental's policy.
    case cancelBooking(BookingID, reason: String?, today: Day)
    case reviewBooking(BookingID, WriteReview, today: Day)
    case addBlackout(BlackoutID, Period, today: Day)
    case removeBlackout(BlackoutID)
    /// The time-driven work on one item, as of `today` (the jobs' only, `UserID.system`):
    /// `staleBids`, the pending bids placed 7 days or more before, as the views know.
    case runJobs(today: Day, staleBids: Set<BidID>)
    /// The saved searches a new posting meets (SPEC §12.7), found by `SearchAlerts`: told
    /// once, while the item is in the market, never to its owner, at most
    /// `SavedSearchLimits.matchesPerPosting`.
    case tellSavedSearches([SavedSearchMatch])
    /// By an operator (the use case checks the role), with why; as of `today` (which
    /// bookings are still to come).
    case takeDown(reason: String, today: Day)
    /// By an operator, with why: the message's text is hidden from its conversation.
    case hideMessage(MessageID, reason: String)
    /// By an operator, with why: out of every list and rating.
    case hideReview(ReviewKey, reason: String)
    /// A user's suspension (SPEC §12.5) on this item: the owner's posting out of the market, or
    /// the user's pending bid withdrawn; and the owner's posting back when they are reinstated.
    case suspendUser(UserID)
    case reinstateOwner
    /// A booking's deposit and disputes (SPEC §12.5): the owner's claim, either party's
    /// dispute, an operator's resolution or cancellation (the role is the use case's to check).
    case claimDeposit(BookingID, amountCents: Int, text: String?, today: Day)
    case openDispute(BookingID, reason: DisputeReason, text: String?, today: Day)
    case resolveDispute(BookingID, renterCents: Int, ownerCents: Int, reason: String, today: Day)
    case cancelBookingAsOperator(BookingID, reason: String, today: Day)
    /// A request's deal ends: only after the approved bid's last day (`today` is after it).
    case complete(today: Day)
    case relist
    case review(WriteReview)
    case sendMessage(SendMessage)
    case addPhoto(digest: String)
    case removePhoto(digest: String)
}

// MARK: Decider

public struct Bid: Hashable, Sendable {
    public var id: BidID
    public var bidderID: UserID
    public var dailyPriceCents: Int
    public var from: Day
    public var until: Day
    public var message: String?
    public var status: BidStatus
    public var reason: String?
    public var price: RentalPrice? = nil
    public var hold: RentalHold? = nil
}

/// An item's stream, folded: nothing yet, or the item as posted and changed since.
public enum ItemState: Hashable, Sendable {
    /// No posting yet: the stream is empty.
    case unposted
    case posted(PostedItem)

    public var item: PostedItem? { if case .posted(let item) = self { item } else { nil } }
    public var exists: Bool { item != nil }
    public var itemID: ItemID? { item?.id }
    public var ownerID: UserID? { item?.ownerID }
}

/// A rental or a request as posted and changed since.
public struct PostedItem: Hashable, Sendable {
    public var id: ItemID
    public var kind: ItemKind
    public var ownerID: UserID
    public var title: String
    public var description: String
    public var category: Category
    /// The daily price of a rental; the maximum daily price of a request, if it has one.
    public var priceCents: Int?
    public var location: Location
    /// The rental's availability, or the request's need; nil ends mean open.
    public var windowFrom: Day?
    public var windowUntil: Day?
    public var status: ItemStatus = .available
    /// In the order placed.
    public var bids: [Bid] = []
    /// The bid approved for the current reservation, if the item is reserved.
    public var reservedBid: BidID?
    /// Every deal completed on the item, oldest first (a rental may be relisted and rented again).
    public var completedDeals: [CompletedDeal] = []
    /// Digests of its photos, in the order added.
    public var photos: [String] = []
    /// A rental's bookings, in the order confirmed, and the days its owner closed.
    public var bookings: [Booking] = []
    public var blackouts: [Blackout] = []
    /// A rental's, fixed in each bid placed on it.
    public var cancellationPolicy: CancellationPolicy = .flexible
    /// A rental's security deposit, fixed in each bid placed on it (SPEC §12.5).
    public var depositCents = 0
    /// Whether the saved searches it met were told of it (once).
    public var savedSearchesTold = false
    /// The messages written on its bids, and those an operator hid (SPEC §12.5).
    public var messages: Set<MessageID> = []
    public var hiddenMessages: Set<MessageID> = []
    /// Its reviews, by deal and side: what an operator's hiding takes back.
    public var reviews: [ReviewKey: WrittenReview] = [:]

    public var pendingBids: [Bid] { bids.filter { $0.status == .pending } }
    public func bid(_ id: BidID) -> Bid? { bids.first { $0.id == id } }
}

public enum ItemDecider {
    public static let initial = ItemState.unposted
    public static let priceRange = 1...999_999


    /// `actor` is the authenticated user giving the command.
    public static func decide(_ command: ItemCommand, _ state: ItemState, actor: UserID) throws -> [ItemEvent] {
        switch command {
        case .postRental(let post, let today):
            guard !state.exists else { throw DomainError.itemExists }
            try requireBookable(
                bookableProblems(post.availableFrom, field: "availableFrom", today: today)
                    + bookableProblems(post.availableUntil, field: "availableUntil", today: today),
                with: givenFieldProblems(
                    title: post.title, description: post.description, priceCents: post.dailyPriceCents,
                    priceField: "dailyPriceCents"))
            var validation = Validation()
            validation.add(postingProblems(title: post.title, description: post.description, location: post.location))
            validation.check(
                priceRange.contains(post.dailyPriceCents), "dailyPriceCents", "invalid_price", "1 to 999999 cents")
            if let from = post.availableFrom, let until = post.availableUntil {
                validation.check(from <= until, "availableUntil", "invalid_period", "availableUntil is before availableFrom")
            }
            validation.check(
                depositRange.contains(post.securityDepositCents), "securityDepositCents", "invalid_deposit", "0 to 100000 cents")
            try validation.throwIfInvalid()
            return [
                .rentalPosted(
                    RentalPosted(
                        itemID: post.itemID, ownerID: actor, title: post.title.trimmed, description: post.description,
                        category: post.category, dailyPriceCents: post.dailyPriceCents, location: post.location,
                        availableFrom: post.availableFrom, availableUntil: post.availableUntil,
                        cancellationPolicy: post.cancellationPolicy,
                        securityDepositCents: post.securityDepositCents > 0 ? post.securityDepositCents : nil))
            ]

        case .postRequest(let post, let today):
            guard !state.exists else { throw DomainError.itemExists }
            try requireBookable(
                bookableProblems(post.neededFrom, field: "neededFrom", today: today)
                    + bookableProblems(post.neededUntil, field: "neededUntil", today: today),
                with: givenFieldProblems(
                    title: post.title, description: post.description, priceCents: post.maxDailyPriceCents,
                    priceField: "maxDailyPriceCents"))
            var validation = Validation()
            validation.add(postingProblems(title: post.title, description: post.description, location: post.location))
            if let max = post.maxDailyPriceCents {
                validation.check(priceRange.contains(max), "maxDailyPriceCents", "invalid_price", "1 to 999999 cents")
            }
            validation.check(post.neededFrom <= post.neededUntil, "neededUntil", "invalid_period", "neededUntil is before neededFrom")
            try validation.throwIfInvalid()
            return [
                .requestPosted(
                    RequestPosted(
                        itemID: post.itemID, ownerID: actor, title: post.title.trimmed, description: post.description,
                        category: post.category, maxDailyPriceCents: post.maxDailyPriceCents, neededFrom: post.neededFrom,
                        neededUntil: post.neededUntil, location: post.location))
            ]

        case .revise(let revision, let today):
            try requireBookable(
                bookableProblems(revision.availableFrom ?? nil, field: "availableFrom", today: today)
                    + bookableProblems(revision.availableUntil ?? nil, field: "availableUntil", today: today))
            let item = try requireOwner(state, actor)
            try requireNotTakenDown(item)
            var validation = Validation()
            if let title = revision.title { validation.add(titleProblems(title)) }
            if let description = revision.description { validation.add(descriptionProblems(description)) }
            if let location = revision.location { validation.add(location.problems()) }
            let priceField = ReviseItem.priceField(of: item.kind)
            if let price = revision.priceCents {
                if let given = revision.priceFor, given != item.kind {
                    validation.check(
                        false, ReviseItem.priceField(of: given), "not_for_this_kind",
                        "this item's price is \(priceField)")
                } else {
                    validation.check(priceRange.contains(price), priceField, "invalid_price", "1 to 999999 cents")
                }
            }
            validation.check(
                revision != ReviseItem(), "body", "nothing_to_change",
                "give at least one of title, description, category, \(priceField), location"
                    + (item.kind == .rental ? ", availableFrom, availableUntil" : ""))
            try validation.throwIfInvalid()
            try requireAvailable(item)
            let window = try reviseWindow(revision.availableFrom, revision.availableUntil, item)
            let outside: [ItemEvent] =
                if case .windowRevised(let revised)? = window { leftOutside(by: revised, item) } else { [] }
            let posting: [ItemEvent] = revision.revisesPosting
                ? [
                    .revised(
                        ItemRevised(
                            title: revision.title?.trimmed, description: revision.description, category: revision.category,
                            priceCents: revision.priceCents, location: revision.location))
                ] : []
            return posting + (window.map { [$0] } ?? []) + outside

        case .tellSavedSearches(let matches):
            guard let item = state.item, !item.savedSearchesTold, item.status == .available else { return [] }
            let others = Array(matches.filter { $0.userID != item.ownerID }.prefix(SavedSearchLimits.matchesPerPosting))
            return others.isEmpty ? [] : [.savedSearchesMatched(SavedSearchesMatched(ownerID: item.ownerID, matches: others))]

        case .withdraw:
            let item = try requireOwner(state, actor)
            // A suspended owner writes nothing (403 at the edge); forgetting them still withdraws.
            if item.status != .suspended { try requireAvailable(item) }
            try requireNoConfirmedBookings(item)
            return [.withdrawn(ItemWithdrawn())]
                + item.pendingBids.map { .bidRejected(BidRejected(bidID: $0.id, reason: "item_withdrawn")) }

        case .placeBid(let bid, let today):
            try requireBookable(
                bookableProblems(bid.from, field: "from", today: today) + bookableProblems(bid.until, field: "until", today: today))
            let item = try requireItem(state)
            guard actor != item.ownerID else {
                throw DomainError(.forbidden, "cannot_bid_on_own_item", "You cannot bid on your own item.")
            }
            guard !bid.isBlockedByOwner else {
                throw DomainError(.forbidden, "blocked_by_owner", "The owner of this item has blocked you.")
            }
            var validation = Validation()
            validation.check(priceRange.contains(bid.dailyPriceCents), "dailyPriceCents", "invalid_price", "1 to 999999 cents")
            validation.check(bid.from <= bid.until, "until", "invalid_period", "until is before from")
            // An offer on a request is at most what its poster said they would pay.
            if item.kind == .request, let max = item.priceCents {
                validation.check(
                    bid.dailyPriceCents <= max, "dailyPriceCents", "over_max_price", "at most \(max) cents, the request's maximum")
            }
            if let message = bid.message {
                validation.check(message.isWithin(0...1000), "message", "too_long", "at most 1000 characters")
            }
            try validation.throwIfInvalid()
            try requireAvailable(item)
            if let from = item.windowFrom, bid.from < from {
                throw DomainError(.invalid, "outside_window", "The item is only available from \(from).",
                    fields: [FieldError(field: "from", code: "outside_window", message: "before \(from)")])
            }
            if let until = item.windowUntil, bid.until > until {
                throw DomainError(.invalid, "outside_window", "The item is only available until \(until).",
                    fields: [FieldError(field: "until", code: "outside_window", message: "after \(until)")])
            }
            guard !item.pendingBids.contains(where: { $0.bidderID == actor }) else {
                throw DomainError(.conflict, "pending_bid_exists", "You already have a pending bid on this item.")
            }
            var price: RentalPrice?
            var hold: RentalHold?
            if item.kind == .rental {
                let conflicts = conflicts(item, with: Period(from: bid.from, until: bid.until))
                guard conflicts.isEmpty else { throw datesUnavailable(conflicts) }
                (price, hold) = try rentalCharge(bid, item)
            }
            return [
                .bidPlaced(
                    BidPlaced(
                        bidID: bid.bidID, bidderID: actor, dailyPriceCents: bid.dailyPriceCents, from: bid.from,
                        until: bid.until, message: bid.message, price: price, hold: hold))
            ]

        case .withdrawBid(let bidID):
            let bid = try requireBid(try requireItem(state), bidID)
            guard bid.bidderID == actor else { throw DomainError(.forbidden, "not_your_bid", "Only the bidder can withdraw a bid.") }
            try requirePending(bid)
            return [.bidWithdrawn(BidWithdrawn(bidID: bidID))]

        case .rejectBid(let bidID, let reason):
            let bid = try requireBid(try requireOwner(state, actor), bidID)
            if let reason {
                guard reason.isWithin(0...500) else {
                    throw DomainError.invalid([FieldError(field: "reason", code: "too_long", message: "at most 500 characters")])
                }
            }
            try requirePending(bid)
            return [.bidRejected(BidRejected(bidID: bidID, reason: reason))]

        case .approveBid(let bidID, let today, let chargeID):
            let item = try requireOwner(state, actor)
            let bid = try requireBid(item, bidID)
            try requireAvailable(item)
            try requirePending(bid)
            if item.kind == .rental { return try approveRental(bid, item, today: today, chargeID: chargeID) }
            return [.bidApproved(BidApproved(bidID: bidID)), .reserved(ItemReserved(bidID: bidID, bidderID: bid.bidderID))]
                + item.pendingBids.filter { $0.id != bidID }.map {
                    .bidRejected(BidRejected(bidID: $0.id, reason: "another_bid_approved"))
                }

        case .completeBooking(let id, let today):
            return try completeBooking(id, state, actor: actor, today: today)

        case .cancelBooking(let id, let reason, let today):
            return try cancelBooking(id, reason: reason, state, actor: actor, today: today)

        case .takeDown(let reason, let today):
            return try takeDown(reason: reason, state, actor: actor, today: today)

        case .hideMessage(let id, let reason):
            return try hideMessage(id, reason: reason, state, actor: actor)

        case .hideReview(let key, let reason):
            return try hideReview(key, reason: reason, state, actor: actor)

        case .suspendUser(let user):
            return try suspend(user, state, actor: actor)

        case .reinstateOwner:
            return try reinstate(state)

        case .claimDeposit(let id, let amount, let text, let today):
            return try claimDeposit(id, amountCents: amount, text: text, state, actor: actor, today: today)

        case .openDispute(let id, let reason, let text, let today):
            return try openDispute(id, reason: reason, text: text, state, actor: actor, today: today)

        case .resolveDispute(let id, let renterCents, let ownerCents, let reason, let today):
            return try resolveDispute(
                id, renterCents: renterCents, ownerCents: ownerCents, reason: reason, state, actor: actor, today: today)

        case .cancelBookingAsOperator(let id, let reason, let today):
            return try cancelAsOperator(id, reason: reason, state, actor: actor, today: today)

        case .reviewBooking(let id, let review, let today):
            return try reviewBooking(id, review, state, actor: actor, today: today)

        case .addBlackout(let id, let period, let today):
            return try addBlackout(id, period, state, actor: actor, today: today)

        case .removeBlackout(let id):
            return try removeBlackout(id, state, actor: actor)

        case .runJobs(let today, let staleBids):
            return try runJobs(state, actor: actor, today: today, staleBids: staleBids)

        case .complete(let today):
            let item = try requireOwner(state, actor)
            try requireRequest(item)
            guard item.status == .reserved else {
                throw DomainError(.conflict, "item_not_reserved", "Only a reserved item can be completed.")
            }
            // As a booking (§12.1): a deal is done, and so reviewable, only after its days.
            if let deal = item.bids.first(where: { $0.status == .approved }), today <= deal.until {
                throw DomainError(
                    .conflict, "deal_not_ended", "The deal runs until \(deal.until); complete it after that day.")
            }
            return [.closed(ItemClosed())]

        case .relist:
            // Only a closed rental was ever relisted (a second release's `ItemRelisted`); a rental
            // is now booked by date and stays available, and a request is posted again.
            try requireRequest(try requireOwner(state, actor))
            throw DomainError(.conflict, "item_not_relistable", "A request is not relisted; post it again.")

        case .review(let review):
            return [try Self.review(review, state, actor: actor)]

        case .sendMessage(let message):
            return [try Self.message(message, state, actor: actor)]

        case .addPhoto(let digest):
            let item = try requireOwner(state, actor)
            try requireNotTakenDown(item)
            return try Photos.adding(digest, to: item.photos) ? [.photoAdded(ItemPhotoAdded(digest: digest))] : []

        case .removePhoto(let digest):
            try Photos.removing(digest, from: try requireOwner(state, actor).photos)
            return [.photoRemoved(ItemPhotoRemoved(digest: digest))]
        }
    }

    public static func evolve(_ state: ItemState, _ event: ItemEvent) -> ItemState {
        switch event {
        case .rentalPosted(let posted):
            return .posted(
                PostedItem(
                    id: posted.itemID, kind: .rental, ownerID: posted.ownerID, title: posted.title,
                    description: posted.description, category: posted.category, priceCents: posted.dailyPriceCents,
                    location: posted.location, windowFrom: posted.availableFrom, windowUntil: posted.availableUntil,
                    cancellationPolicy: posted.cancellationPolicy ?? .flexible, depositCents: posted.securityDepositCents ?? 0))
        case .requestPosted(let posted):
            return .posted(
                PostedItem(
                    id: posted.itemID, kind: .request, ownerID: posted.ownerID, title: posted.title,
                    description: posted.description, category: posted.category, priceCents: posted.maxDailyPriceCents,
                    location: posted.location, windowFrom: posted.neededFrom, windowUntil: posted.neededUntil))
        default:
            // Every other event changes an item that was posted; before that there is none to change.
            guard var item = state.item else { return state }
            evolve(&item, event)
            return .posted(item)
        }
    }

    static func evolve(_ item: inout PostedItem, _ event: ItemEvent) {
        func setBid(_ id: BidID, _ change: (inout Bid) -> Void) {
            if let index = item.bids.firstIndex(where: { $0.id == id }) { change(&item.bids[index]) }
        }
        switch event {
        case .rentalPosted, .requestPosted:
            break
        case .revised(let revised):
            if let title = revised.title { item.title = title }
            if let description = revised.description { item.description = description }
            if let category = revised.category { item.category = category }
            if let price = revised.priceCents { item.priceCents = price }
            if let location = revised.location { item.location = location }
        case .withdrawn:
            item.status = .withdrawn
        case .takenDown:
            item.status = .takenDown
        case .suspended:
            item.status = .suspended
        case .reinstated:
            item.status = .available
        case .bidPlaced(let placed):
            item.bids.append(
                Bid(
                    id: placed.bidID, bidderID: placed.bidderID, dailyPriceCents: placed.dailyPriceCents, from: placed.from,
                    until: placed.until, message: placed.message, status: .pending, reason: nil, price: placed.price,
                    hold: placed.hold))
        case .bidWithdrawn(let withdrawn):
            setBid(withdrawn.bidID) { $0.status = .withdrawn }
        case .bidRejected(let rejected):
            setBid(rejected.bidID) {
                $0.status = .rejected
                $0.reason = rejected.reason
            }
        case .bidApproved(let approved):
            setBid(approved.bidID) { $0.status = .approved }
        case .reserved(let reserved) where item.kind == .rental:
            // The second release's whole-item reservation of a rental: a booking of the bid's days.
            item.reservedBid = reserved.bidID
            if let bid = item.bid(reserved.bidID) {
                evolveBookings(
                    &item,
                    .bookingConfirmed(
                        BookingConfirmed(
                            bookingID: bid.id, ownerID: item.ownerID, renterID: bid.bidderID, from: bid.from, until: bid.until,
                            dailyPriceCents: bid.dailyPriceCents)))
            }
        case .reserved(let reserved):
            item.status = .reserved
            item.reservedBid = reserved.bidID
        case .closed where item.kind == .rental:
            // ... and its closing, that booking's completion.
            if let bidID = item.reservedBid, let booking = item.booking(bidID) {
                evolveBookings(
                    &item, .bookingCompleted(BookingCompleted(bookingID: bidID, ownerID: item.ownerID, renterID: booking.renterID)))
            }
            item.reservedBid = nil
        case .closed:
            item.status = .closed
            if let bidID = item.reservedBid, let bid = item.bid(bidID) {
                item.completedDeals.append(CompletedDeal(bidID: bidID, bidderID: bid.bidderID))
            }
            item.reservedBid = nil
        case .relisted where item.kind == .rental:
            break
        case .relisted:
            item.status = .available
        case .bookingConfirmed, .bookingCompleted, .bookingCancelled, .blackoutAdded, .blackoutRemoved, .windowRevised, .reviewsPublished,
            .reviewWindowClosed, .bookingReminded:
            evolveBookings(&item, event)
        case .depositReleased, .depositClaimed, .disputeOpened, .disputeResolved:
            evolveDisputes(&item, event)
        case .expired:
            item.status = .expired
        case .reviewWritten(let review):
            if let index = item.completedDeals.lastIndex(where: { $0.bidID == review.bidID }) {
                item.completedDeals[index].reviewedBy.insert(review.role)
            }
            item.reviews[ReviewKey(review.bidID, review.role)] = WrittenReview(
                subjectID: review.subjectID, stars: review.stars, published: review.held != true)
        case .reviewHidden(let hidden):
            item.reviews[ReviewKey(hidden.bidID, hidden.role)]?.hidden = true
        case .messageSent(let message):
            item.messages.insert(message.messageID)
        case .messageHidden(let hidden):
            item.hiddenMessages.insert(hidden.messageID)
        case .savedSearchesMatched:
            item.savedSearchesTold = true
        case .photoAdded(let added):
            item.photos.append(added.digest)
        case .photoRemoved(let removed):
            item.photos.removeAll { $0 == removed.digest }
        }
    }

    /// The state after `events`, from nothing.
    public static func fold(_ events: [ItemEvent]) -> ItemState {
        events.reduce(initial, evolve)
    }

    // MARK: Rules shared by several commands


    static func requireItem(_ state: ItemState) throws -> PostedItem {
        guard let item = state.item else { throw DomainError.itemNotFound }
        return item
    }

    static func requireOwner(_ state: ItemState, _ actor: UserID) throws -> PostedItem {
        let item = try requireItem(state)
        guard item.ownerID == actor else { throw DomainError(.forbidden, "not_owner", "Only the item's owner can do this.") }
        return item
    }

    static func requireAvailable(_ item: PostedItem) throws {
        guard item.status == .available else {
            throw DomainError(.conflict, "item_not_available", "The item is \(item.status.rawValue), not available.")
        }
    }

    static func requireBid(_ item: PostedItem, _ id: BidID) throws -> Bid {
        guard let bid = item.bid(id) else { throw DomainError.bidNotFound }
        return bid
    }

    static func requirePending(_ bid: Bid) throws {
        guard bid.status == .pending else {
            throw DomainError(.conflict, "bid_not_pending", "The bid is \(bid.status.rawValue), not pending.")
        }
    }

    static func titleProblems(_ title: String) -> [FieldError] {
        title.trimmed.isWithin(1...120) && !title.contains(where: \.isNewline)
            ? [] : [FieldError(field: "title", code: "invalid_title", message: "1 to 120 characters, one line")]
    }

    static func descriptionProblems(_ description: String) -> [FieldError] {
        description.isWithin(0...5000)
            ? [] : [FieldError(field: "description", code: "too_long", message: "at most 5000 characters")]
    }

    static func postingProblems(title: String, description: String, location: Location) -> [FieldError] {
        titleProblems(title) + descriptionProblems(description) + location.problems()
    }

    /// The same rules over what a request gave, each field only if given: for an edge that
    /// refuses a request for a missing field, so that it names every other bad field at once.
    public static func givenFieldProblems(title: String?, description: String?, priceCents: Int?, priceField: String)
        -> [FieldError]
    {
        (title.map(titleProblems) ?? []) + (description.map(descriptionProblems) ?? [])
            + (priceCents.map { priceRange.contains($0) ? [] : [FieldError(field: priceField, code: "invalid_price", message: "1 to 999999 cents")] } ?? [])
    }
}
