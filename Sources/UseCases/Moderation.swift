import Aggregates
import Foundation
import EventStore
import Marketplace
import Postgres
import Projections

/// What operators do to what others posted (SPEC §12.5), each act an event whose actor is
/// the operator, with the money it moves in the same append (`ItemCommands`).
public struct Moderation: Sendable {
    let commands: ItemCommands
    let operators: Operators
    /// This server's cached sessions, forgotten at once when a suspension begins or ends
    /// (the others' when the database announces it).
    let sessions: SessionCache?

    public init(commands: ItemCommands, sessions: SessionCache? = nil) {
        self.commands = commands
        self.operators = Operators(commands.gateway.store.pool)
        self.sessions = sessions
    }

    /// Takes an item down: out of the market, its pending bids rejected, its upcoming
    /// bookings cancelled as by its owner. 403 `not_operator` for anyone but an operator.
    public func takeDown(_ item: ItemID, reason: String, by actor: UserID, today: Day) async throws -> AppendResult? {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        return try await commands.handle(.takeDown(reason: reason, today: today), on: item, actor: actor).append
    }

    /// Takes a fundraising loan down: out of every list, each lender's shares refunded to
    /// their balance in the same append. 409 `loan_not_fundraising` once it raised its money.
    public func takeDown(_ loan: LoanID, reason: String, by actor: UserID) async throws -> AppendResult? {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        return try await commands.gateway.handleAcross("takeDownLoan", actor: actor) { reads in
            let state = try await reads.load(.loan, id: loan)
            let events = try LoanDecider.decide(.takeDown(reason: reason), state, actor: actor)
            return (try StreamWrite.settlement(events, loanID: loan).writes, true)
        }.append
    }

    /// Divides what a disputed or claimed booking holds (SPEC §12.5): `renterCents` back to the
    /// renter, `ownerCents` to the owner, in one append; 422 unless they add up to it.
    public func resolve(
        _ booking: BookingID, renterCents: Int, ownerCents: Int, reason: String, by actor: UserID, today: Day
    ) async throws -> AppendResult? {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        return try await commands.handle(
            .resolveDispute(booking, renterCents: renterCents, ownerCents: ownerCents, reason: reason, today: today),
            on: try await item(of: booking), actor: actor
        ).append
    }

    /// Cancels a booking still to come as its owner would: everything back to the renter.
    public func cancel(_ booking: BookingID, reason: String, by actor: UserID, today: Day) async throws -> AppendResult? {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        return try await commands.handle(
            .cancelBookingAsOperator(booking, reason: reason, today: today), on: try await item(of: booking), actor: actor
        ).append
    }

    func item(of booking: BookingID) async throws -> ItemID {
        let rows = try await commands.gateway.store.pool.query(
            "SELECT item_id FROM bookings_view WHERE booking_id = \(booking.rawValue)")
        guard let item = try rows.first?.decode("item_id", as: UUID.self) else { throw DomainError.bookingNotFound }
        return ItemID(item)
    }

    /// Hides a review (by the id `reviews_view` makes from its deal and side): out of every list
    /// and rating. 404 `review_not_found` for no such review.
    public func hideReview(_ review: UUID, reason: String, by actor: UserID) async throws -> AppendResult? {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        let rows = try await commands.gateway.store.pool.query(
            "SELECT item_id, bid_id, role FROM reviews_view WHERE review_id = \(review)")
        guard let row = rows.first, let role = ReviewerRole(rawValue: try row.decode("role", as: String.self)) else {
            throw DomainError.reviewNotFound
        }
        let key = ReviewKey(BidID(try row.decode("bid_id", as: UUID.self)), role)
        return try await commands.handle(
            .hideReview(key, reason: reason), on: ItemID(try row.decode("item_id", as: UUID.self)), actor: actor
        ).append
    }

