import EventStore
import Foundation
import Marketplace
import Projections
import UseCases

// The answers that have no public type in the server: each route's controller keeps its own.

/// `POST /v1/users`.
public struct RegisteredUser: Decodable, Sendable {
    public var id: UserID
    public var handle: String
    public var displayName: String
    public var email: String
    public var country: String?
    public var position: Int64
}

/// `POST /v1/me/deposits`.
public struct Deposit: Decodable, Sendable {
    public var amountCents: Int
    public var cardId: CardID
    public var chargeId: String
    public var balanceCents: Int
    public var position: Int64?
}

/// `POST /v1/loans/{id}/repayments`: the outcome, with the loan as it stands after it.
public struct Repayment: Decodable, Sendable {
    public var amountCents: Int
    public var paidWith: PaidBy
    public var credits: [Repayments.Credit]
    public var balanceCents: Int
    public var loan: LoanResource
    public var position: Int64?
}

/// An event of `GET /v1/events`, as auditors read it.
public struct LoggedEvent: Codable, Sendable {
    public var position: Int64
    public var streamId: String
    public var streamVersion: Int
    public var type: String
    /// An object: decoding fails for any other JSON.
    public var data: [String: JSONValue]
    public var recordedAt: Date
    public var hash: String
    public var previousHash: String
}

/// A signed checkpoint of `GET /v1/audit/checkpoints`.
public struct SignedCheckpoint: Codable, Sendable {
    public var id: Int64
    public var position: Int64
    public var streamsDigest: String
    public var publicKey: String
    public var signature: String
}

/// How a checkout or a repayment was paid, read as answers write it, an object: the server's
/// `PaidWith` also reads the bare strings of older records, which no answer may send.
public struct PaidBy: Decodable, Sendable {
    public var method: String
    public var cardId: String?
}

/// The payment of a checkout's answer (a `PaidCart`), read strictly.
public struct Paid: Decodable, Sendable {
    public var paidWith: PaidBy
}
