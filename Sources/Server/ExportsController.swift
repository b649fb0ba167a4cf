import Foundation
import HTTPTypes
import Hummingbird
import JSONStream
import Marketplace
import NIOCore
import Projections

/// The operators' CSV exports (SPEC §12.6): `GET /v1/admin/exports/ledger.csv?from=&until=`,
/// `users.csv` and `bookings.csv`, behind `OperatorsOnly`. Streamed: each batch `Exports`
/// reads is written to the client before the next is read (the writer waits while the
/// client's socket is full), so a million rows take the memory of one batch.
///
/// The headers are sent before the first row is read: a failure halfway ends the response
/// early (a truncated file), it cannot turn into a problem answer any more.
struct ExportsController: Sendable {
    let exports: Exports

    @Sendable func ledger(_ request: Request, context: UserContext) async throws -> Response {
        let period = try Self.period(request)
        let exports = exports
        return Self.attachment(
            "ledger.csv", header: Self.ledgerHeader, cells: { (entry: LedgerEntry) in Self.ledgerCells(entry) }
        ) { each in
            try await exports.ledger(from: period.from, until: period.until, each)
        }
    }

    @Sendable func users(_ request: Request, context: UserContext) async throws -> Response {
        let exports = exports
        return Self.attachment(
            "users.csv", header: Self.userHeader, cells: { (user: UserExportRow) in Self.userCells(user) }
        ) { each in
            try await exports.users(each)
        }
    }

    @Sendable func bookings(_ request: Request, context: UserContext) async throws -> Response {
        let exports = exports
        return Self.attachment(
            "bookings.csv", header: Self.bookingHeader, cells: { (booking: BookingExportRow) in Self.bookingCells(booking) }
        ) { each in
            try await exports.bookings(each)
        }
    }

    /// A CSV file to save: its header, then each batch of rows as `rows` hands it over.
    static func attachment<Row: Sendable>(
        _ filename: String, header: [String], cells: @escaping @Sendable (Row) -> [String],
        rows: @escaping @Sendable (_ each: ([Row]) async throws -> Void) async throws -> Void
    ) -> Response {
        Response(
            status: .ok,
            headers: [
                .contentType: "text/csv; charset=utf-8", .contentDisposition: "attachment; filename=\"\(filename)\"",
                .cacheControl: "no-store",
            ],
            body: ResponseBody { writer in
                var csv = CSVWriter()
                csv.append(header)
                try await rows { batch in
                    for row in batch { csv.append(cells(row)) }
                    try await writer.write(ByteBuffer(bytes: csv.take()))
                }
                if !csv.isEmpty { try await writer.write(ByteBuffer(bytes: csv.take())) }
                try await writer.finish(nil)
            })
    }

    /// `from` and `until`: RFC 3339 times, or days (UTC): from the start of `from`'s day to the
    /// end of `until`'s. `from` is included, `until` is not. Each bad one is named (422).
    static func period(_ request: Request) throws -> (from: Date?, until: Date?) {
        var problems = [FieldError]()
        func instant(_ name: String, dayEnds: Bool) -> Date? {
            guard let given = request.uri.queryParameters[Substring(name)].map(String.init) else { return nil }
            if let day = Day(given) { return Date(timeIntervalSince1970: Double(day.ordinal + (dayEnds ? 1 : 0)) * 86_400) }
            if let date = RFC3339.date(given) { return date }
            problems.append(FieldError(field: name, code: "invalid_time", message: "an RFC 3339 time or a day, YYYY-MM-DD"))
            return nil
        }
        let from = instant("from", dayEnds: false)
        let until = instant("until", dayEnds: true)
        if let from, let until, until <= from {
            problems.append(FieldError(field: "until", code: "before_from", message: "a time after from"))
        }
        if !problems.isEmpty { throw DomainError.invalid(problems) }
        return (from, until)
    }

    // MARK: Columns

    /// Amounts are unsigned cents with their direction beside them (`balance_effect`): a
    /// negative number would start with `-`, which the formula guard prefixes with `'`, and a
    /// spreadsheet would then take it for text and leave it out of every sum.
    static let ledgerHeader = [
        "position", "time", "user_id", "kind", "reason", "balance_effect", "amount_cents", "processor_id", "payout_id",
        "booking_id", "bid_id", "item_id", "loan_id", "card_id", "fees_cents",
    ]

    static func ledgerCells(_ entry: LedgerEntry) -> [String] {
        [
            String(entry.position), Self.time(entry.at), entry.userID.description, entry.kind, entry.reason ?? "",
            entry.effect.rawValue, String(entry.amountCents), entry.processorID ?? "", text(entry.payoutID),
            text(entry.bookingID), text(entry.bidID), text(entry.itemID), text(entry.loanID), text(entry.cardID),
            entry.feesCents.map(String.init) ?? "",
        ]
    }

    static let userHeader = [
        "user_id", "handle", "display_name", "email", "email_verified", "country", "member_since", "balance_cents",
        "held_cents", "suspended", "suspended_until", "forgotten", "forgotten_at",
    ]

    static func userCells(_ user: UserExportRow) -> [String] {
        [
            user.id.description, user.handle, user.displayName, user.email, String(user.emailVerified), user.country ?? "",
            Self.time(user.memberSince), String(user.balanceCents), String(user.heldCents), String(user.suspended),
            Self.time(user.suspendedUntil), String(user.forgottenAt != nil), Self.time(user.forgottenAt),
        ]
    }

    static let bookingHeader = [
        "booking_id", "item_id", "item_title", "owner_id", "owner_handle", "renter_id", "renter_handle", "from", "until",
        "days", "status", "daily_price_cents", "total_cents", "charge_cents", "renter_fee_cents", "owner_fee_cents",
        "payout_cents", "pay_with", "deposit_cents", "deposit_status", "refund_cents", "settled_payout_cents",
        "settled_fees_cents", "claim_cents", "dispute_status", "dispute_reason", "resolution_renter_cents",
        "resolution_owner_cents", "created_at", "completed_at", "cancelled_at",
    ]

    static func bookingCells(_ booking: BookingExportRow) -> [String] {
        [
            booking.id.description, booking.itemID.description, booking.itemTitle, booking.ownerID.description,
            booking.ownerHandle, booking.renterID.description, booking.renterHandle, booking.from, booking.until,
            String(booking.days), booking.status, String(booking.dailyPriceCents), String(booking.totalCents),
            text(booking.chargeCents), text(booking.renterFeeCents), text(booking.ownerFeeCents), text(booking.payoutCents),
            booking.payWith ?? "", text(booking.depositCents), booking.depositStatus ?? "", text(booking.refundCents),
            text(booking.settledPayoutCents), text(booking.settledFeesCents), text(booking.claimCents),
            booking.disputeStatus ?? "", booking.disputeReason ?? "", text(booking.resolutionRenterCents),
            text(booking.resolutionOwnerCents), Self.time(booking.createdAt), Self.time(booking.completedAt),
            Self.time(booking.cancelledAt),
        ]
    }

    /// `2026-11-22T13:32:07Z`, as the JSON answers write times; empty for none.
    static func time(_ date: Date?) -> String {
        guard let date else { return "" }
        var bytes = [UInt8]()
        JSONSink.appendQuotedISO8601(date, to: &bytes)
        return String(decoding: bytes.dropFirst().dropLast(), as: UTF8.self)
    }

    /// An id's or a number's text; empty for none.
    static func text(_ value: (some CustomStringConvertible)?) -> String { value?.description ?? "" }
}
