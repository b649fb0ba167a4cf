import Foundation
import HTTPTypes
import HummingbirdTesting
import LenderClient

/// The API's request bodies, typed as the OpenAPI document states them (the generated
/// client's schemas): `API.BidBody(dailyPriceCents: 1400, from: "2026-12-05", until: …)`.
/// A body a test means to be wrong (a missing field, a string for a number, an unknown key,
/// an explicit null) is still written as `json:` or `raw:`, since no schema can hold it.
public typealias API = Components.Schemas

/// `body` as the JSON object `send(_:_:json:…)` takes: ids as UUIDs write them, times as
/// ISO 8601, as the server reads them.
func jsonObject(_ body: some Encodable) throws -> [String: Any] {
    let encoder = JSONEncoder()
    encoder.dateEncodingStrategy = .iso8601
    let data = try encoder.encode(body)
    guard let json = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
        throw NotJSON(value: String(decoding: data, as: UTF8.self))
    }
    return json
}

extension TestClientProtocol {
    /// Sends `body` as JSON, as `send(_:_:json:…)` does (a bid's payment filled in alike).
    public func send(
        _ method: HTTPRequest.Method, _ uri: String, body: some Encodable, token: String? = nil, idempotencyKey: String? = nil
    ) async throws -> Reply {
        try await send(method, uri, json: try jsonObject(body), token: token, idempotencyKey: idempotencyKey)
    }
}

extension ServerProcess {
    /// Sends `body` as JSON to the process, as `send(_:_:json:…)` does.
    public func send(
        _ method: HTTPRequest.Method, _ path: String, body: some Encodable, token: String? = nil, idempotencyKey: String? = nil,
        headers: [String: String] = [:]
    ) async throws -> Reply {
        try await send(method, path, json: try jsonObject(body), token: token, idempotencyKey: idempotencyKey, headers: headers)
    }
}
