import EventStore
import Foundation
import Logging
import Marketplace
import Postgres

extension UserID {
    /// The actor of what an operator runs from the command line, not a user.
    public static let system = UserID(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
}

/// One loan `lender loans expire` expired, and what each lender got back.
public struct ExpiredLoan: Sendable, Hashable {
    public var loanID: LoanID
    public var refunds: [LenderAmount]
    public var position: Int64
}

extension CommandGateway {
    /// Expires every fundraising loan whose deadline is before `today`: `LoanExpired` on the
    /// loan and a refund on each lender's stream, in one append per loan. A loan funded
    /// meanwhile is left alone; running it twice expires nothing twice.
    public func expireOverdueLoans(today: Day) async throws -> [ExpiredLoan] {
        let candidates = try await store.pool.query(
            """
            SELECT loan_id FROM loans_view
            WHERE status = 'fundraising' AND deadline < \(today.description)::date ORDER BY deadline, loan_id
            """
        ).map { LoanID(try $0.decode("loan_id", as: UUID.self)) }
        var expired = [ExpiredLoan]()
        for loanID in candidates {
            do {
                let (refunds, append) = try await handleAcross(
                    "expireLoan", actor: .system, metadata: EventMetadata(actorID: "operator:lender loans expire")
                ) { reads in
                    let loan = try await reads.load(.loan, id: loanID)
                    let events = try LoanDecider.decide(.expire(today: today), loan, actor: .system)
                    return (try StreamWrite.settlement(events, loanID: loanID).writes, loan.shares)
                }
                expired.append(ExpiredLoan(loanID: loanID, refunds: refunds, position: append?.lastPosition ?? 0))
            } catch let error as DomainError where error.kind == .conflict {
                logger.info("not expired", metadata: ["loan": "\(loanID)", "reason": "\(error.code)"])
            }
        }
        return expired
    }
}
