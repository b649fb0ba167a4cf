import Aggregates
import EventStore
import Foundation
import Hummingbird
import Marketplace
import Projections
import UseCases

/// Rentals booked by date: a rental's calendar and blackouts, and bookings for their two
/// parties. Commands are decided on the item's stream; answers come from the inline views.
struct BookingsController: Sendable {
    let gateway: CommandGateway
    /// Commands on the item's stream with the money they move.
    let commands: ItemCommands
    let bookings: BookingsView
    let conversations: ConversationsView
    /// The clock's day, passed to the rules that need it.
    let today: @Sendable () -> Day

    struct PeriodBody: Decodable {
        var from: String?
        var until: String?
    }

    struct CancellationBody: Decodable {
        var reason: String?
    }

    struct ClaimBody: Decodable {
        var amountCents: Int?
        var text: String?
    }

    struct DisputeBody: Decodable {
        var reason: String?
        var text: String?
    }

    struct BlackoutResource: ResponseEncodable {
        var id: BlackoutID
        var from: String
        var until: String
        var position: Int64?
    }

    // MARK: Calendar

    /// `from` and `until` (default: today and 89 days on), at most a year; every day once.
    @Sendable func availability(_ request: Request, context: UserContext) async throws -> Availability {
        let itemID = ItemID(try context.parameters.requireUUID("itemID"))
        let query = request.uri.queryParameters
        var fields = FieldCheck()
        let today = today()
        let from = query["from"].map { fields.day(String($0), "from", required: true) } ?? today
        let until = query["until"].map { fields.day(String($0), "until", required: true) } ?? from.map { $0.adding(days: 89) }
        try fields.throwIfAny()
        guard let from, let until else { throw DomainError.invalid(fields.problems) }
        guard from <= until else {
            throw DomainError.invalid([FieldError(field: "until", code: "invalid_period", message: "until is before from")])
        }
        let period = Period(from: from, until: until)
        guard period.days <= BookingsView.maxCalendarDays else {
            throw DomainError(
                .invalid, "range_too_long", "A calendar covers at most \(BookingsView.maxCalendarDays) days.",
                fields: [FieldError(field: "until", code: "range_too_long", message: "at most \(BookingsView.maxCalendarDays) days after from")])
        }
        return try await bookings.availability(of: itemID, over: period)
    }

    @Sendable func addBlackout(_ request: Request, context: UserContext) async throws -> EditedResponse<BlackoutResource> {
        let itemID = ItemID(try context.parameters.requireUUID("itemID"))
        let body = try await request.decodeBody(PeriodBody.self, context: context)
        let today = today()
        var fields = FieldCheck()
        let parsedFrom = fields.day(body.from, "from", required: true)
        fields.bookable(parsedFrom, "from", today: today)
        let parsedUntil = fields.day(body.until, "until", required: true)
        fields.bookable(parsedUntil, "until", today: today)
        let (from, until) = try fields.checked(parsedFrom, parsedUntil)
        let id = BlackoutID()
        let handled = try await commands.handle(
            .addBlackout(id, Period(from: from, until: until), today: today), on: itemID, actor: context.user)
        // A repeated request answers the first one's blackout: the one over these days.
        let blackout = handled.state.item?.blackout(id)
            ?? handled.state.item?.blackouts.last { $0.period == Period(from: from, until: until) }
        guard let blackout else { throw DomainError.blackoutNotFound }
        return EditedResponse(
            status: .created,
            response: BlackoutResource(
                id: blackout.id, from: blackout.period.from.description, until: blackout.period.until.description,
                position: handled.append?.lastPosition))
    }

    @Sendable func removeBlackout(_ request: Request, context: UserContext) async throws -> Removed {
        let itemID = ItemID(try context.parameters.requireUUID("itemID"))
        let blackoutID = BlackoutID(try context.parameters.requireUUID("blackoutID"))
        let handled = try await commands.handle(.removeBlackout(blackoutID), on: itemID, actor: context.user)
        return Removed(position: handled.append?.lastPosition)
    }

    // MARK: Bookings

    @Sendable func booking(_ request: Request, context: UserContext) async throws -> BookingResource {
        try await bookings.booking(BookingID(try context.parameters.requireUUID("bookingID")), for: context.user)
    }

