import Foundation
import HummingbirdCore
import Testing

@testable import Server

/// Query parameters decoded on the bytes, against Foundation's `removingPercentEncoding` (after
/// `+` as a space), which they replace.
@Suite("Form decoding")
struct FormDecodingTests {
    static let samples = [
        "", "plain", "a+b", "a%20b", "%2B", "100%25", "%e2%9c%93", "%E2%9C%93+ok", "%00", "%1f%7F", "caf%C3%A9",
        "%", "%4", "%zz", "a%2", "%%41", "50%+off", "%C3", "%FF%FE", "%C3%28", "✓+é", "q=1", "%2B%2b+",
    ]

    @Test("each sample decodes as Foundation decodes it", arguments: samples)
    func likeFoundation(_ sample: String) {
        let spaced = sample.replacingOccurrences(of: "+", with: " ")
        let expected = spaced.removingPercentEncoding ?? spaced
        #expect(URI.formDecode(Substring(sample)) == expected)
    }

    @Test("a query's parameters, in order, names decoded too")
    func parameters() {
        let uri = URI("/v1/market?q=red+bike&near=27.7%2C85.3&empty=&flag&caf%C3%A9=%E2%9C%93")
        let parameters = uri.formParameters
        #expect(parameters.map(\.name) == ["q", "near", "empty", "flag", "café"])
        #expect(parameters.map(\.value) == ["red bike", "27.7,85.3", "", "", "✓"])
    }
}