    /// Hides a message from its conversation: 404 `message_not_found` for no such message.
    public func hideMessage(_ message: MessageID, reason: String, by actor: UserID) async throws -> AppendResult? {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        let rows = try await commands.gateway.store.pool.query(
            "SELECT item_id FROM messages_view WHERE message_id = \(message.rawValue)")
        guard let item = try rows.first?.decode("item_id", as: UUID.self) else { throw DomainError.messageNotFound }
        return try await commands.handle(.hideMessage(message, reason: reason), on: ItemID(item), actor: actor).append
    }
}

extension Moderation {
    /// Suspends a user (SPEC §12.5) until `until` or until reinstated: `UserSuspended` with,
    /// in its transaction, every session of theirs revoked (announced to every server). Then
    /// `sweep` takes their available postings out of the market (their pending bids rejected)
    /// and withdraws their own pending bids, holds released, in the operator's name. 404 for
    /// no such user; 403 `not_operator`. A repeated `Idempotency-Key` is the same act.
    public func suspend(_ user: UserID, reason: String, until: Date?, by actor: UserID, now: Date) async throws -> Int64 {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        let handled = try await commands.gateway.handle(
            UserCommand.suspend(by: actor, reason: reason, until: until, now: now), on: .user, id: user, actor: actor,
            alongside: { session in
                try session.query(
                    "UPDATE sessions SET revoked_at = now() WHERE user_id = \(user.rawValue) AND revoked_at IS NULL")
            })
        sessions?.forget(user: user)
        try await sweep(user, by: actor, now: now)
        return handled.append?.lastPosition ?? 0
    }

    /// An operator checked who the user is (`POST /v1/admin/users/{id}/verify-identity`, the
    /// desk): `IdentityVerified`, in the operator's name and with their reason. Nothing when
    /// it was checked before.
    public func verifyIdentity(_ user: UserID, reason: String, by actor: UserID) async throws -> AppendResult? {
        guard try await operators.contains(actor) else { throw DomainError.notOperator }
        // A verified identity lifts the payout limit: never one's own word for oneself.
        guard user != actor else {
            throw DomainError(.forbidden, "own_account", "An operator may not verify their own identity; another operator must.")
        }
        return try await commands.gateway.handle(
            UserCommand.verifyIdentity(by: "operator:\(actor)", reason: reason.trimmingWhiteSpace()), on: .user, id: user,
            actor: actor
        ).append
    }

    /// Ends a suspension: `UserReinstated` (the user's cached sessions forgotten on every
    /// server), then `sweep` puts their postings back in the market. `by` nil: the jobs end a
    /// suspension whose `until` passed. 409 `not_suspended`.
    public func reinstate(_ user: UserID, reason: String, by actor: UserID?, now: Date) async throws -> Int64 {
        if let actor { guard try await operators.contains(actor) else { throw DomainError.notOperator } }
        let handled = try await commands.gateway.handle(
            UserCommand.reinstate(by: actor, reason: reason, now: now), on: .user, id: user, actor: actor ?? .system,
            alongside: { session in
                try session.query(
                    """
                    SELECT pg_notify(\(SessionCache.channel), encode(token_hash, 'hex')) FROM sessions
                    WHERE user_id = \(user.rawValue) AND revoked_at IS NULL AND expires_at > now()
                    """)
            })
        sessions?.forget(user: user)
        try await sweep(user, by: actor ?? .system, now: now)
        return handled.append?.lastPosition ?? 0
    }

    /// The jobs' part: every suspension whose `until` has passed, ended, and then every
    /// posting and bid brought in line with its user's standing (`sweep` over everyone).
    /// Returns how many suspensions ended.
    public func endSuspensions(now: Date) async throws -> Int {
        let due = try await commands.gateway.store.pool.query(
            "SELECT user_id FROM suspensions_view WHERE until <= \(now)")
        var ended = 0
        for row in due {
            do {
                _ = try await IdempotentRequest.$current.withValue(nil) {
                    try await reinstate(
                        UserID(try row.decode("user_id", as: UUID.self)), reason: "The suspension's time ended.", by: nil, now: now)
                }
                ended += 1
            } catch let error as DomainError where error.kind == .conflict || error.kind == .notFound {
                // Reinstated or suspended anew meanwhile, or forgotten: nothing of theirs to end.
            }
        }
        try await sweep(nil, by: .system, now: now)
        return ended
    }

