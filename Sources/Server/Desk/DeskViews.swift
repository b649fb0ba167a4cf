import Aggregates
import Crypto
import EventStore
import Foundation
import Hummingbird
import Marketplace
import Postgres
import Projections
import UseCases

/// The desk's pages: each read once, through the same reads as `/v1/admin`, and laid out
/// as the values its template shows (text already formatted, nothing left to decide there).
extension DeskController {
    @Sendable func reportsPage(_ visit: DeskVisit) async throws -> Response {
        let status = visit.query("status") == "resolved" ? "resolved" : "open"
        let (rows, more) = try await reportsView.reports(
            status: status, before: visit.query("cursor").flatMap(Int64.init), limit: 50)
        let reports: [[String: Any]] = rows.map { report in
            [
                "id": report.id.description, "reason": report.reason, "subjectType": report.subjectType,
                "subjectId": report.subjectId.description, "subjectLink": Self.link(report.subjectType, report.subjectId),
                "reporterId": report.reporterId.description, "createdAt": DeskFormat.time(report.createdAt),
                "text": report.text ?? "", "resolved": report.status == "resolved", "action": report.action ?? "",
                "resolution": report.resolution ?? "", "csrf": visit.who.csrf, "actions": ReportAction.allCases.map(\.rawValue),
                "actPath": Self.act(on: report.subjectType, report.subjectId)?.path ?? "",
                "actLabel": Self.act(on: report.subjectType, report.subjectId)?.label ?? "",
            ]
        }
        return pages.page(
            "reports",
            frame(
                visit.who, title: status == "open" ? "Open reports" : "Resolved reports",
                [
                    "reports": reports, "open": status == "open", "status": status,
                    "next": more ? rows.last.map { String($0.position) } ?? "" : "",
                ], request: visit.request))
    }

    /// What an operator may do to a report's subject from the reports page (a user is
    /// suspended from their own page).
    static func act(on subjectType: String, _ id: UUID) -> (path: String, label: String)? {
        switch subjectType {
        case "item": ("/desk/items/\(id)/takedown", "Take the item down")
        case "loan": ("/desk/loans/\(id)/takedown", "Take the loan down")
        case "review": ("/desk/reviews/\(id)/hide", "Hide the review")
        case "message": ("/desk/messages/\(id)/hide", "Hide the message")
        default: nil
        }
    }

    static func link(_ subjectType: String, _ id: UUID) -> String {
        switch subjectType {
        case "item": "/desk/items/\(id)"
        case "user": "/desk/users/\(id)"
        default: ""
        }
    }

    @Sendable func usersPage(_ visit: DeskVisit) async throws -> Response {
        let q = visit.query("q")?.trimmingWhiteSpace() ?? ""
        var found = [AdminUserSummary]()
        if !q.isEmpty {
            guard q.count <= 254 else {
                throw DomainError.invalid([FieldError(field: "q", code: "invalid_query", message: "1 to 254 characters")])
            }
            found = try await reads.users(matching: q)
            // One match, by e-mail or the whole handle: their page.
            if found.count == 1 { return DeskPages.redirect("/desk/users/\(found[0].id)") }
        }
        let users: [[String: Any]] = found.map { user in
            [
                "id": user.id.description, "handle": user.handle,
                "displayName": DeskFormat.personal(user.displayName, forgotten: user.forgotten),
                "email": DeskFormat.personal(user.email, forgotten: user.forgotten), "standing": Self.standing(user),
            ]
        }
        return pages.page(
            "users",
            frame(visit.who, title: "Find a user", ["q": q, "searched": !q.isEmpty, "users": users, "hasUsers": !users.isEmpty], request: visit.request))
    }

    static func standing(_ user: AdminUserSummary) -> String {
        if user.forgotten { return "forgotten" }
        guard let suspension = user.suspension else { return user.isOperator ? "active (operator)" : "active" }
        return "suspended \(suspension.until.map { "until \(DeskFormat.time($0))" } ?? "until reinstated"): \(suspension.reason)"
    }

