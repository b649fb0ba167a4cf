import Foundation
import Marketplace
import Postgres

/// A transfer to a bank account, as the payout processor tells it.
public struct Transfer: Sendable, Hashable {
    public enum Status: String, Sendable, Hashable { case sent, failed }

    public var id: String
    public var amountCents: Int
    public var status: Status
}

/// The port to a payout processor (SPEC §12.3): bank accounts are its tokens, made on the
/// device; transfers are made once per idempotency key, as charges are.
public protocol PayoutProcessor: Sendable {
    /// 422 `invalid_token` for a token this processor did not make.
    func validate(token: String) throws
    /// Sends `amountCents` to the account. The same key transfers at most once and answers the
    /// same transfer (a failed one stays failed); with another amount it is refused
    /// (`payout_key_reused`).
    func transfer(amountCents: Int, to token: String, idempotencyKey: String) async throws -> Transfer
    /// The transfer a key made; nil when it made none.
    func transfer(idempotencyKey: String) async throws -> Transfer?
    /// Every transfer, by key: what `audit money` holds against the log.
    func transfers() async throws -> [String: Transfer]
}

/// A payout provider's test mode: tokens beginning `ba_test_`; `ba_test_fail` fails every
/// transfer. Its books are a table of its own (`sandbox_transfers`), outside the log.
public struct SandboxPayoutProcessor: PayoutProcessor {
    public static let failingToken = "ba_test_fail"
    let pool: PostgresPool

    public init(pool: PostgresPool) { self.pool = pool }

    public func validate(token: String) throws {
        guard token.hasPrefix("ba_test_"), token.count > "ba_test_".count else {
            throw DomainError.invalid([
                FieldError(field: "token", code: "invalid_token", message: "not a bank account token of this processor (ba_test_…)")
            ])
        }
    }

    public func transfer(amountCents: Int, to token: String, idempotencyKey: String) async throws -> Transfer {
        try validate(token: token)
        let id = "tr_sandbox_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let status: Transfer.Status = token == Self.failingToken ? .failed : .sent
        // Made, or the one this key made (a concurrent retry's, committed meanwhile, read by
        // the second statement).
        var row = try await pool.query(
            """
            INSERT INTO sandbox_transfers (transfer_id, idempotency_key, token, amount_cents, status)
            VALUES (\(id), \(idempotencyKey), \(token), \(amountCents), \(status.rawValue))
            ON CONFLICT (idempotency_key) DO NOTHING
            RETURNING transfer_id, amount_cents, status
            """
        ).first
        if row == nil {
            row = try await pool.query(
                "SELECT transfer_id, amount_cents, status FROM sandbox_transfers WHERE idempotency_key = \(idempotencyKey)"
            ).first
        }
        guard let row, let transfer = try Self.transfer(row) else {
            throw PostgresError(.decoding, message: "the transfer was neither made nor found")
        }
        guard transfer.amountCents == amountCents else {
            throw DomainError(.conflict, "payout_key_reused", "This key made a transfer of another amount.")
        }
        return transfer
    }

    public func transfer(idempotencyKey: String) async throws -> Transfer? {
        try await pool.query(
            "SELECT transfer_id, amount_cents, status FROM sandbox_transfers WHERE idempotency_key = \(idempotencyKey)"
        ).first.flatMap(Self.transfer)
    }

    public func transfers() async throws -> [String: Transfer] {
        var all = [String: Transfer]()
        for row in try await pool.query("SELECT idempotency_key, transfer_id, amount_cents, status FROM sandbox_transfers") {
            all[try row.decode("idempotency_key")] = try Self.transfer(row)
        }
        return all
    }

    static func transfer(_ row: PostgresRow) throws -> Transfer? {
        guard let status = Transfer.Status(rawValue: try row.decode("status")) else { return nil }
        return Transfer(id: try row.decode("transfer_id"), amountCents: try row.decode("amount_cents"), status: status)
    }
}
