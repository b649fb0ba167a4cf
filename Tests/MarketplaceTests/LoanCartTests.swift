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

func fold(_ events: [LoanEvent]) -> LoanState { events.reduce(LoanDecider.initial, LoanDecider.evolve) }

func loanRefusal(_ history: [LoanEvent], _ command: LoanCommand, by actor: UserID) -> String? {
    do {
        _ = try LoanDecider.decide(command, fold(history), actor: actor)
        return nil
    } catch let error as DomainError {
        return error.fields.first?.code ?? error.code
    } catch {
        return "\(error)"
    }
}

@Suite("Loan decider (§3.3)")
struct LoanDeciderTests {
    @Test func postingRules() throws {
        #expect(try LoanDecider.decide(.post(posted(), today: today26), fold([]), actor: borrower).count == 1)
        #expect(loanRefusal([], .post(posted(amount: 2600), today: today26), by: borrower) == "invalid_amount")
        #expect(loanRefusal([], .post(posted(amount: 1_002_500), today: today26), by: borrower) == "invalid_amount")
        #expect(loanRefusal([], .post(posted(deadline: "2026-11-22"), today: today26), by: borrower) == "invalid_deadline")
        #expect(loanRefusal([], .post(posted(deadline: "2027-02-21"), today: today26), by: borrower) == "invalid_deadline")
        #expect(loanRefusal([], .post(posted(deadline: "2027-02-20"), today: today26), by: borrower) == nil, "90 days ahead")
        var nepal = posted()
        nepal.countryCode = "Nepal"
        #expect(loanRefusal([], .post(nepal, today: today26), by: borrower) == "invalid_country")
    }

    @Test func sharesFundTheLoanAndNeverBeyondIt() throws {
        var history: [LoanEvent] = [.posted(posted(amount: 10_000))]
        let lenders = (0..<4).map { _ in UserID() }
        for (index, lender) in lenders.enumerated() {
            let events = try LoanDecider.decide(.purchaseShare(lender: lender, amountCents: 2500), fold(history), actor: lender)
            #expect(events.count == (index == 3 ? 2 : 1))
            history += events
        }
        #expect(fold(history).status == .funded)
        #expect(fold(history).fundedCents == 10_000)
        #expect(loanRefusal(history, .purchaseShare(lender: UserID(), amountCents: 2500), by: UserID()) == "loan_not_fundraising")
        let half: [LoanEvent] = [.posted(posted(amount: 5000))]
        #expect(loanRefusal(half, .purchaseShare(lender: UserID(), amountCents: 7500), by: UserID()) == "exceeds_need")
        #expect(loanRefusal(half, .purchaseShare(lender: borrower, amountCents: 2500), by: borrower) == "own_loan")
    }

    func funded(by lenders: [UserID], each: Int) -> [LoanEvent] {
        [.posted(posted(amount: each * lenders.count))]
            + lenders.map { .sharePurchased(LoanSharePurchased(lenderID: $0, amountCents: each)) } + [.funded(LoanFunded())]
    }

    @Test func aRepaymentOfOneHundredCentsOverThreeEqualSharesCredits34_33_33() throws {
        let lenders = (0..<3).map { _ in UserID() }
        let history = funded(by: lenders, each: 2500)
        let events = try LoanDecider.decide(.recordRepayment(amountCents: 100), fold(history), actor: borrower)
        guard case .repaymentRecorded(let recorded) = events.first else {
            Issue.record("expected a repayment")
            return
        }
        #expect(recorded.credits.map(\.amountCents) == [34, 33, 33])
        #expect(recorded.credits.map(\.lenderID) == lenders)
        #expect(loanRefusal(history, .recordRepayment(amountCents: 100), by: lenders[0]) == "not_borrower")
        #expect(loanRefusal(history, .recordRepayment(amountCents: 7501), by: borrower) == "exceeds_outstanding")
        let rest = try LoanDecider.decide(.recordRepayment(amountCents: 7400), fold(history + events), actor: borrower)
        #expect(rest.last == .repaid(LoanRepaid()))
        #expect(fold(history + events + rest).status == .repaid)
    }

