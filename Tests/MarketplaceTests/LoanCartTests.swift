import Foundation
import Marketplace
import Testing

let borrower = UserID()
let today26 = Day("2026-11-22")!

func posted(amount: Int = 10_000, deadline: String = "2026-12-22") -> LoanPosted {
    LoanPosted(
        loanID: LoanID(), borrowerID: borrower, title: "Sewing machine", description: "", sector: "Manufacturing",
        activity: "Tailoring", countryCode: "NP", location: Location(lat: 27.7, lng: 85.3, place: "Kathmandu"),
        amountCents: amount, deadline: Day(deadline)!)
}

@Suite("Loan decider (§3.3)")
struct LoanDeciderTests {
    @Test func postingRules() throws {
        #expect(try given(.loan).when(.post(posted(), today: today26), by: borrower).thenEvents().count == 1)
        #expect(given(.loan).when(.post(posted(amount: 2600), today: today26), by: borrower).refusal == "invalid_amount")
        #expect(given(.loan).when(.post(posted(amount: 1_002_500), today: today26), by: borrower).refusal == "invalid_amount")
        #expect(given(.loan).when(.post(posted(deadline: "2026-11-22"), today: today26), by: borrower).refusal == "invalid_deadline")
        #expect(given(.loan).when(.post(posted(deadline: "2027-02-21"), today: today26), by: borrower).refusal == "invalid_deadline")
        given(.loan).when(.post(posted(deadline: "2027-02-20"), today: today26), by: borrower).thenAccepted("90 days ahead")
        var nepal = posted()
        nepal.countryCode = "Nepal"
        #expect(given(.loan).when(.post(nepal, today: today26), by: borrower).refusal == "invalid_country")
    }

    @Test func sharesFundTheLoanAndNeverBeyondIt() throws {
        var history: [LoanEvent] = [.posted(posted(amount: 10_000))]
        let lenders = (0..<4).map { _ in UserID() }
        for (index, lender) in lenders.enumerated() {
            let events = try given(.loan, history).when(.purchaseShare(lender: lender, amountCents: 2500), by: lender).thenEvents()
            #expect(events.count == (index == 3 ? 2 : 1))
            history += events
        }
        #expect(given(.loan, history).state.status == .funded)
        #expect(given(.loan, history).state.fundedCents == 10_000)
        #expect(
            given(.loan, history).when(.purchaseShare(lender: UserID(), amountCents: 2500), by: UserID()).refusal == "loan_not_fundraising")
        let half: [LoanEvent] = [.posted(posted(amount: 5000))]
        #expect(given(.loan, half).when(.purchaseShare(lender: UserID(), amountCents: 7500), by: UserID()).refusal == "exceeds_need")
        #expect(given(.loan, half).when(.purchaseShare(lender: borrower, amountCents: 2500), by: borrower).refusal == "own_loan")
    }

    func funded(by lenders: [UserID], each: Int) -> [LoanEvent] {
        [.posted(posted(amount: each * lenders.count))]
            + lenders.map { .sharePurchased(LoanSharePurchased(lenderID: $0, amountCents: each)) } + [.funded(LoanFunded())]
    }

    @Test func aRepaymentOfOneHundredCentsOverThreeEqualSharesCredits34_33_33() throws {
        let lenders = (0..<3).map { _ in UserID() }
        let history = funded(by: lenders, each: 2500)
        let events = try given(.loan, history).when(.recordRepayment(amountCents: 100), by: borrower).thenEvents()
        guard case .repaymentRecorded(let recorded) = events.first else {
            Issue.record("expected a repayment")
            return
        }
        #expect(recorded.credits.map(\.amountCents) == [34, 33, 33])
        #expect(recorded.credits.map(\.lenderID) == lenders)
        #expect(given(.loan, history).when(.recordRepayment(amountCents: 100), by: lenders[0]).refusal == "not_borrower")
        #expect(given(.loan, history).when(.recordRepayment(amountCents: 7501), by: borrower).refusal == "exceeds_outstanding")
        let rest = try given(.loan, history + events).when(.recordRepayment(amountCents: 7400), by: borrower).thenEvents()
        #expect(rest.last == .repaid(LoanRepaid()))
        #expect(given(.loan, history + events + rest).state.status == .repaid)
    }

    @Test func repaymentsInAnyInstalmentsRepayEveryLenderExactlyTheirShare() throws {
        let lenders = (0..<3).map { _ in UserID() }
        let shares = [2500, 5000, 7500]
        var history: [LoanEvent] =
            [.posted(posted(amount: 15_000))]
            + zip(lenders, shares).map { .sharePurchased(LoanSharePurchased(lenderID: $0, amountCents: $1)) }
            + [.funded(LoanFunded())]
        for _ in 0..<200 {
            let now = given(.loan, history)
            if now.state.status == .repaid { break }
            let amount = min(now.state.outstandingCents, Int.random(in: 1...997))
            history += try now.when(.recordRepayment(amountCents: amount), by: borrower).thenEvents()
        }
        let state = given(.loan, history).state
        #expect(state.status == .repaid)
        // Each lender credited exactly their share in the end, never a cent more or less.
        #expect(lenders.map { state.repaidTo[$0] } == shares)
    }

    @Test func splitsAlwaysAddUpAndStayWithinACentOfExact() {
        for _ in 0..<500 {
            let shares = (0..<Int.random(in: 1...12)).map { _ in
                LenderAmount(lenderID: UserID(), amountCents: 2500 * Int.random(in: 1...8))
            }
            let amount = Int.random(in: 1...50_000)
            let credits = LoanDecider.split(amount, over: shares)
            #expect(credits.reduce(0) { $0 + $1.amountCents } == amount)
            let total = Double(shares.reduce(0) { $0 + $1.amountCents })
            for (credit, share) in zip(credits, shares) {
                #expect(abs(Double(credit.amountCents) - Double(amount) * Double(share.amountCents) / total) < 1)
            }
        }
    }

    @Test func expiryRefundsEveryLenderExactly() throws {
        let (a, b) = (UserID(), UserID())
        let history: [LoanEvent] = [
            .posted(posted(amount: 10_000, deadline: "2026-12-01")),
            .sharePurchased(LoanSharePurchased(lenderID: a, amountCents: 2500)),
            .sharePurchased(LoanSharePurchased(lenderID: b, amountCents: 5000)),
            .sharePurchased(LoanSharePurchased(lenderID: a, amountCents: 2500)),
        ]
        #expect(given(.loan, history).when(.expire(today: Day("2026-12-01")!), by: borrower).refusal == "deadline_not_passed")
        given(.loan, history).when(.expire(today: Day("2026-12-02")!), by: borrower).then([.expired(LoanExpired(refunds: [
            LenderAmount(lenderID: a, amountCents: 5000), LenderAmount(lenderID: b, amountCents: 5000),
        ]))])
    }
}

