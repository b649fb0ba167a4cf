import Foundation
import Marketplace
import Testing

@Suite("Cards, deposits and checkout payment (§3.1, §3.4)")
struct WalletTests {
    let me = UserID()
    let today = Day(year: 2026, month: 11, day: 22)!

    func card(expMonth: Int = 12, expYear: Int = 2030, fingerprint: String = "f1") -> CardOnFile {
        CardOnFile(
            cardID: CardID(), network: .visa, last4: "4242", expMonth: expMonth, expYear: expYear, fingerprint: fingerprint,
            processorToken: "tok")
    }

    /// My registration, then `more`.
    func history(_ more: [UserEvent]) -> [UserEvent] {
        [.registered(UserRegistered(userID: me, handle: "ada", displayName: "Ada", email: "ada@example.org"))] + more
    }

    func user(_ more: [UserEvent]) -> UserState { given(.user, history(more)).state }

    func code(_ body: () throws -> Any) -> String? {
        do { _ = try body(); return nil } catch let error as DomainError { return error.code } catch { return "\(error)" }
    }

    @Test func theSameCardAgainUpdatesTheOneOnFileAndAddsNone() throws {
        let first = card()
        let onFile = history([.cardAdded(first)])
        given(.user, onFile).when(.addCard(card())).then([], "same fingerprint, same expiry: nothing")
        given(.user, onFile).when(.addCard(card(expMonth: 6, expYear: 2032)))
            .then([.cardExpiryUpdated(PaymentCardExpiryUpdated(cardID: first.cardID, expMonth: 6, expYear: 2032))])
        #expect(try given(.user, onFile).when(.addCard(card(fingerprint: "f2"))).thenEvents().count == 1, "another card is added")
        given(.user, onFile).when(.removeCard(CardID())).thenRefused("card_not_found")
    }

    @Test func aDepositNeedsAnUnexpiredCardOnFileAndAnAmountInRange() throws {
        let valid = card()
        // Valid through the last day of its month: October 2026 has passed on 22 November.
        let expired = card(expMonth: 10, expYear: 2026, fingerprint: "f2")
        let thisMonth = card(expMonth: 11, expYear: 2026, fingerprint: "f3")
        let cards = history([.cardAdded(valid), .cardAdded(expired), .cardAdded(thisMonth)])
        func deposit(_ amount: Int, _ card: CardID) -> Then<UserEvent> {
            given(.user, cards).when(.deposit(amountCents: amount, cardID: card, chargeID: "ch", today: today))
        }
        deposit(5000, expired.cardID).thenRefused("card_expired")
        deposit(5000, CardID()).thenRefused("card_not_found")
        deposit(499, valid.cardID).thenRefused("validation_failed")
        deposit(500_001, valid.cardID).thenRefused("validation_failed")
        #expect(try deposit(500, thisMonth.cardID).thenEvents().count == 1)
        let events = try deposit(500_000, valid.cardID).thenEvents()
        #expect(given(.user, cards + events).state.balanceCents == 500_000)
    }

    @Test func checkoutPaysFromTheBalanceOnlyWhenItCoversTheTotalOrByAChargeableCard() throws {
        let lender = me
        let borrower = UserID()
        let loanID = LoanID()
        let loan = given(.loan, [
            .posted(
                LoanPosted(
                    loanID: loanID, borrowerID: borrower, title: "Loom", description: "", sector: "Arts", activity: "Weaving",
                    countryCode: "NP", location: Location(lat: 28.2, lng: 83.99, place: ""), amountCents: 10_000,
                    deadline: Day(year: 2026, month: 12, day: 20)!))
        ]).state
        let cart = given(.cart, [.itemAdded(CartItemAdded(loanID: loanID, amountCents: 5000))]).state
        let expired = card(expMonth: 10, expYear: 2026)
        let poor = user([.cardAdded(expired), .fundsDeposited(FundsDeposited(amountCents: 4999, cardID: expired.cardID, chargeID: "c"))])
        func checkout(_ user: UserState, _ payment: Payment) throws -> CheckoutDecision {
            try CheckoutDecider.decide(cart: cart, loans: [loanID: loan], user: user, payment: payment, actor: lender, today: today)
        }
        #expect(code { try checkout(poor, .balance) } == "insufficient_funds")
        #expect(code { try checkout(poor, .card(expired.cardID, chargeID: "ch")) } == "card_expired")
        let rich = user([.fundsDeposited(FundsDeposited(amountCents: 5000, cardID: CardID(), chargeID: "c"))])
        let decision = try checkout(rich, .balance)
        #expect(decision.user == [.balanceDebited(BalanceDebited(amountCents: 5000))])
        #expect(decision.loans.map(\.events) == [[.sharePurchased(LoanSharePurchased(lenderID: lender, amountCents: 5000))]])
        #expect(decision.user.reduce(rich, UserDecider.evolve).balanceCents == 0)
    }

