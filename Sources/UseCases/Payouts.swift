import Aggregates
import EventStore
import Foundation
import Logging
import Marketplace
import Payments
import Postgres

/// Money leaving the platform (SPEC §12.3). A payout is asked for (`PayoutRequested`: the
/// amount leaves the balance at once, so nothing spends it twice), then transferred under the
/// key of its id, then recorded sent or failed (a failure credits the amount back). A crash
/// between the transfer and the record leaves it pending: a retry of the request, or
/// `lender payouts reconcile`, transfers again under the same key, which the processor
/// answers with the same transfer, and records it. Money moves once.
public struct Payouts: Sendable {
    public let gateway: CommandGateway
    let processor: any PayoutProcessor
    /// `PAYOUT_VERIFY_ABOVE_CENTS`.
    public var verifyAboveCents: Int

    public init(gateway: CommandGateway, processor: any PayoutProcessor, verifyAboveCents: Int = UserDecider.defaultPayoutVerifyAboveCents) {
        self.gateway = gateway
        self.processor = processor
        self.verifyAboveCents = verifyAboveCents
    }

    public static let payoutFailed = DomainError(
        .paymentDeclined, "payout_failed", "The bank transfer failed; the amount is back in your balance.")

    /// A bank account's token: never a raw number (422 `raw_account_number`), one this
    /// processor made (422 `invalid_token`).
    public func setMethod(token: String, for me: UserID) async throws -> Handled<UserState, UserEvent> {
        let problems = UserDecider.payoutTokenProblems(token)
        guard problems.isEmpty else { throw DomainError.invalid(problems) }
        try processor.validate(token: token)
        return try await gateway.handle(.setPayoutMethod(token: token), on: .user, id: me, actor: me)
    }

    /// A payout of `amount`: sent, or failed and credited back (then 402 `payout_failed` at the
    /// edge). A repeat of the request (its `Idempotency-Key`) finishes the first one.
    public func request(_ amount: Int, for me: UserID, now: Date) async throws -> Finished {
        // A repeat (or a twin sent at once, answered from the first's record) finishes the
        // first request's payout, whose id its events hold.
        let handled =
            if let replayed = try await gateway.replayed(on: .user, id: me) {
                replayed
            } else {
                try await gateway.handle(
                    .requestPayout(PayoutRequest(amountCents: amount, now: now, verifyAboveCents: verifyAboveCents)), on: .user,
                    id: me, actor: me)
            }
        let asked = handled.events.compactMap { event -> PayoutID? in
            if case .payoutRequested(let requested) = event { requested.payoutID } else { nil }
        }.first
        guard let asked else { throw DomainError(.notFound, "payout_not_found", "The first request made no payout.") }
        var finished = try await finish(asked, of: me, actor: me)
        // Finished by someone else meanwhile (a twin, reconciliation): the request's own position.
        finished.position = finished.position ?? handled.append?.lastPosition
        return finished
    }

    /// A payout as its last record left it, and that record's log position (nil: nothing
    /// was recorded now).
    public struct Finished: Sendable {
        public var payout: Payout
        public var position: Int64?
    }

    /// Transfers a pending payout, under its own key, and records the outcome; a payout already
    /// sent or failed as it is.
    public func finish(_ id: PayoutID, of user: UserID, actor: UserID) async throws -> Finished {
        let (state, _) = try await gateway.load(.user(user), .user)
        guard let payout = state.payouts.first(where: { $0.id == id }) else {
            throw DomainError(.notFound, "payout_not_found", "No such payout.")
        }
        guard payout.status == .pending else { return Finished(payout: payout, position: nil) }
        let outcome: PayoutOutcome
        if let token = payout.token ?? state.payoutToken, token != Redacted.text {
            // To the account it was asked for, whatever the method is now.
            let transfer = try await processor.transfer(amountCents: payout.amountCents, to: token, idempotencyKey: PayoutKeys.key(id))
            Failpoints.hit(.payoutAfter)
            outcome = transfer.status == .sent ? .sent(transferID: transfer.id) : .failed(reason: "transfer_failed")
        } else if let made = try await processor.transfer(idempotencyKey: PayoutKeys.key(id)) {
            // Its account unreadable now: whatever the processor made of it stands.
            outcome = made.status == .sent ? .sent(transferID: made.id) : .failed(reason: "transfer_failed")
        } else {
            outcome = .failed(reason: "no_payout_method")
        }
        // Its own append, not the request's repeat: the key was spent on asking for it.
        let handled = try await IdempotentRequest.$current.withValue(nil) {
            try await gateway.handle(.recordPayout(id, outcome), on: .user, id: user, actor: actor)
        }
        guard let recorded = handled.state.payouts.first(where: { $0.id == id }) else {
            throw DomainError(.notFound, "payout_not_found", "No such payout.")
        }
        return Finished(payout: recorded, position: handled.append?.lastPosition)
    }

    /// An operator's settlement of a user's whole available balance outside Lender
    /// (`lender users settle-balance`), so that they may be forgotten.
    public func settle(_ user: UserID, by operatorName: String, reason: String) async throws -> Int {
        let handled = try await gateway.handle(
            .settleBalance(by: operatorName, reason: reason), on: .user, id: user, actor: .system,
            metadata: EventMetadata(actorID: operatorName))
        return handled.events.reduce(0) { total, event in
            if case .balanceSettled(let settled) = event { total + settled.amountCents } else { total }
        }
    }

    /// What reconciliation did.
    public struct Reconciled: Sendable, Hashable {
        public var sent = 0
        public var failed = 0
        public var errors = 0
    }

    /// Finishes every payout pending for longer than `olderThan` (a request may still be at it):
    /// `lender payouts reconcile`.
    public func reconcile(olderThan seconds: Int = 60, logger: Logger) async throws -> Reconciled {
        let pending = try await gateway.store.pool.query(
            """
            SELECT payout_id, user_id FROM payouts_view
            WHERE status = 'pending' AND created_at < now() - make_interval(secs => \(seconds))
            ORDER BY created_at
            """)
        var done = Reconciled()
        for row in pending {
            let id = PayoutID(try row.decode("payout_id", as: UUID.self))
            let user = UserID(try row.decode("user_id", as: UUID.self))
            do {
                switch try await finish(id, of: user, actor: .system).payout.status {
                case .sent: done.sent += 1
                case .failed: done.failed += 1
                case .pending: done.errors += 1
                }
            } catch {
                logger.error("a payout was not reconciled", metadata: ["payout": "\(id)", "error": "\(error)"])
                done.errors += 1
            }
        }
        return done
    }
}
