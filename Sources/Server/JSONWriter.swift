import Foundation
import JSONStream
import Marketplace
import Projections
import UUIDs

/// A value that writes its JSON itself, member by member, where `Encodable` pays for boxed
/// containers and generic metadata on every member: for the resources a list returns twenty
/// of (through `Encodable` they were a fifth of the server's time on the market, `perf`).
/// The bytes are exactly those of its `Encodable` form; `JSONWriterTests` compares them.
protocol JSONWritable: JSONSelfWriting {
    func write(to json: inout JSONWriter) throws
}

extension JSONWritable {
    /// Writes on in the encoder's own bytes, without copying them.
    public func writeJSON(into bytes: inout [UInt8]) throws {
        var json = JSONWriter()
        json.exchangeBytes(with: &bytes)
        defer { json.exchangeBytes(with: &bytes) }
        try write(to: &json)
    }
}

/// JSON written straight into bytes, in the encoder's spelling: escapes, numbers and dates as
/// `JSONSink` writes them, absent optionals as `null`.
struct JSONWriter {
    private var bytes: [UInt8] = []
    /// A value was written at this level: the next member or element needs a comma first.
    private var needsComma = false

    /// Swaps the bytes written so far with `other`: to write on in the encoder's own bytes
    /// without copying them.
    mutating func exchangeBytes(with other: inout [UInt8]) { swap(&bytes, &other) }

    mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
    }

    mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
    }

    mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// A member's key; its value is written next. Keys are the resources' own plain names.
    mutating func key(_ key: StaticString) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        bytes.append(contentsOf: "\":".utf8)
        needsComma = false
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = false
    }

    private mutating func raw(_ text: String) {
        separate()
        bytes.append(contentsOf: text.utf8)
        needsComma = true
    }

    mutating func null() { raw("null") }

    mutating func value(_ text: String) {
        separate()
        var text = text
        text.withUTF8 { JSONSink.appendEscaped($0, to: &bytes) }
        needsComma = true
    }

    mutating func value(_ number: Int) { raw(String(number)) }
    mutating func value(_ number: Int64) { raw(String(number)) }
    mutating func value(_ date: Date) {
        separate()
        JSONSink.appendQuotedISO8601(date, to: &bytes)
        needsComma = true
    }
    mutating func value<Tag>(_ id: Identifier<Tag>) { value(id.rawValue.lowercaseText) }

    mutating func value(_ number: Double) throws {
        guard let text = JSONSink.numberText(number) else {
            throw EncodingError.invalidValue(number, .init(codingPath: [], debugDescription: "\(number) is not valid JSON"))
        }
        raw(text)
    }

    mutating func value(_ writable: some JSONWritable) throws { try writable.write(to: &self) }

    mutating func value(_ elements: [some JSONWritable]) throws {
        beginArray()
        for element in elements { try element.write(to: &self) }
        endArray()
    }

    mutating func value(_ text: String?) {
        if let text { value(text) } else { null() }
    }

    mutating func value(_ number: Int?) {
        if let number { value(number) } else { null() }
    }

    mutating func value(_ number: Int64?) {
        if let number { value(number) } else { null() }
    }

    mutating func value(_ number: Double?) throws {
        if let number { try value(number) } else { null() }
    }

    mutating func field(_ name: StaticString, _ text: String) {
        key(name)
        value(text)
    }

    mutating func field(_ name: StaticString, _ flag: Bool) {
        key(name)
        raw(flag ? "true" : "false")
    }

    mutating func field(_ name: StaticString, _ text: String?) {
        key(name)
        value(text)
    }

    mutating func field(_ name: StaticString, _ number: Int) {
        key(name)
        value(number)
    }

    mutating func field(_ name: StaticString, _ number: Int?) {
        key(name)
        value(number)
    }

    mutating func field(_ name: StaticString, _ number: Int64?) {
        key(name)
        value(number)
    }

    mutating func field(_ name: StaticString, _ number: Double) throws {
        key(name)
        try value(number)
    }

    mutating func field(_ name: StaticString, _ number: Double?) throws {
        key(name)
        try value(number)
    }

    mutating func field(_ name: StaticString, _ date: Date) {
        key(name)
        value(date)
    }

    mutating func field<Tag>(_ name: StaticString, _ id: Identifier<Tag>) {
        key(name)
        value(id)
    }

    mutating func field(_ name: StaticString, _ writable: some JSONWritable) throws {
        key(name)
        try value(writable)
    }

    mutating func field(_ name: StaticString, _ writable: (some JSONWritable)?) throws {
        key(name)
        if let writable { try value(writable) } else { null() }
    }

    mutating func field(_ name: StaticString, _ elements: [some JSONWritable]) throws {
        key(name)
        try value(elements)
    }
}

extension Page: JSONSelfWriting where Element: JSONWritable {}

extension Page: JSONWritable where Element: JSONWritable {
    func write(to json: inout JSONWriter) throws {
        json.beginObject()
        try json.field("data", data)
        json.field("nextCursor", nextCursor)
        json.endObject()
    }
}

extension Location: JSONWritable {
    func write(to json: inout JSONWriter) throws {
        json.beginObject()
        try json.field("lat", lat)
        try json.field("lng", lng)
        json.field("place", place)
        json.endObject()
    }
}

extension PhotoResource: JSONWritable {
    func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("digest", digest)
        json.field("url", url)
        json.endObject()
    }
}

extension ItemResource: JSONWritable {
    func write(to json: inout JSONWriter) throws {
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
        json.endObject()
    }
}

extension LoanResource: JSONWritable {
    func write(to json: inout JSONWriter) throws {
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
    func write(to json: inout JSONWriter) throws {
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
    func write(to json: inout JSONWriter) throws {
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
    func write(to json: inout JSONWriter) throws {
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
    func write(to json: inout JSONWriter) throws {
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
    func write(to json: inout JSONWriter) throws {
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
    func write(to json: inout JSONWriter) throws {
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
    func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("from", from)
        json.field("until", until)
        try json.field("ranges", ranges)
        json.endObject()
    }
}

extension Availability.Range: JSONWritable {
    func write(to json: inout JSONWriter) throws {
        json.beginObject()
        json.field("from", from)
        json.field("until", until)
        json.field("state", state.rawValue)
        json.endObject()
    }
}