    /// Brings postings and bids in line with their users' standing now, as the views say it
    /// (of `user`, or of everyone): a suspended user's available postings out of the market
    /// and pending bids withdrawn; a suspended posting whose owner no longer is, back. It
    /// decides from what is committed, so a sweep cut short (a crash, a race with the act
    /// that undoes it, a posting that slipped in during the suspension) is finished by the
    /// next one: each act runs one, and so do the jobs.
    func sweep(_ user: UserID?, by actor: UserID, now: Date) async throws {
        let pool = commands.gateway.store.pool
        // `who` null: everyone (the jobs). A suspension holds while `until` is to come.
        let who = user?.rawValue
        let out = try await pool.query(
            """
            SELECT i.item_id, s.user_id FROM suspensions_view s JOIN items_view i ON i.owner_id = s.user_id
            WHERE i.status = 'available' AND (s.until IS NULL OR s.until > \(now))
              AND (\(who)::uuid IS NULL OR s.user_id = \(who))
            UNION SELECT b.item_id, s.user_id FROM suspensions_view s JOIN bids_view b ON b.bidder_id = s.user_id
            WHERE b.status = 'pending' AND (s.until IS NULL OR s.until > \(now))
              AND (\(who)::uuid IS NULL OR s.user_id = \(who))
            """)
        let back = try await pool.query(
            """
            SELECT i.item_id FROM items_view i
            WHERE i.status = 'suspended' AND (\(who)::uuid IS NULL OR i.owner_id = \(who))
              AND NOT EXISTS (
                  SELECT 1 FROM suspensions_view s WHERE s.user_id = i.owner_id AND (s.until IS NULL OR s.until > \(now)))
            """)
        // The borrower's loans raising money leave the lists with their postings.
        let loansOut = try await pool.query(
            """
            SELECT l.loan_id FROM suspensions_view s JOIN loans_view l ON l.borrower_id = s.user_id
            WHERE l.status = 'fundraising' AND (s.until IS NULL OR s.until > \(now))
              AND (\(who)::uuid IS NULL OR s.user_id = \(who))
            """)
        let loansBack = try await pool.query(
            """
            SELECT l.loan_id FROM loans_view l
            WHERE l.status = 'suspended' AND (\(who)::uuid IS NULL OR l.borrower_id = \(who))
              AND NOT EXISTS (
                  SELECT 1 FROM suspensions_view s WHERE s.user_id = l.borrower_id AND (s.until IS NULL OR s.until > \(now)))
            """)
        // Several commands for one act: none of them is the request's idempotent command.
        try await IdempotentRequest.$current.withValue(nil) {
            for row in out {
                try await unlessClosedMeanwhile {
                    _ = try await commands.handle(
                        .suspendUser(UserID(try row.decode("user_id", as: UUID.self))),
                        on: ItemID(try row.decode("item_id", as: UUID.self)), actor: actor)
                }
            }
            for row in back {
                try await unlessClosedMeanwhile {
                    _ = try await commands.handle(.reinstateOwner, on: ItemID(try row.decode("item_id", as: UUID.self)), actor: actor)
                }
            }
            for (rows, command) in [(loansOut, LoanCommand.suspendBorrower), (loansBack, .reinstateBorrower)] {
                for row in rows {
                    try await unlessClosedMeanwhile {
                        _ = try await commands.gateway.handle(
                            command, on: .loan, id: LoanID(try row.decode("loan_id", as: UUID.self)), actor: actor)
                    }
                }
            }
        }
    }
}