@Suite("Cart decider (§3.4)")
struct CartDeciderTests {
    let me = UserID()
    let loan = given(.loan, [.posted(posted(amount: 10_000))]).state

    @Test func addingUsesTheDefaultShareElse2500() throws {
        given(.cart).when(.add(loanID: loan.loanID!, amountCents: nil, loan: loan, defaultShare: nil), by: me)
            .then([.itemAdded(CartItemAdded(loanID: loan.loanID!, amountCents: 2500))])
        given(.cart).when(.add(loanID: loan.loanID!, amountCents: nil, loan: loan, defaultShare: 7500), by: me)
            .then([.itemAdded(CartItemAdded(loanID: loan.loanID!, amountCents: 7500))])
    }

    @Test func lineRules() {
        let id = loan.loanID!
        let added: [CartEvent] = [.itemAdded(CartItemAdded(loanID: id, amountCents: 2500))]
        #expect(
            given(.cart, added).when(.add(loanID: id, amountCents: 2500, loan: loan, defaultShare: nil), by: me).refusal == "already_in_cart")
        #expect(given(.cart).when(.add(loanID: id, amountCents: 3000, loan: loan, defaultShare: nil), by: me).refusal == "invalid_amount")
        #expect(given(.cart).when(.add(loanID: id, amountCents: 12_500, loan: loan, defaultShare: nil), by: me).refusal == "exceeds_need")
        #expect(given(.cart).when(.change(loanID: id, amountCents: 5000, loan: loan), by: me).refusal == "not_in_cart")
        #expect(given(.cart).when(.remove(id), by: me).refusal == "not_in_cart")
        given(.cart, added).when(.change(loanID: id, amountCents: 5000, loan: loan), by: me).thenAccepted()
        var mine = given(.loan, [.posted(posted())]).state
        mine.borrowerID = me
        #expect(
            given(.cart).when(.add(loanID: mine.loanID!, amountCents: 2500, loan: mine, defaultShare: nil), by: me).refusal == "own_loan")
    }

    @Test func checkoutNamesEveryLineThatNoLongerFits() throws {
        let open = loan
        var funded = given(.loan, [.posted(posted(amount: 2500))]).state
        funded.status = .funded
        let small = given(.loan, [.posted(posted(amount: 5000))]).state
        let history: [CartEvent] = [
            .itemAdded(CartItemAdded(loanID: open.loanID!, amountCents: 2500)),
            .itemAdded(CartItemAdded(loanID: funded.loanID!, amountCents: 2500)),
            .itemAdded(CartItemAdded(loanID: small.loanID!, amountCents: 7500)),
        ]
        let loans = [open.loanID!: open, funded.loanID!: funded, small.loanID!: small]
        let error = try given(.cart, history).when(.checkout(loans: loans, paidWith: "balance"), by: me).thenError()
        #expect(error.code == "checkout_blocked")
        #expect(error.fields.map(\.field) == ["lines[1]", "lines[2]"])
        #expect(error.fields.map(\.code) == ["loan_not_fundraising", "exceeds_need"])
        #expect(given(.cart).when(.checkout(loans: [:], paidWith: "balance"), by: me).refusal == "cart_empty")
        let ok = try given(.cart, Array(history.prefix(1))).when(.checkout(loans: loans, paidWith: "balance"), by: me).thenEvents()
        #expect(ok == [.checkedOut(CartCheckedOut(purchases: [LoanAmount(loanID: open.loanID!, amountCents: 2500)], totalCents: 2500, paidWith: "balance"))])
        #expect(given(.cart, Array(history.prefix(1)) + ok).state.lines.isEmpty)
    }
}