    @Sendable func userPage(_ visit: DeskVisit) async throws -> Response {
        let whole = try await reads.user(UserID(try visit.id("userID")))
        let user = whole.user
        let csrf = visit.who.csrf
        let summary: [String: Any] = [
            "id": user.id.description, "handle": user.handle,
            "displayName": DeskFormat.personal(user.displayName, forgotten: user.forgotten),
            "email": DeskFormat.personal(user.email, forgotten: user.forgotten),
            "emailState": user.forgotten ? "" : user.emailVerified ? "(verified)" : "(not verified)",
            "country": DeskFormat.personal(user.country, forgotten: user.forgotten),
            "memberSince": DeskFormat.time(user.memberSince), "forgotten": user.forgotten,
            "identity": user.identityVerified ? "verified" : "not verified", "identityVerified": user.identityVerified,
            "standing": Self.standing(user), "suspended": user.suspension != nil,
            "balance": DeskFormat.money(user.balanceCents), "held": DeskFormat.money(user.heldCents),
        ]
        let postings: [[String: Any]] = whole.postings.map { item in
            [
                "id": item.id.description, "ownerId": item.ownerId.description, "title": item.title, "kind": item.kind,
                "status": item.status, "price": DeskFormat.money(item.dailyPriceCents ?? item.maxDailyPriceCents) + " a day",
                "canTakeDown": !["taken_down", "withdrawn", "completed", "closed"].contains(item.status), "csrf": csrf,
            ]
        }
        let bookings = whole.bookings.map(Self.bookingRow)
        let history: [[String: Any]] = whole.balanceHistory.map { entry in
            [
                "position": entry.position, "at": DeskFormat.time(entry.at), "kind": entry.kind, "reason": entry.reason ?? "",
                "amount": DeskFormat.money(entry.amountCents), "balance": DeskFormat.money(entry.balanceCents),
            ]
        }
        func report(_ report: ReportResource) -> [String: Any] {
            [
                "createdAt": DeskFormat.time(report.createdAt), "reason": report.reason, "subjectType": report.subjectType,
                "status": report.status, "text": report.text ?? "",
            ]
        }
        let sanctions: [[String: Any]] = whole.sanctions.map { sanction in
            [
                "at": DeskFormat.time(sanction.at), "type": sanction.type, "operatorId": sanction.operatorId ?? "",
                "reason": sanction.reason ?? "",
            ]
        }
        return pages.page(
            "user",
            frame(
                visit.who, title: user.handle,
                [
                    "user": summary, "postings": postings, "bookings": bookings, "hasBookings": !bookings.isEmpty, "history": history,
                    "hasHistory": !history.isEmpty, "reportsAbout": whole.reportsAbout.map(report),
                    "reportsFiled": whole.reportsFiled.map(report), "sanctions": sanctions,
                ], request: visit.request))
    }

    static func bookingRow(_ booking: BookingResource) -> [String: Any] {
        [
            "id": booking.id.description, "shortId": String(booking.id.description.prefix(8)), "itemTitle": booking.itemTitle,
            "ownerHandle": booking.ownerHandle, "renterHandle": booking.renterHandle, "from": booking.from, "until": booking.until,
            "status": booking.status, "disputeState": disputeState(booking),
        ]
    }

    static func disputeState(_ booking: BookingResource) -> String {
        if let dispute = booking.dispute { return "dispute \(dispute.status)" }
        if let claim = booking.claim { return "claim \(claim.status)" }
        return ""
    }

    @Sendable func bookingsPage(_ visit: DeskVisit) async throws -> Response {
        let status = visit.query("status").flatMap { AdminReads.bookingStatuses.contains($0) ? $0 : nil } ?? "disputed"
        let after = try Cursor(query: visit.query("cursor"))
        let (rows, next) = try await reads.view.bookings(status: status, user: nil, after: after, limit: 50)
        let bookings = rows.map(Self.bookingRow)
        return pages.page(
            "bookings",
            frame(
                visit.who, title: "Bookings: \(status)",
                [
                    "bookings": bookings, "hasBookings": !bookings.isEmpty, "status": status, "next": next ?? "",
                    "statuses": AdminReads.bookingStatuses.map { ["value": $0, "selected": $0 == status] },
                ], request: visit.request))
    }

