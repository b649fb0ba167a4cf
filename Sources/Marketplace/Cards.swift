/// A card's network, told by the first digits of its number (SPEC §4).
public enum CardNetwork: String, Hashable, Sendable, Codable, CaseIterable {
    case amex, discover, jcb, mastercard, visa

    public var length: Int { self == .amex ? 15 : 16 }
    public var cvvLength: Int { self == .amex ? 4 : 3 }

    /// The network whose prefix ranges hold `digits`, checking the narrowest ranges first.
    public static func of(_ digits: String) -> CardNetwork? {
        func prefix(_ count: Int) -> Int? { digits.count >= count ? Int(digits.prefix(count)) : nil }
        if let six = prefix(6), (622126...622925).contains(six) { return .discover }
        if let four = prefix(4) {
            if four == 6011 { return .discover }
            if (3528...3589).contains(four) { return .jcb }
            if (2221...2720).contains(four) { return .mastercard }
        }
        if let three = prefix(3), (644...649).contains(three) { return .discover }
        if let two = prefix(2) {
            if two == 34 || two == 37 { return .amex }
            if two == 65 { return .discover }
            if (51...55).contains(two) { return .mastercard }
        }
        if digits.hasPrefix("4") { return .visa }
        return nil
    }
}

/// A card that passed every rule: what may be kept (network, last four, expiry), and the
/// digits, which may only reach the payment processor and the fingerprint, never storage.
public struct ValidatedCard: Hashable, Sendable {
    public var network: CardNetwork
    public var last4: String
    public var expMonth: Int
    public var expYear: Int
    public var holderName: String
    /// The full number: for the processor and the keyed fingerprint only.
    public var digits: String

    /// `•••• 4242`.
    public var redacted: String { CardRules.redacted(last4: last4) }
}

public enum CardRules {
    /// How a card is shown: `•••• 4242`.
    public static func redacted(last4: String) -> String { "•••• \(last4)" }

    /// Checks every field and reports every failure at once (SPEC §4). `today` decides expiry.
    public static func validate(
        number: String, expMonth: Int, expYear: Int, cvv: String, holderName: String, today: Day
    ) throws -> ValidatedCard {
        var validation = Validation()
        let digits = String(number.filter { $0 != " " && $0 != "-" })
        var network: CardNetwork?
        if digits.isEmpty || !digits.allSatisfy({ $0.isASCII && $0.isNumber }) {
            validation.check(false, "number", "invalid_number", "digits only (spaces and dashes are ignored)")
        } else if let found = CardNetwork.of(digits) {
            network = found
            if digits.count != found.length {
                validation.check(false, "number", "invalid_length", "a \(found.rawValue) number has \(found.length) digits")
            } else if !luhn(digits) {
                validation.check(false, "number", "invalid_checksum", "the number fails its check digit")
            }
        } else {
            validation.check(false, "number", "unsupported_network", "amex, discover, jcb, mastercard or visa")
        }

        if !(1000...9999).contains(expYear) {
            // `30` for 2030 is the usual slip: say what is wanted, not that the card expired.
            validation.check(false, "expYear", "invalid_expiry", "the year with four digits, like \(today.year + 4)")
        }
        if !(1...12).contains(expMonth) {
            validation.check(false, "expMonth", "invalid_expiry", "a month from 1 to 12")
        } else if !(1000...9999).contains(expYear) {
            // Said above.
        } else if (expYear, expMonth) < (today.year, today.month) {
            // Valid through the last day of its month.
            validation.check(false, "expYear", "card_expired", "the card expired at the end of \(expMonth)/\(expYear)")
        } else if (expYear, expMonth) > (today.year + 20, today.month) {
            validation.check(false, "expYear", "invalid_expiry", "more than 20 years ahead")
        }

        let cvvLength = network?.cvvLength
        if cvv.isEmpty || !cvv.allSatisfy({ $0.isASCII && $0.isNumber })
            || (cvvLength.map { cvv.count != $0 } ?? !(3...4).contains(cvv.count))
        {
            validation.check(false, "cvv", "invalid_cvv", "\(cvvLength.map(String.init) ?? "3 or 4") digits")
        }
        validation.check(
            holderName.trimmed.isWithin(1...100), "holderName", "invalid_holder_name", "1 to 100 characters")
        try validation.throwIfInvalid()
        return ValidatedCard(
            network: network!, last4: String(digits.suffix(4)), expMonth: expMonth, expYear: expYear,
            holderName: holderName.trimmed, digits: digits)
    }

    /// The Luhn check digit.
    public static func luhn(_ digits: String) -> Bool {
        var sum = 0
        for (index, character) in digits.reversed().enumerated() {
            guard var value = character.wholeNumberValue else { return false }
            if index % 2 == 1 {
                value *= 2
                if value > 9 { value -= 9 }
            }
            sum += value
        }
        return sum % 10 == 0
    }
}
