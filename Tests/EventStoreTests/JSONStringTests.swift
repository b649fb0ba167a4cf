import Foundation
import Testing

@testable import EventStore

/// The string literals the store writes into an append's JSON (metadata, sealed envelopes).
@Suite("JSON string literals")
struct JSONStringTests {
    @Test func everyStringReadsBackAsItself() throws {
        var generator = SeededGenerator(seed: 17)
        var samples = ["", "plain", "quote \" and \\ backslash", "tab\tline\ncr\r", "\u{01}\u{08}\u{0C}\u{1F}\u{7F}", "é ✓ 🇳🇵 \u{2028}", "/slash/"]
        for _ in 0..<2_000 {
            let scalars = (0..<Int.random(in: 0..<12, using: &generator)).map { _ in
                Unicode.Scalar(UInt32.random(in: 1..<0x250, using: &generator)) ?? "x"
            }
            samples.append(String(String.UnicodeScalarView(scalars)))
        }
        for text in samples {
            let literal = jsonString(text)
            #expect(try JSONDecoder().decode(String.self, from: Data(literal.utf8)) == text, "\(literal)")
            // No raw control character is left in it: JSON forbids them in strings.
            #expect(!literal.utf8.contains { $0 < 0x20 }, "\(literal)")
        }
    }
}
