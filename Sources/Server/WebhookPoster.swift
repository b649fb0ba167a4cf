import Aggregates
import AsyncHTTPClient
import EventStore
import Foundation
import Logging
import NIOCore
import Postgres
import UseCases

/// Webhooks out over AsyncHTTPClient (SPEC §12.6). Each endpoint's round has a client of its
/// own, shut down when the round ends, so no connection outlives it and a receiver that never
/// answers holds at most one; the client connects to the address the round checked (its
/// `dnsOverride`, the certificate still checked against the URL's host), not to whatever the
/// name resolves to a moment later. Redirects are never followed: a 3xx is a failure.
struct HTTPWebhookPoster: WebhookPoster {
    let settings: WebhookSettings
    let logger: Logger

    static let userAgent = "Lender-Webhooks/1"

    func withConnection(to target: WebhookTarget, _ body: (any WebhookConnection) async throws -> Void) async throws {
        let timeout = TimeAmount.seconds(Int64(max(1, settings.timeoutSeconds)))
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            // `read`: the longest silence while an answer comes, its body included (the
            // deadline below ends at the answer's head).
            timeout: HTTPClient.Configuration.Timeout(
                connect: .seconds(Int64(max(1, min(settings.connectTimeoutSeconds, settings.timeoutSeconds)))), read: timeout),
            connectionPool: HTTPClient.Configuration.ConnectionPool(
                idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: 1))
        if let address = target.destination.address { configuration.dnsOverride = [target.destination.host: address] }
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        let connection = Connection(client: client, target: target, timeout: timeout, logger: logger)
        do {
            try await body(connection)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try? await client.shutdown()
    }

    struct Connection: WebhookConnection {
        let client: HTTPClient
        let target: WebhookTarget
        let timeout: TimeAmount
        let logger: Logger

        func post(_ event: RecordedEvent) async throws {
            let body = try WebhookEventBody(event).json()
            var request = HTTPClientRequest(url: target.url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "User-Agent", value: HTTPWebhookPoster.userAgent)
            request.headers.add(name: "Lender-Event-Position", value: String(event.position))
            request.headers.add(name: "Lender-Event-Type", value: event.type)
            request.headers.add(
                name: "Lender-Signature",
                value: WebhookSignature.header(secret: target.secret, timestamp: Int(Date().timeIntervalSince1970), body: body))
            request.body = .bytes(ByteBuffer(bytes: body))
            let response = try await client.execute(request, timeout: timeout, logger: logger)
            // Drain (a little of) the answer, so that its connection can carry the next post,
            // within two seconds: a receiver that trickles its body holds nothing up (the
            // client's deadline ended with the head). What it says is not kept.
            let answer = response.body
            try? await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await answer.collect(upTo: 64 * 1024) }
                group.addTask {
                    try await Task.sleep(for: .seconds(2))
                    throw CancellationError()
                }
                defer { group.cancelAll() }
                try await group.next()
            }
            guard (200..<300).contains(response.status.code) else { throw WebhookRefused(status: Int(response.status.code)) }
        }
    }
}

/// A receiver's answer other than 2xx.
struct WebhookRefused: Error, CustomStringConvertible {
    var status: Int

    var description: String {
        (300..<400).contains(status) ? "the receiver answered \(status), a redirect (never followed)" : "the receiver answered \(status)"
    }
}

/// A webhook's body: the event as auditors read it (`GET /v1/events`: personal fields sealed,
/// never in clear), written by the answers' encoder. `id` is the event's hash, the same
/// whichever server sends it and however often: a receiver drops a repeat by it.
struct WebhookEventBody: Encodable {
    var id: String
    var position: Int64
    var type: String
    var stream: String
    var occurredAt: Date
    var data: JSONValue

    init(_ event: RecordedEvent) throws {
        id = event.hash.hexString
        position = event.position
        type = event.type
        stream = event.streamID.rawValue
        occurredAt = event.recordedAt
        data = Self.sealedOnly(try event.data.decode(JSONValue.self), type: event.type)
    }

    /// Every personal field either sealed or redacted: events written before 0.3.0 hold
    /// titles and descriptions in clear, and nothing personal leaves in clear (SPEC §12.6).
    static func sealedOnly(_ data: JSONValue, type: String) -> JSONValue {
        guard case .object(var fields) = data, let personal = lenderPersonalFields[type] else { return data }
        for field in personal {
            guard let value = fields[field.name], value != .null, value["$sealed"] == nil else { continue }
            fields[field.name] = field.redacted
        }
        return .object(fields)
    }

    func json() throws -> [UInt8] { try StreamingJSONEncoder.encode(self) }
}
