import Foundation
import Aggregates
import EventStore
import Marketplace

/// The signed-in user's commands on their own stream: the profile's fields and blocks.
public struct Profiles: Sendable {
    let gateway: CommandGateway

    public init(gateway: CommandGateway) { self.gateway = gateway }

    /// Whom the user blocked, and the append, after the command.
    public func handle(_ command: UserCommand, for me: UserID) async throws -> (blocked: Set<UserID>, append: AppendResult?) {
        let handled = try await gateway.handle(command, on: .user, id: me, actor: me)
        return (handled.state.blocked, handled.append)
    }

    public func block(_ other: UserID, by me: UserID) async throws -> (blocked: Set<UserID>, append: AppendResult?) {
        // Whether the other user exists is their stream's to say, not this one's.
        guard try await gateway.store.version(of: .user(other)) > 0 else {
            throw DomainError.userNotFound.saying("No user has the id \(other).")
        }
        return try await handle(.block(other), for: me)
    }

    /// Whom the user blocked: the user's own stream's to say.
    public func blocked(by me: UserID) async throws -> Set<UserID> {
        try await gateway.load(.user(me), .user).0.blocked
    }
}

/// One movement of money on a user's stream, for their export: where it is in the log.
public struct BalanceEntry: Codable, Sendable {
    public var position: Int64
    public var at: Date
    /// `deposit`, `debit`, `card_charge` (paid by card, not from the balance) or `credit`.
    public var kind: String
    /// Added to the balance (negative: taken from it; zero for a card charge).
    public var balanceChangeCents: Int
    public var amountCents: Int
    public var loanId: LoanID?
    public var cardId: CardID?
}

extension Profiles {
    /// Every movement of money on the user's stream, oldest first.
    public func balanceHistory(of me: UserID) async throws -> [BalanceEntry] {
        try await gateway.store.readStream(.user(me)).compactMap { recorded in
            let entry = { (kind: String, change: Int, amount: Int, loan: LoanID?, card: CardID?) in
                BalanceEntry(
                    position: recorded.position, at: recorded.recordedAt, kind: kind, balanceChangeCents: change,
                    amountCents: amount, loanId: loan, cardId: card)
            }
            return switch try Aggregate.user.codec.decode(recorded) {
            case .fundsDeposited(let deposit): entry("deposit", deposit.amountCents, deposit.amountCents, nil, deposit.cardID)
            case .balanceDebited(let debit): entry("debit", -debit.amountCents, debit.amountCents, debit.loanID, nil)
            case .cardCharged(let charged): entry("card_charge", 0, charged.amountCents, charged.loanID, charged.cardID)
            case .balanceCredited(let credit): entry("credit", credit.amountCents, credit.amountCents, credit.loanID, nil)
            default: nil
            }
        }
    }
}
