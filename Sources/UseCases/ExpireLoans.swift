import Aggregates
import EventStore
import Foundation
import Logging
import Marketplace
import Projections

/// One loan `lender loans expire` expired, and what each lender got back.
public struct ExpiredLoan: Sendable, Hashable {
    public var loanID: LoanID
    public var refunds: [LenderAmount]
    public var position: Int64
}

/// Expires every fundraising loan whose deadline is before `today`: `LoanExpired` on the loan
/// and a refund on each lender's stream, in one append per loan. A loan funded meanwhile is
/// left alone; running it twice expires nothing twice.
public struct ExpireLoans: Sendable {
    let gateway: CommandGateway

    public init(gateway: CommandGateway) { self.gateway = gateway }

    public func run(today: Day) async throws -> [ExpiredLoan] {
        var expired = [ExpiredLoan]()
        for loanID in try await LoansView(gateway.store.pool).overdue(today: today) {
            do {
                let (refunds, append) = try await gateway.handleAcross(
                    "expireLoan", actor: .system, metadata: EventMetadata(actorID: "operator:lender loans expire")
                ) { reads in
                    let loan = try await reads.load(.loan, id: loanID)
                    let events = try LoanDecider.decide(.expire(today: today), loan, actor: .system)
                    return (try StreamWrite.settlement(events, loanID: loanID).writes, loan.shares)
                }
                expired.append(ExpiredLoan(loanID: loanID, refunds: refunds, position: append?.lastPosition ?? 0))
            } catch let error as DomainError where error.kind == .conflict {
                gateway.logger.info("not expired", metadata: ["loan": "\(loanID)", "reason": "\(error.code)"])
            }
        }
        return expired
    }
}