    @Test func aChargeIsRecordedOnceWhateverRetried() throws {
        let valid = card()
        let onFile = history([.cardAdded(valid)])
        let first = try given(.user, onFile).when(.deposit(amountCents: 1000, cardID: valid.cardID, chargeID: "ch_1", today: today))
            .thenEvents()
        let after = given(.user, onFile + first)
        #expect(after.state.chargeIDs == ["ch_1"])
        after.when(.deposit(amountCents: 1000, cardID: valid.cardID, chargeID: "ch_1", today: today))
            .thenRefused(UserDecider.chargeAlreadyRecorded)
        #expect(code { try UserDecider.checkNewCharge("ch_1", in: after.state) } == "charge_already_recorded")
        #expect(try after.when(.deposit(amountCents: 1000, cardID: valid.cardID, chargeID: "ch_2", today: today)).thenEvents().count == 1)
    }

    @Test func aRepaymentIsPaidByTheBorrowerFromTheBalanceOrByCardNeverFromNothing() throws {
        let borrower = me
        let lenders = [UserID(), UserID()]
        let loanID = LoanID()
        let loan = given(.loan, [
            .posted(
                LoanPosted(
                    loanID: loanID, borrowerID: borrower, title: "Loom", description: "", sector: "Arts", activity: "Weaving",
                    countryCode: "NP", location: Location(lat: 1, lng: 2, place: ""), amountCents: 5000,
                    deadline: Day(year: 2026, month: 12, day: 20)!)),
            .sharePurchased(LoanSharePurchased(lenderID: lenders[0], amountCents: 2500)),
            .sharePurchased(LoanSharePurchased(lenderID: lenders[1], amountCents: 2500)), .funded(LoanFunded()),
        ]).state
        let valid = card()
        let poor = user([.cardAdded(valid), .fundsDeposited(FundsDeposited(amountCents: 999, cardID: valid.cardID, chargeID: "ch_0"))])
        func repay(_ amount: Int, _ payment: Payment, _ state: UserState) throws -> RepaymentDecision {
            try RepaymentDecider.decide(
                amountCents: amount, loanID: loanID, loan: loan, borrower: state, payment: payment, actor: borrower, today: today)
        }
        #expect(code { try repay(1000, .balance, poor) } == "insufficient_funds")
        let fromBalance = try repay(999, .balance, poor)
        #expect(fromBalance.borrower == [.balanceDebited(BalanceDebited(amountCents: 999, reason: .repayment, loanID: loanID))])
        #expect(fromBalance.credits.map(\.credit.amountCents).reduce(0, +) == 999, "the lenders get exactly what was paid")
        #expect(fromBalance.borrower.reduce(poor, UserDecider.evolve).balanceCents == 0)

        let byCard = try repay(1000, .card(valid.cardID, chargeID: "ch_9"), poor)
        #expect(
            byCard.borrower == [
                .cardCharged(CardCharged(cardID: valid.cardID, amountCents: 1000, chargeID: "ch_9", purpose: .repayment, loanID: loanID))
            ])
        #expect(byCard.credits.map(\.credit.amountCents).reduce(0, +) == 1000)
        #expect(code { try repay(1000, .card(valid.cardID, chargeID: "ch_0"), poor) } == "charge_already_recorded")
        #expect(code { try repay(1000, .card(CardID(), chargeID: "ch_8"), poor) } == "card_not_found")
        #expect(code { try RepaymentDecider.decide(
            amountCents: 10, loanID: loanID, loan: loan, borrower: poor, payment: .balance, actor: lenders[0], today: today) }
            == "not_borrower")
    }
}