    @Test func repaymentsInAnyInstalmentsRepayEveryLenderExactlyTheirShare() throws {
        let lenders = (0..<3).map { _ in UserID() }
        let shares = [2500, 5000, 7500]
        var history: [LoanEvent] =
            [.posted(posted(amount: 15_000))]
            + zip(lenders, shares).map { .sharePurchased(LoanSharePurchased(lenderID: $0, amountCents: $1)) }
            + [.funded(LoanFunded())]
        for _ in 0..<200 {
            let state = fold(history)
            if state.status == .repaid { break }
            let amount = min(state.outstandingCents, Int.random(in: 1...997))
            history += try LoanDecider.decide(.recordRepayment(amountCents: amount), state, actor: borrower)
        }
        let state = fold(history)
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
        #expect(loanRefusal(history, .expire(today: Day("2026-12-01")!), by: borrower) == "deadline_not_passed")
        let events = try LoanDecider.decide(.expire(today: Day("2026-12-02")!), fold(history), actor: borrower)
        #expect(events == [.expired(LoanExpired(refunds: [
            LenderAmount(lenderID: a, amountCents: 5000), LenderAmount(lenderID: b, amountCents: 5000),
        ]))])
    }
}

@Suite("Cart decider (§3.4)")
struct CartDeciderTests {
    let me = UserID()
    let loan = fold([.posted(posted(amount: 10_000))])

    func cart(_ events: [CartEvent]) -> CartState { events.reduce(CartDecider.initial, CartDecider.evolve) }

    func refusal(_ history: [CartEvent], _ command: CartCommand) -> String? {
        do {
            _ = try CartDecider.decide(command, cart(history), actor: me)
            return nil
        } catch let error as DomainError {
            return error.fields.first?.code ?? error.code
        } catch {
            return "\(error)"
        }
    }

    @Test func addingUsesTheDefaultShareElse2500() throws {
        let plain = try CartDecider.decide(.add(loanID: loan.loanID!, amountCents: nil, loan: loan, defaultShare: nil), cart([]), actor: me)
        #expect(plain == [.itemAdded(CartItemAdded(loanID: loan.loanID!, amountCents: 2500))])
        let preferred = try CartDecider.decide(.add(loanID: loan.loanID!, amountCents: nil, loan: loan, defaultShare: 7500), cart([]), actor: me)
        #expect(preferred == [.itemAdded(CartItemAdded(loanID: loan.loanID!, amountCents: 7500))])
    }

    @Test func lineRules() {
        let id = loan.loanID!
        let added: [CartEvent] = [.itemAdded(CartItemAdded(loanID: id, amountCents: 2500))]
        #expect(refusal(added, .add(loanID: id, amountCents: 2500, loan: loan, defaultShare: nil)) == "already_in_cart")
        #expect(refusal([], .add(loanID: id, amountCents: 3000, loan: loan, defaultShare: nil)) == "invalid_amount")
        #expect(refusal([], .add(loanID: id, amountCents: 12_500, loan: loan, defaultShare: nil)) == "exceeds_need")
        #expect(refusal([], .change(loanID: id, amountCents: 5000, loan: loan)) == "not_in_cart")
        #expect(refusal([], .remove(id)) == "not_in_cart")
        #expect(refusal(added, .change(loanID: id, amountCents: 5000, loan: loan)) == nil)
        var mine = fold([.posted(posted())])
        mine.borrowerID = me
        #expect(refusal([], .add(loanID: mine.loanID!, amountCents: 2500, loan: mine, defaultShare: nil)) == "own_loan")
    }

    @Test func checkoutNamesEveryLineThatNoLongerFits() throws {
        let open = loan
        var funded = fold([.posted(posted(amount: 2500))])
        funded.status = .funded
        let small = fold([.posted(posted(amount: 5000))])
        let history: [CartEvent] = [
            .itemAdded(CartItemAdded(loanID: open.loanID!, amountCents: 2500)),
            .itemAdded(CartItemAdded(loanID: funded.loanID!, amountCents: 2500)),
            .itemAdded(CartItemAdded(loanID: small.loanID!, amountCents: 7500)),
        ]
        let loans = [open.loanID!: open, funded.loanID!: funded, small.loanID!: small]
        do {
            _ = try CartDecider.decide(.checkout(loans: loans, paidWith: "balance"), cart(history), actor: me)
            Issue.record("checkout should be blocked")
        } catch let error as DomainError {
            #expect(error.code == "checkout_blocked")
            #expect(error.fields.map(\.field) == ["lines[1]", "lines[2]"])
            #expect(error.fields.map(\.code) == ["loan_not_fundraising", "exceeds_need"])
        }
        #expect(refusal([], .checkout(loans: [:], paidWith: "balance")) == "cart_empty")
        let ok = try CartDecider.decide(.checkout(loans: loans, paidWith: "balance"), cart(Array(history.prefix(1))), actor: me)
        #expect(ok == [.checkedOut(CartCheckedOut(purchases: [LoanAmount(loanID: open.loanID!, amountCents: 2500)], totalCents: 2500, paidWith: "balance"))])
        #expect(cart(Array(history.prefix(1)) + ok).lines.isEmpty)
    }
}