    @Sendable func bookingPage(_ visit: DeskVisit) async throws -> Response {
        let booking = try await bookings.booking(BookingID(try visit.id("bookingID")))
        let payment = booking.payment
        // What the booking's escrow holds, which a resolution divides: all it was paid while
        // under way, the deposit after completion until it is released or divided.
        let held =
            booking.status == "confirmed"
            ? (payment?.chargeCents ?? 0) + (payment?.depositCents ?? 0)
            : booking.status == "completed" && booking.depositStatus == "held" ? booking.depositCents ?? 0 : 0
        let awaits = booking.dispute?.status == "open" || (booking.claim != nil && booking.depositStatus == "held")
        var values: [String: Any] = [
            "id": booking.id.description, "itemId": booking.itemId.description, "itemTitle": booking.itemTitle,
            "ownerId": booking.ownerId.description, "ownerHandle": booking.ownerHandle, "renterId": booking.renterId.description,
            "renterHandle": booking.renterHandle, "from": booking.from, "until": booking.until, "days": booking.days,
            "dailyPrice": DeskFormat.money(booking.dailyPriceCents), "status": booking.status,
            "total": DeskFormat.money(booking.totalCents), "deposit": DeskFormat.money(booking.depositCents ?? 0),
            "depositStatus": booking.depositStatus.map { "(\($0))" } ?? "", "held": DeskFormat.money(held), "heldCents": held,
            "canResolve": awaits, "canCancel": booking.status == "confirmed",
        ]
        if let payment {
            values["paid"] = true
            values["paidWith"] = payment.payWith
            values["charge"] = DeskFormat.money(payment.chargeCents)
            values["payout"] = DeskFormat.money(payment.payoutCents)
        }
        if booking.refundCents != nil || booking.settledPayoutCents != nil {
            values["settled"] = true
            values["refund"] = DeskFormat.money(booking.refundCents ?? 0)
            values["settledPayout"] = DeskFormat.money(booking.settledPayoutCents ?? 0)
            values["fees"] = DeskFormat.money(booking.settledFeesCents ?? 0)
        }
        if let claim = booking.claim {
            values["claim"] = ["amount": DeskFormat.money(claim.amountCents), "text": claim.text ?? ""]
        }
        if let dispute = booking.dispute {
            values["dispute"] =
                [
                    "status": dispute.status, "openedBy": dispute.openedBy == booking.ownerId ? "the owner" : "the renter",
                    "reason": dispute.reason, "text": dispute.text ?? "", "resolution": dispute.renterCents != nil,
                    "renter": DeskFormat.money(dispute.renterCents), "owner": DeskFormat.money(dispute.ownerCents),
                ] as [String: Any]
        }
        return pages.page(
            "booking", frame(visit.who, title: "Booking \(booking.id.description.prefix(8))", ["b": values], request: visit.request))
    }

    @Sendable func itemPage(_ visit: DeskVisit) async throws -> Response {
        let item = try await items.item(ItemID(try visit.id("itemID")))
        let stream = StreamID.item(item.id)
        let (bids, acts) = try await BidHistory.history(of: item.id, in: store)
        let chainBreak = try await store.verify(stream: stream)
        let (checkpoint, checkpointClass) = try await checkpointStatus()
        let bidRows: [[String: Any]] = bids.map { entry in
            [
                "position": entry.position, "at": DeskFormat.time(entry.at), "type": entry.type,
                "bidderId": entry.bidderId.description, "bidderShort": String(entry.bidderId.description.prefix(8)),
                "price": DeskFormat.money(entry.dailyPriceCents), "status": entry.status.rawValue, "hash": entry.hash,
                "previousHash": entry.previousHash,
            ]
        }
        let actRows: [[String: Any]] = acts.map { act in
            [
                "at": DeskFormat.time(act.at), "type": act.type, "operatorId": act.operatorId ?? "", "position": act.position,
                "hash": act.hash,
            ]
        }
        return pages.page(
            "item",
            frame(
                visit.who, title: "Item \(item.title)",
                [
                    "item": [
                        "id": item.id.description, "ownerId": item.ownerId.description, "ownerHandle": item.ownerHandle,
                        "kind": item.kind, "status": item.status,
                    ],
                    "stream": stream.rawValue, "csrf": visit.who.csrf,
                    "canTakeDown": !["taken_down", "withdrawn", "completed", "closed"].contains(item.status),
                    "chain": chainBreak.map { "The hash chain is broken: \($0)" } ?? "The item's hash chain verifies: every event's hash and link recomputed.",
                    "chainClass": chainBreak == nil ? "good" : "bad", "checkpoint": checkpoint, "checkpointClass": checkpointClass,
                    "bids": bidRows, "hasBids": !bidRows.isEmpty, "acts": actRows,
                ], request: visit.request))
    }

