import Aggregates
import EventStore
import Foundation
import Marketplace
import Testing

/// One event of every case of every aggregate: each encodes under its own type name and
/// decodes back to itself. A case added to a domain enum without a registered payload fails
/// here, not on the first user who triggers it.
@Suite("Every event through its aggregate's codec")
struct EventEncodingTests {
    let user = UserID(), other = UserID(), item = ItemID(), loan = LoanID(), card = CardID(), bid = BidID()
    let here = Location(lat: 27.7, lng: 85.3, place: "Kathmandu")
    let day = Day("2026-12-01")!
    let digest = String(repeating: "ab", count: 32)

    func roundTrip<ID, State, Command, Event: Hashable>(
        _ events: [Event], _ aggregate: Aggregate<ID, State, Command, Event>
    ) throws -> [String] {
        try events.map { event in
            let stored = try aggregate.codec.encode(event)
            // The body is the value JSONEncoder() writes (JSONStream's Foundation style): the
            // log's JSON did not change with the encoder.
            let payload = try #require(Mirror(reflecting: event).children.first?.value as? any Encodable)
            let foundation = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(payload))
            #expect(try stored.data.decode(JSONValue.self) == foundation, "\(stored.type)")
            let decoded = try aggregate.codec.codec.decode(type: stored.type, schemaVersion: stored.schemaVersion, data: stored.data)
            #expect(decoded == event, "\(stored.type)")
            return stored.type
        }
    }

    @Test func everyCaseEncodesUnderItsNameAndDecodesBack() throws {
        let users: [UserEvent] = [
            .registered(UserRegistered(userID: user, handle: "ada", displayName: "Ada", email: "ada@example.org", country: "NP")),
            .profileUpdated(ProfileUpdated(displayName: "Ada L.", country: "GB", defaultShareCents: 2500)),
            .blocked(UserBlocked(userID: other)), .unblocked(UserUnblocked(userID: other)), .forgotten(UserForgotten(userID: user)),
            .cardAdded(
                CardOnFile(
                    cardID: card, network: .visa, last4: "4242", expMonth: 12, expYear: 2030, fingerprint: "f",
                    processorToken: "tok")),
            .cardExpiryUpdated(PaymentCardExpiryUpdated(cardID: card, expMonth: 1, expYear: 2031)),
            .cardRemoved(PaymentCardRemoved(cardID: card)),
            .fundsDeposited(FundsDeposited(amountCents: 500, cardID: card, chargeID: "ch_1")),
            .balanceDebited(BalanceDebited(amountCents: 100, loanID: loan)),
            .cardCharged(CardCharged(cardID: card, amountCents: 100, chargeID: "ch_2", loanID: loan)),
            .balanceCredited(BalanceCredited(amountCents: 50, loanID: loan, reason: .repayment)),
            .photoChanged(ProfilePhotoChanged(digest: digest)),
        ]
        let items: [ItemEvent] = [
            .rentalPosted(
                RentalPosted(
                    itemID: item, ownerID: user, title: "Bike", description: "", category: .bikes, dailyPriceCents: 900,
                    location: here, availableFrom: day, availableUntil: day)),
            .requestPosted(
                RequestPosted(
                    itemID: item, ownerID: user, title: "Tent", description: "", category: .other, maxDailyPriceCents: 300,
                    neededFrom: day, neededUntil: day, location: here)),
            .revised(ItemRevised(title: "Fast bike", priceCents: 1000)),
            .withdrawn(ItemWithdrawn()),
            .bidPlaced(BidPlaced(bidID: bid, bidderID: other, dailyPriceCents: 800, from: day, until: day, message: "hi")),
            .bidWithdrawn(BidWithdrawn(bidID: bid)), .bidRejected(BidRejected(bidID: bid, reason: "no")),
            .bidApproved(BidApproved(bidID: bid)), .reserved(ItemReserved(bidID: bid, bidderID: other)),
            .closed(ItemClosed()), .relisted(ItemRelisted()),
            .reviewWritten(ReviewWritten(bidID: bid, authorID: other, subjectID: user, role: .bidder, stars: 5, text: "Good")),
            .messageSent(MessageSent(messageID: MessageID(), bidID: bid, authorID: user, recipientID: other, text: "When?")),
            .photoAdded(ItemPhotoAdded(digest: digest)), .photoRemoved(ItemPhotoRemoved(digest: digest)),
        ]
        let loans: [LoanEvent] = [
            .posted(
                LoanPosted(
                    loanID: loan, borrowerID: user, title: "Loom", description: "", sector: "Arts", activity: "Weaving",
                    countryCode: "NP", location: here, amountCents: 10_000, deadline: day)),
            .sharePurchased(LoanSharePurchased(lenderID: other, amountCents: 2500)), .funded(LoanFunded()),
            .repaymentRecorded(LoanRepaymentRecorded(amountCents: 100, credits: [LenderAmount(lenderID: other, amountCents: 100)])),
            .repaid(LoanRepaid()), .expired(LoanExpired(refunds: [LenderAmount(lenderID: other, amountCents: 2500)])),
            .photoAdded(LoanPhotoAdded(digest: digest)), .photoRemoved(LoanPhotoRemoved(digest: digest)),
        ]
        let carts: [CartEvent] = [
            .itemAdded(CartItemAdded(loanID: loan, amountCents: 2500)),
            .amountChanged(CartItemAmountChanged(loanID: loan, amountCents: 3000)),
            .itemRemoved(CartItemRemoved(loanID: loan)), .cleared(CartCleared()),
            .checkedOut(CartCheckedOut(purchases: [LoanAmount(loanID: loan, amountCents: 3000)], totalCents: 3000, paidWith: "balance")),
        ]
        let names = try roundTrip(users, .user) + roundTrip(items, .item) + roundTrip(loans, .loan) + roundTrip(carts, .cart)
        #expect(names.count == 41)
        #expect(Set(names).count == names.count, "one name per event type")
    }

    /// An absent optional is left out of the log's JSON, as JSONEncoder leaves it, where the
    /// API's answers write `null`.
    @Test func absentOptionalsAreLeftOutOfTheLog() throws {
        let stored = try Aggregate.user.codec.encode(.profileUpdated(ProfileUpdated(displayName: "Ada")))
        #expect(try stored.data.decode(JSONValue.self) == .object(["displayName": .string("Ada")]))
        let decoded = try Aggregate.user.codec.codec.decode(type: stored.type, schemaVersion: stored.schemaVersion, data: stored.data)
        #expect(decoded == .profileUpdated(ProfileUpdated(displayName: "Ada")))
    }

    /// A payload the aggregate's codec does not know is refused at encoding: nothing is
    /// stored that its stream's readers could not read back.
    @Test func aPayloadOfAnotherAggregateIsRefused() {
        #expect(throws: EventDecodingError.unknownType("CartCleared")) {
            try Aggregate.item.codec.codec.encode(CartCleared())
        }
    }

    /// A stream is an aggregate's when its name is the category, then `-` or nothing: not
    /// when the category is only the start of a longer word.
    @Test func anAggregateOwnsItsStreamsAndNoOthers() {
        #expect(Aggregate.item.owns(Aggregate.item.stream(item)))
        #expect(Aggregate.item.owns(StreamID(rawValue: "item")))
        #expect(!Aggregate.item.owns(StreamID(rawValue: "items-\(item)")))
        #expect(!Aggregate.item.owns(StreamID(rawValue: "ite")))
        #expect(!Aggregate.item.owns(Aggregate.user.stream(user)))
        #expect(!Aggregate.user.owns(StreamID(rawValue: "user_x-1")))
        #expect(Aggregate.loan.owns(Aggregate.loan.stream(loan)))
    }
}
