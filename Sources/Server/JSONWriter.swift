import EventStore
import Foundation
import JSONStream
import Marketplace
import Projections
import UUIDs

/// The resources that write their own JSON (`JSONWritable`, with `JSONWriter`, both in
/// `JSONStream`): here, where the resources' types (`Projections`, `Marketplace`) and the
/// identifiers' spelling (`UUIDs`) are seen. Each `write(to:)` follows its type's declaration
/// order, member for member, so that the bytes are its `Encodable` form's; `JSONWriterTests`
/// compares them.

extension JSONWriter {
    /// An identifier as its `Encodable` form writes it: the UUID's lower-case text.
    mutating func value<Tag>(_ id: Identifier<Tag>) { value(id.rawValue.lowercaseText) }

    mutating func field<Tag>(_ name: StaticString, _ id: Identifier<Tag>) {
        key(name)
        value(id)
    }
}

extension Page: JSONSelfWriting where Element: JSONWritable {}

extension Page: JSONWritable where Element: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        try json.field("data", data)
        json.field("nextCursor", nextCursor)
        json.endObject()
    }
}

extension Location: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        try json.field("lat", lat)
        try json.field("lng", lng)
        json.field("place", place)
        json.endObject()
    }
}

extension PhotoResource: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("digest", digest)
        json.field("url", url)
        json.endObject()
    }
}

extension ItemResource: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("id", id)
        json.field("kind", kind)
        json.field("title", title)
        json.field("description", description)
        json.field("category", category)
        json.field("dailyPriceCents", dailyPriceCents)
        json.field("maxDailyPriceCents", maxDailyPriceCents)
        json.field("status", status)
        json.field("ownerId", ownerId)
        json.field("ownerHandle", ownerHandle)
        try json.field("location", location)
        json.field("availableFrom", availableFrom)
        json.field("availableUntil", availableUntil)
        json.field("securityDepositCents", securityDepositCents)
        json.field("neededFrom", neededFrom)
        json.field("neededUntil", neededUntil)
        json.field("bidCount", bidCount)
        try json.field("rating", rating)
        json.field("reviewCount", reviewCount)
        try json.field("photos", photos)
        json.field("createdAt", createdAt)
        json.field("updatedAt", updatedAt)
        json.field("contactEmail", contactEmail)
        try json.field("distanceKm", distanceKm)
        json.field("position", position)
        for member in shown {
            json.key(member.name)
            try json.shown(member.value)
        }
        json.endObject()
    }
}

extension JSONWriter {
    /// A shown column's value (`ShownMember`), as its `Encodable` form writes it: a scalar, or
    /// an array of them (no column holds an object).
    mutating func shown(_ value: JSONValue) throws {
        switch value {
        case .null: null()
        case .bool(let flag): self.value(flag)
        case .int(let number): self.value(number)
        case .double(let number): try self.value(number)
        case .string(let text): self.value(text)
        case .array(let elements):
            beginArray()
            for element in elements { try shown(element) }
            endArray()
        case .object:
            preconditionFailure("a shown column holds no object")
        }
    }
}

extension LoanResource: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("id", id)
        json.field("borrowerId", borrowerId)
        json.field("title", title)
        json.field("description", description)
        json.field("sector", sector)
        json.field("activity", activity)
        json.field("country", country)
        try json.field("location", location)
        json.field("amountCents", amountCents)
        json.field("fundedCents", fundedCents)
        json.field("repaidCents", repaidCents)
        json.field("stillNeededCents", stillNeededCents)
        json.field("lenderCount", lenderCount)
        json.field("status", status)
        json.field("deadline", deadline)
        try json.field("photos", photos)
        json.field("createdAt", createdAt)
        json.field("updatedAt", updatedAt)
        try json.field("distanceKm", distanceKm)
        json.field("borrowerHandle", borrowerHandle)
        json.field("borrowerDisplayName", borrowerDisplayName)
        try json.field("borrowerPhoto", borrowerPhoto)
        json.field("position", position)
        json.endObject()
    }
}

extension BidResource: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("id", id)
        json.field("itemId", itemId)
        json.field("bidderId", bidderId)
        json.field("bidderHandle", bidderHandle)
        json.field("dailyPriceCents", dailyPriceCents)
        json.field("from", from)
        json.field("until", until)
        json.field("message", message)
        json.field("status", status)
        json.field("reason", reason)
        json.field("createdAt", createdAt)
        json.field("itemTitle", itemTitle)
        json.field("itemKind", itemKind)
        try json.field("itemPhoto", itemPhoto)
        try json.field("payment", payment)
        json.field("position", position)
        json.endObject()
    }
}

extension RentalPayment: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("days", days)
        json.field("totalCents", totalCents)
        json.field("renterFeeCents", renterFeeCents)
        json.field("ownerFeeCents", ownerFeeCents)
        json.field("chargeCents", chargeCents)
        json.field("payoutCents", payoutCents)
        json.field("cancellationPolicy", cancellationPolicy)
        json.field("depositCents", depositCents)
        json.field("payWith", payWith)
        json.endObject()
    }
}

extension CardResource: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("id", id)
        json.field("network", network)
        json.field("last4", last4)
        json.field("expMonth", expMonth)
        json.field("expYear", expYear)
        json.field("redacted", redacted)
        json.field("position", position)
        json.endObject()
    }
}

extension MyLoan: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("loanId", loanId)
        json.field("title", title)
        json.field("amountCents", amountCents)
        json.field("repaidCents", repaidCents)
        json.field("status", status)
        json.field("country", country)
        try json.field("photo", photo)
        json.field("borrowerHandle", borrowerHandle)
        json.endObject()
    }
}

extension ProfileLinks: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("posts", posts)
        json.field("bids", bids)
        json.field("bidsReceived", bidsReceived)
        json.field("loans", loans)
        json.field("approvalsGiven", approvalsGiven)
        json.field("approvalsReceived", approvalsReceived)
        json.endObject()
    }
}

/// `GET /v1/me`: its lists through `Encodable` were 4% of the server's time on it (`perf`).
extension PrivateProfile: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("id", id)
        json.field("handle", handle)
        json.field("displayName", displayName)
        json.field("email", email)
        json.field("country", country)
        json.field("memberSince", memberSince)
        json.field("balanceCents", balanceCents)
        json.field("availableCents", availableCents)
        json.field("emailVerified", emailVerified)
        json.field("defaultShareCents", defaultShareCents)
        json.field("completedDeals", completedDeals)
        try json.field("rating", rating)
        json.field("reviewCount", reviewCount)
        try json.field("photos", photos)
        try json.field("cards", cards)
        try json.field("posts", posts)
        try json.field("bids", bids)
        try json.field("bidsReceived", bidsReceived)
        try json.field("approvalsGiven", approvalsGiven)
        try json.field("approvalsReceived", approvalsReceived)
        try json.field("loans", loans)
        json.key("blocked")
        json.beginArray()
        for user in blocked { json.value(user) }
        json.endArray()
        try json.field("links", links)
        json.field("position", position)
        json.endObject()
    }
}

extension Availability: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("from", from)
        json.field("until", until)
        try json.field("ranges", ranges)
        json.endObject()
    }
}

extension Availability.Range: JSONWritable {
    public func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("from", from)
        json.field("until", until)
        json.field("state", state.rawValue)
        json.endObject()
    }
}