    /// The last signed checkpoint: its signature checked with the trusted key, and the log
    /// checked to still extend it (every stream's head where it was signed).
    func checkpointStatus() async throws -> (String, String) {
        guard let checkpoint = try await store.lastCheckpoint() else {
            return ("No checkpoint has been signed yet (AUDIT_CHECKPOINT_EVERY, or lender audit checkpoint).", "bad")
        }
        if let known = verdicts.verdict(for: checkpoint) { return (known.text, known.good ? "good" : "bad") }
        var (text, good) = try await verify(checkpoint)
        text += " (checked \(DeskFormat.time(Date())); checked again at the next checkpoint, or by lender audit verify)"
        verdicts.keep((text, good == "good"), for: checkpoint)
        return (text, good)
    }

    func verify(_ checkpoint: LogCheckpoint) async throws -> (String, String) {
        let key = trustedKey ?? Data(base64Encoded: checkpoint.publicKey).flatMap { try? Curve25519.Signing.PublicKey(rawRepresentation: $0) }
        guard let key, checkpoint.isSigned(by: key) else {
            return ("The last checkpoint, at position \(checkpoint.position), is NOT signed by the trusted key.", "bad")
        }
        if let failure = try await store.verify(checkpoint: checkpoint) {
            return ("The log no longer extends the checkpoint at position \(checkpoint.position): \(failure)", "bad")
        }
        let trust = trustedKey == nil ? " (by the key it names: no trusted key is configured)" : ""
        return (
            "Checkpoint verified: signed\(trust) at \(checkpoint.signedAt) at position \(checkpoint.position), and the log still extends it.",
            "good"
        )
    }

    @Sendable func healthPage(_ visit: DeskVisit) async throws -> Response {
        let head = try await store.headPosition()
        let lags = try await ProjectionLag.read(from: store.pool)
        let outbox = try await store.pool.query(
            """
            SELECT count(*)::int8 AS pending, extract(epoch FROM now() - min(created_at))::float8 AS oldest
            FROM outbox WHERE sent_at IS NULL AND dead_at IS NULL
            """
        ).single()
        let pending = try outbox.decode("pending", as: Int.self)
        let oldest = try outbox.decode("oldest", as: Double?.self)
        let replica: String =
            switch await readiness.replicaStatus() {
            case nil: "no read replica"
            case let status?:
                "\(status.status), \(status.lagPositions.map { "\($0) positions" } ?? "?") and \(status.lagSeconds.map { String(format: "%.1f s", $0) } ?? "?") behind"
            }
        let (checkpoint, _) = try await checkpointStatus()
        var values: [String: Any] = [
            "head": head, "replica": replica, "checkpoint": checkpoint,
            "outbox": pending == 0 ? "nothing waiting" : "\(pending) waiting, the oldest for \(Int(oldest ?? 0)) s",
            "projections": lags.map { ["name": $0.projection, "behind": $0.behind] as [String: Any] },
            "audit": "Not run since this server started.", "auditClass": "", "hasImbalances": false,
        ]
        if let (at, report) = audits.report {
            values["audit"] =
                "Run at \(DeskFormat.time(at)) up to position \(report.head): "
                + (report.imbalances.isEmpty ? "every account adds up." : "\(report.imbalances.count) imbalances.")
            values["auditClass"] = report.imbalances.isEmpty ? "good" : "bad"
            values["imbalances"] = report.imbalances.map(\.description)
            values["hasImbalances"] = !report.imbalances.isEmpty
        }
        return pages.page("health", frame(visit.who, title: "The log's health", values, request: visit.request))
    }
}
