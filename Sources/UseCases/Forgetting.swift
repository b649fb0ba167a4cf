import Aggregates
import EventStore
import Foundation
import Marketplace
import Postgres

extension Accounts {
    /// Closes `user`'s account and forgets them (SPEC §11.3): `UserForgotten` is appended
    /// with, in its transaction, their data key destroyed (their postings' places and texts
    /// with it), their login closed (the handle stays taken), their e-mail's index entry,
    /// failed logins, profile photo and items' and loans' photos
    /// deleted and their sessions revoked (announced to every server). Then their open items and pending bids are
    /// withdrawn, as they could do themselves, so that every reader of those streams agrees:
    /// after the forgetting, so that one posted meanwhile is withdrawn too (and one sealed for
    /// them after it is refused). Returns the position of `UserForgotten`.
    ///
    /// For someone forgotten already it throws `userNotFound` after withdrawing what is still
    /// open: a forgetting cut short (the server died after `UserForgotten`) is finished by
    /// running it again (`lender users forget`).
    public func forget(_ user: UserID, today: Day, metadata: EventMetadata = EventMetadata()) async throws -> Int64 {
        guard let keys = gateway.store.personalData?.keys else {
            throw DataKeyError.noMasterKey("the event store was built without personal data keys")
        }
        // Several commands for one request: none of them is the request's idempotent command.
        return try await IdempotentRequest.$current.withValue(nil) {
            let forgotten: Result<Int64, any Error>
            // Their face goes with them, and their items' and loans' photos (of their home,
            // often of themselves), unless the same image is also someone else's.
            let profilePhoto = try await gateway.load(.user(user), .user).0.photo
            let postedPhotos = try await pool.query(
                """
                SELECT unnest(photos) AS digest FROM loans_view WHERE borrower_id = \(user.rawValue)
                UNION SELECT unnest(photos) FROM items_view WHERE owner_id = \(user.rawValue)
                """
            ).map { try $0.decode("digest", as: String.self) }
            let photos = (profilePhoto.map { [$0] } ?? []) + postedPhotos
            do {
                let handled = try await gateway.handle(UserCommand.forget, on: .user, id: user, actor: user, metadata: metadata) {
                    session in
                    try DataKeys.forget(user.dataSubject, in: &session)
                    try session.query("UPDATE credentials SET password_hash = '' WHERE user_id = \(user.rawValue)")
                    // Failed logins, and the addresses logged in from, name addresses.
                    try session.query(
                        "DELETE FROM login_failures WHERE handle IN (SELECT handle FROM credentials WHERE user_id = \(user.rawValue))")
                    try session.query(
                        """
                        DELETE FROM login_known_addresses
                        WHERE handle IN (SELECT handle FROM credentials WHERE user_id = \(user.rawValue))
                        """)
                    try session.query("DELETE FROM email_index WHERE user_id = \(user.rawValue)")
                    // Mail to them, and what it would unlock (SPEC §12.4).
                    try session.query("DELETE FROM outbox WHERE user_id = \(user.rawValue)")
                    try session.query("DELETE FROM password_resets WHERE user_id = \(user.rawValue)")
                    try session.query("DELETE FROM email_codes WHERE user_id = \(user.rawValue)")
                    try session.query("DELETE FROM devices WHERE user_id = \(user.rawValue)")
                    try session.query("DELETE FROM notification_settings WHERE user_id = \(user.rawValue)")
                    // Their saved searches say what they look for (SPEC §12.7).
                    try session.query("DELETE FROM saved_searches WHERE user_id = \(user.rawValue)")
                    try session.query("DELETE FROM email_claims WHERE user_id = \(user.rawValue)")
                    try session.query(
                        "UPDATE sessions SET revoked_at = now() WHERE user_id = \(user.rawValue) AND revoked_at IS NULL")
                    if !photos.isEmpty {
                        try session.query(
                            """
                            DELETE FROM media m WHERE m.digest = ANY (\(photos))
                              AND NOT EXISTS (SELECT 1 FROM items_view WHERE m.digest = ANY (photos) AND owner_id <> \(user.rawValue))
                              AND NOT EXISTS (
                                  SELECT 1 FROM loans_view WHERE m.digest = ANY (photos) AND borrower_id <> \(user.rawValue))
                              AND NOT EXISTS (SELECT 1 FROM users_view WHERE photo = m.digest AND user_id <> \(user.rawValue))
                            """)
                    }
                }
                keys.forgotLocally(user.dataSubject)
                sessions.forget(user: user)
                forgotten = .success(handled.append?.lastPosition ?? 0)
            } catch let error as DomainError where error == .userNotFound {
                guard try await gateway.load(.user(user), .user).0.forgotten else { throw error }
                forgotten = .failure(error)
            }
            try await withdrawWhatIsOpen(of: user, today: today, metadata: metadata)
            return try forgotten.get()
        }
    }

    private func withdrawWhatIsOpen(of user: UserID, today: Day, metadata: EventMetadata) async throws {
        // Their bids' holds, and the holds of others' bids on their items, released with them.
        let commands = ItemCommands(gateway: gateway, processor: processor)
        // Their rentals' bookings still to come, cancelled as by the owner: all of it back to
        // the renters (SPEC §12.2), and the rentals then free to withdraw.
        let upcoming = try await pool.query(
            """
            SELECT booking_id, item_id FROM bookings_view
            WHERE owner_id = \(user.rawValue) AND status = 'confirmed' AND from_day > \(today.sql)::date
            """)
        for row in upcoming {
            try await unlessClosedMeanwhile {
                _ = try await commands.handle(
                    // No reason: it would be sealed for someone forgotten, which nothing may be.
                    .cancelBooking(BookingID(try row.decode("booking_id", as: UUID.self)), reason: nil, today: today),
                    on: ItemID(try row.decode("item_id", as: UUID.self)), actor: user, metadata: metadata)
            }
        }
        let items = try await pool.query(
            "SELECT item_id FROM items_view WHERE owner_id = \(user.rawValue) AND status IN ('available', 'suspended')")
        for row in items {
            try await unlessClosedMeanwhile {
                _ = try await commands.handle(
                    .withdraw, on: ItemID(try row.decode("item_id", as: UUID.self)), actor: user, metadata: metadata)
            }
        }
        let bids = try await pool.query(
            "SELECT bid_id, item_id FROM bids_view WHERE bidder_id = \(user.rawValue) AND status = 'pending'")
        for row in bids {
            try await unlessClosedMeanwhile {
                _ = try await commands.handle(
                    .withdrawBid(BidID(try row.decode("bid_id", as: UUID.self))),
                    on: ItemID(try row.decode("item_id", as: UUID.self)), actor: user, metadata: metadata)
            }
        }
    }
}

/// A step of a sweep over many streams (a forgetting's withdrawals, a suspension's postings):
/// an item, bid or loan that another request closed meanwhile needs nothing more. A
/// conflict that outlasted the retries, or any other failure, is thrown.
func unlessClosedMeanwhile(_ command: () async throws -> Void) async throws {
    do { try await command() } catch let error as DomainError
        where (error.kind == .conflict && error.code != DomainError.concurrencyConflict.code) || error.kind == .notFound {}
}
