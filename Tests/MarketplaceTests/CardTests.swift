import Marketplace
import Testing

let today = Day("2026-11-22")!

func check(_ number: String, month: Int = 12, year: Int = 2028, cvv: String? = nil, holder: String = "Ada Lovelace")
    -> Result<ValidatedCard, DomainError>
{
    let digits = number.filter(\.isNumber)
    let cvv = cvv ?? (digits.hasPrefix("34") || digits.hasPrefix("37") ? "1234" : "123")
    return Result {
        try CardRules.validate(number: number, expMonth: month, expYear: year, cvv: cvv, holderName: holder, today: today)
    }.mapError { $0 as! DomainError }
}

func codes(_ result: Result<ValidatedCard, DomainError>) -> [String] {
    if case .failure(let error) = result { return error.fields.map(\.code) }
    return []
}

@Suite("Payment cards (§4)")
struct CardTests {
    @Test(arguments: [
        ("4242424242424242", CardNetwork.visa), ("5555555555554444", .mastercard), ("2223003122003222", .mastercard),
        ("378282246310005", .amex), ("6011111111111117", .discover), ("3566002020360505", .jcb),
        ("4000000000000002", .visa),
    ])
    func publicTestNumbersAreAcceptedWithTheirNetwork(number: String, network: CardNetwork) throws {
        let card = try check(number).get()
        #expect(card.network == network)
        #expect(card.last4 == String(number.suffix(4)))
        #expect(card.redacted == "•••• \(number.suffix(4))")
    }

    /// One valid number per network and prefix range, by the Luhn digit that completes it.
    static func valid(_ prefix: String, length: Int) -> String {
        let body = prefix + String(repeating: "0", count: length - prefix.count - 1)
        return (0...9).map { body + String($0) }.first(where: CardRules.luhn)!
    }

    @Test(arguments: [
        ("34", 15, CardNetwork.amex), ("37", 15, .amex), ("6011", 16, .discover), ("644", 16, .discover),
        ("649", 16, .discover), ("65", 16, .discover), ("622126", 16, .discover), ("622925", 16, .discover),
        ("3528", 16, .jcb), ("3589", 16, .jcb), ("51", 16, .mastercard), ("55", 16, .mastercard),
        ("2221", 16, .mastercard), ("2720", 16, .mastercard), ("4", 16, .visa),
    ])
    func everyRangeValidThenBrokenEachWay(prefix: String, length: Int, network: CardNetwork) throws {
        let number = Self.valid(prefix, length: length)
        #expect(try check(number).get().network == network)
        // The last digit changed: the check digit fails.
        let last = number.last!.wholeNumberValue!
        let changed = String(number.dropLast()) + String((last + 1) % 10)
        #expect(codes(check(changed)) == ["invalid_checksum"])
        // One digit more.
        #expect(codes(check(number + "0")) == ["invalid_length"])
    }

    @Test func prefixesOutsideEveryRangeAreUnsupported() {
        for prefix in ["1", "30", "3527", "3590", "50", "56", "2220", "2721", "6012", "643", "622125", "622926", "9"] {
            #expect(codes(check(Self.validOrPadded(prefix))) == ["unsupported_network"], "\(prefix)")
        }
    }

    static func validOrPadded(_ prefix: String) -> String { prefix + String(repeating: "1", count: 16 - prefix.count) }

    @Test func spacesAndDashesAreIgnoredOtherCharactersAreNot() throws {
        #expect(try check("4242 4242-4242 4242").get().last4 == "4242")
        #expect(codes(check("4242 4242 4242 424x")) == ["invalid_number"])
    }

    @Test func expiryEdges() {
        #expect((try? check("4242424242424242", month: 11, year: 2026).get()) != nil, "this month is still valid")
        #expect(codes(check("4242424242424242", month: 10, year: 2026)) == ["card_expired"])
        #expect(codes(check("4242424242424242", month: 13, year: 2027)) == ["invalid_expiry"])
        #expect(codes(check("4242424242424242", month: 0, year: 2027)) == ["invalid_expiry"])
        #expect((try? check("4242424242424242", month: 11, year: 2046).get()) != nil, "exactly 20 years ahead")
        #expect(codes(check("4242424242424242", month: 12, year: 2046)) == ["invalid_expiry"])
    }

    @Test func cvvLengthsFollowTheNetwork() {
        #expect(codes(check("378282246310005", cvv: "123")) == ["invalid_cvv"])
        #expect((try? check("378282246310005", cvv: "1234").get()) != nil)
        #expect(codes(check("4242424242424242", cvv: "1234")) == ["invalid_cvv"])
        #expect(codes(check("4242424242424242", cvv: "12a")) == ["invalid_cvv"])
    }

    @Test func everyFailingFieldAtOnce() {
        let result = check("4242424242424241", month: 13, year: 2027, cvv: "1", holder: " ")
        #expect(codes(result) == ["invalid_checksum", "invalid_expiry", "invalid_cvv", "invalid_holder_name"])
        #expect(Set(((try? result.get()) == nil ? (result.failureFields) : [])) == ["number", "expMonth", "cvv", "holderName"])
    }
}

extension Result where Failure == DomainError {
    var failureFields: [String] {
        if case .failure(let error) = self { return error.fields.map(\.field) }
        return []
    }
}
