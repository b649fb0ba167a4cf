/// How a checkout or a repayment was paid, as responses show it: `{"method": "balance"}` or
/// `{"method": "card", "cardId": "…"}`. (Answers recorded before it was an object said
/// `"balance"` or the card's id; a repeat of one of those is read as the same.)
public struct PaidWith: Codable, Sendable, Hashable {
    public var method: String
    public var cardId: String?

    /// From what the events keep: `balance` or the card's id.
    public init(_ recorded: String) {
        self.init(method: recorded == "balance" ? "balance" : "card", cardId: recorded == "balance" ? nil : recorded)
    }

    public init(method: String, cardId: String?) {
        self.method = method
        self.cardId = cardId
    }

    public init(from decoder: any Decoder) throws {
        if let recorded = try? decoder.singleValueContainer().decode(String.self) {
            self = PaidWith(recorded)
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self = PaidWith(
            method: try container.decode(String.self, forKey: .method),
            cardId: try container.decodeIfPresent(String.self, forKey: .cardId))
    }
}
