import Foundation
import HTTPTypes
import Testing

/// An HTTP answer as a test reads it: status, headers and the body's bytes, decoded into the
/// server's own response types. `json` is the untyped tree, for the few tests about the JSON's
/// shape itself (a key present as null, or absent; the exact set of keys).
public struct Reply: Sendable, CustomStringConvertible {
    public var status: HTTPResponse.Status
    public var headers: HTTPFields
    public var data: Data

    public init(status: HTTPResponse.Status, headers: HTTPFields, data: Data) {
        self.status = status
        self.headers = headers
        self.data = data
    }

    public var text: String { String(decoding: data, as: UTF8.self) }

    /// The status and the start of the body, for failure messages.
    public var description: String { "\(status.code) \(text.prefix(2000))" }

    /// The body as a JSON object. Any other body (empty included: no test reads one's keys) is
    /// a recorded failure, then `[:]`: silently, `json["key"] == nil` would pass on it.
    public var json: [String: Any] {
        if let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] { return object }
        Issue.record("expected a JSON object, got \(status.code) \(String(decoding: data.prefix(200), as: UTF8.self))")
        return [:]
    }

    /// The body as `Body`; throws, naming the type and the answer, when it is not one.
    public func decode<Body: Decodable>(_ type: Body.Type = Body.self) throws -> Body {
        do {
            return try JSONDecoder.lender().decode(Body.self, from: data)
        } catch {
            throw UnexpectedBody(expected: "\(Body.self)", reply: description, error: "\(error)")
        }
    }

    /// The problem+json answer, or nil for any other body.
    public var problem: ProblemBody? { try? decode(ProblemBody.self) }

    /// A problem's stable `code`, or nil for any other body.
    public var code: String? { problem?.code }

    /// A problem's invalid fields: each field's code (the first, if a field is named twice).
    public var fieldCodes: [String: String] {
        Dictionary((problem?.errors ?? []).map { ($0.field, $0.code) }, uniquingKeysWith: { first, _ in first })
    }
}

/// A body that is not what the test expected: a test failure that says what came instead.
public struct UnexpectedBody: Error, CustomStringConvertible {
    public var expected: String
    public var reply: String
    public var error: String

    public var description: String { "expected a \(expected) body, got \(reply) (\(error))" }
}

extension JSONDecoder {
    /// As the server writes: ISO 8601 dates in whole seconds, UTC.
    public static func lender() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}

/// An RFC 9457 error answer (`application/problem+json`).
public struct ProblemBody: Decodable, Sendable {
    public var code: String
    public var status: Int
    public var detail: String
    /// Every invalid field, for validation problems; absent otherwise.
    public var errors: [FieldProblem]?

    public struct FieldProblem: Decodable, Sendable {
        public var field: String
        public var code: String
        public var message: String
    }
}
