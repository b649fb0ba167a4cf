import Foundation
import Testing

@testable import Server

/// The idempotency middleware's scan of a body stands for the route's only for those very
/// bytes: another body, even of the same length, is scanned anew (and refused if it must be).
@Suite("A body checked once")
struct CheckedBodyTests {
    @Test func theKeysStandOnlyForTheBytesThatWereChecked() throws {
        let checked = Array(#"{"title": "Drill" }"#.utf8)
        let body = try JSONShape.CheckedBody(checked)
        #expect(checked.withUnsafeBytes { body.keys(of: $0) } == ["title"])
        // Same length, other bytes: a duplicate key the scan would refuse.
        let other = Array(#"{"a":1,"a":2,"b":3}"#.utf8)
        #expect(other.count == checked.count)
        #expect(other.withUnsafeBytes { body.keys(of: $0) } == nil)
        #expect(throws: Problem.self) { try JSONShape.check(other) }
        #expect(Array("{}".utf8).withUnsafeBytes { body.keys(of: $0) } == nil)
        let empty = try JSONShape.CheckedBody([])
        #expect([UInt8]().withUnsafeBytes { empty.keys(of: $0) } == [])
    }
}