    /// `role=owner|renter` (default renter), `when=upcoming|past` (default upcoming).
    @Sendable func myBookings(_ request: Request, context: UserContext) async throws -> Page<BookingResource> {
        let query = request.uri.queryParameters
        var problems: [FieldError] = []
        let limit = request.pageLimit(1...100, default: 20, problems: &problems)
        let role = query["role"].map { BookingsView.Role(rawValue: String($0)) } ?? .renter
        if role == nil { problems.append(FieldError(field: "role", code: "invalid_choice", message: "owner or renter")) }
        let when = query["when"].map { BookingsView.When(rawValue: String($0)) } ?? .upcoming
        if when == nil { problems.append(FieldError(field: "when", code: "invalid_choice", message: "upcoming or past")) }
        if !problems.isEmpty { throw DomainError.invalid(problems) }
        let after = try Cursor(query: query["cursor"].map(String.init))
        return try await bookings.bookings(of: context.user, role: role!, when: when!, today: today(), limit: limit, after: after)
    }

    /// Each party, once, after completion and within 14 days; held until the other's comes.
    @Sendable func review(_ request: Request, context: UserContext) async throws -> EditedResponse<ReviewResource> {
        let bookingID = BookingID(try context.parameters.requireUUID("bookingID"))
        let body = try await request.decodeBody(ConversationsController.ReviewBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("stars", body.stars))
        let stars = try fields.checked(body.stars)
        // Anyone but its two parties is told there is no such booking.
        let booking = try await bookings.booking(bookingID, for: context.user)
        _ = try await gateway.handle(
            .reviewBooking(bookingID, WriteReview(stars: stars, text: body.text ?? ""), today: today()), on: .item,
            id: booking.itemId,
            actor: context.user)
        guard let review = try await conversations.review(ofBooking: bookingID, by: context.user) else {
            throw DomainError.bookingNotFound
        }
        return EditedResponse(status: .created, response: review)
    }

    /// The owner, once the last day has passed.
    @Sendable func complete(_ request: Request, context: UserContext) async throws -> BookingResource {
        let bookingID = BookingID(try context.parameters.requireUUID("bookingID"))
        // The booking as one of its parties sees it: anyone else is told there is none.
        let booking = try await bookings.booking(bookingID, for: context.user)
        let handled = try await commands.handle(.completeBooking(bookingID, today: today()), on: booking.itemId, actor: context.user)
        return try await bookings.booking(bookingID, for: context.user, position: handled.append?.lastPosition)
    }

    /// The owner claims up to the deposit within 72 hours after the last day (SPEC §12.5): the
    /// deposit then waits for an operator.
    @Sendable func claim(_ request: Request, context: UserContext) async throws -> EditedResponse<BookingResource> {
        let bookingID = BookingID(try context.parameters.requireUUID("bookingID"))
        let body = try await request.decodeBody(ClaimBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("amountCents", body.amountCents), ("text", body.text))
        let amountCents = try fields.checked(body.amountCents)
        let booking = try await bookings.booking(bookingID, for: context.user)
        let handled = try await commands.handle(
            .claimDeposit(bookingID, amountCents: amountCents, text: body.text, today: today()), on: booking.itemId,
            actor: context.user)
        return EditedResponse(
            status: .created, response: try await bookings.booking(bookingID, for: context.user, position: handled.append?.lastPosition))
    }

    /// Either party, from the first day to 72 hours after the last: the booking's escrow and
    /// deposit frozen until an operator resolves it.
    @Sendable func dispute(_ request: Request, context: UserContext) async throws -> EditedResponse<BookingResource> {
        let bookingID = BookingID(try context.parameters.requireUUID("bookingID"))
        let body = try await request.decodeBody(DisputeBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("reason", body.reason))
        let parsedReason = SafetyController.choice(body.reason, DisputeReason.self, "reason", &fields)
        let reason = try fields.checked(parsedReason)
        let booking = try await bookings.booking(bookingID, for: context.user)
        let handled = try await commands.handle(
            .openDispute(bookingID, reason: reason, text: body.text, today: today()), on: booking.itemId, actor: context.user)
        return EditedResponse(
            status: .created, response: try await bookings.booking(bookingID, for: context.user, position: handled.append?.lastPosition))
    }

    /// Either party, before the first day: the days are free again and the charge divided by
    /// the rental's policy (SPEC §12.2).
    @Sendable func cancel(_ request: Request, context: UserContext) async throws -> BookingResource {
        let bookingID = BookingID(try context.parameters.requireUUID("bookingID"))
        let body = try await request.decodeBody(CancellationBody.self, context: context, allowEmpty: true)
        let booking = try await bookings.booking(bookingID, for: context.user)
        let handled = try await commands.handle(
            .cancelBooking(bookingID, reason: body?.reason, today: today()), on: booking.itemId, actor: context.user)
        return try await bookings.booking(bookingID, for: context.user, position: handled.append?.lastPosition)
    }
}

extension BookingResource: ResponseEncodable {}
extension Availability: ResponseEncodable {}
