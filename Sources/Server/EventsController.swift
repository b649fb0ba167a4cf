import EventStore
import Foundation
import HTTPTypes
import Hummingbird
import Marketplace
import NIOCore
import Postgres
import Projections
import ServiceLifecycle
import UseCases

/// The global log, for auditors (SPEC §8): `GET /v1/events?after=&limit=` in pages, and
/// `GET /v1/events/stream?after=` live, as server-sent events woken by LISTEN/NOTIFY.
/// Everyone else gets 403 (`AuditorsOnly`).
struct EventsController: Sendable {
    let store: EventStore
    /// The reader's session and role, checked once a `heartbeat` while the stream runs.
    let accounts: Accounts
    let auditors: Auditors
    /// How long the live stream stays silent before it writes a comment line.
    var heartbeat: Duration = .seconds(15)

    /// An event as auditors read it, hashes included, so that they can check the chains.
    struct EventResource: ResponseEncodable {
        var position: Int64
        var streamId: String
        var streamVersion: Int
        var type: String
        var schemaVersion: Int
        var data: JSONValue
        var metadata: JSONValue
        var recordedAt: Date
        var hash: String
        var previousHash: String

        init(_ event: RecordedEvent) throws {
            position = event.position
            streamId = event.streamID.rawValue
            streamVersion = event.streamVersion
            type = event.type
            schemaVersion = event.schemaVersion
            data = try event.data.decode(JSONValue.self)
            metadata = try event.metadata.decode(JSONValue.self)
            recordedAt = event.recordedAt
            hash = event.hash.hexString
            previousHash = event.previousHash.hexString
        }
    }

    /// A signed checkpoint as kept (see `LogCheckpoint`), with its id for the next page's `after`.
    struct CheckpointResource: ResponseEncodable {
        var id: Int64
        var format: String
        var position: Int64
        var streams: Int
        var streamsDigest: String
        var signedAt: String
        var publicKey: String
        var signature: String

        init(id: Int64, _ checkpoint: LogCheckpoint) {
            self.id = id
            format = checkpoint.format
            position = checkpoint.position
            streams = checkpoint.streams
            streamsDigest = checkpoint.streamsDigest
            signedAt = checkpoint.signedAt
            publicKey = checkpoint.publicKey
            signature = checkpoint.signature
        }
    }

    /// `GET /v1/audit/checkpoints?after=&limit=`: the signed checkpoints, oldest first, for
    /// auditors to keep copies of and verify the log against.
    @Sendable func checkpoints(_ request: Request, context: UserContext) async throws -> Page<CheckpointResource> {
        var fields = [FieldError]()
        var after: Int64 = 0
        if let text = request.uri.queryParameters["after"] {
            if let value = Int64(text), value >= 0 { after = value } else {
                fields.append(FieldError(field: "after", code: "invalid_cursor", message: "a checkpoint id, 0 or more"))
            }
        }
        let limit = request.pageLimit(1...1000, default: 100, problems: &fields)
        if !fields.isEmpty { throw DomainError.invalid(fields) }
        let kept = try await store.checkpoints(after: after, limit: limit).map { CheckpointResource(id: $0.id, $0.checkpoint) }
        return Page(data: kept, nextCursor: kept.count == limit ? kept.last.map { String($0.id) } : nil)
    }

    @Sendable func page(_ request: Request, context: UserContext) async throws -> Page<EventResource> {
        let (after, problems) = Self.after(request)
        var fields = problems
        let limit = request.pageLimit(1...1000, default: 100, problems: &fields)
        if !fields.isEmpty { throw DomainError.invalid(fields) }
        let read = try await store.read(after: after, limit: limit)
        if read.isEmpty { try await checkNotBeyondHead(after) }
        let events = try read.map(EventResource.init)
        return Page(data: events, nextCursor: events.count == limit ? events.last.map { String($0.position) } : nil)
    }

    /// Every event after `after`, then each new one as it commits, until the client leaves.
    @Sendable func stream(_ request: Request, context: UserContext) async throws -> Response {
        let (after, problems) = Self.after(request)
        if !problems.isEmpty { throw DomainError.invalid(problems) }
        try await checkNotBeyondHead(after)
        let store = store
        let heartbeat = heartbeat
        let watching = StreamWatch(accounts: accounts, token: context.token, user: context.user, auditors: auditors, every: heartbeat)
        return Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
            body: ResponseBody { writer in
                var watch = watching
                try await writer.write(ByteBuffer(string: ": following the log after \(after)\n\n"))
                // A stream never ends by itself: it ends when the server shuts down (the client
                // reconnects elsewhere with Last-Event-ID), or when a write finds the client gone.
                // A comment line when the log is quiet keeps proxies from closing the connection
                // and lets a write find a client that left.
                for try await step in store.follow(after: after).heartbeats(every: heartbeat).cancelOnGracefulShutdown() {
                    // Logged out, or no longer an auditor: the stream ends.
                    guard await watch.mayGoOn() else { break }
                    switch step {
                    case .event(let event):
                        // The same JSON as `GET /v1/events` writes for it.
                        try await writer.write(try StreamingJSONEncoder.serverSentEvent(id: event.position, event: "event", try EventResource(event)))
                    case .idle:
                        try await writer.write(ByteBuffer(string: ": heartbeat\n\n"))
                    }
                }
                try await writer.finish(nil)
            })
    }

    /// A follower that has seen a position the log no longer reaches must hear of it: the
    /// database lost commits (a failover without synchronous commit), and the events that
    /// take those positions again are not the ones it read.
    private func checkNotBeyondHead(_ after: Int64) async throws {
        guard after > 0 else { return }
        let head = try await store.headPosition()
        guard after > head else { return }
        throw DomainError(
            .conflict, "log_behind",
            "The log ends at position \(head), before \(after): positions after \(head) that you read are no longer in it.")
    }

    /// The `Last-Event-ID` a reconnecting client sends, or else `after` (a log position, 0 by
    /// default). The header wins: an `EventSource` reconnects to the URL it opened, `after`
    /// and all, and must not be sent again what it saw since.
    static func after(_ request: Request) -> (Int64, [FieldError]) {
        guard let text = request.headers[.lastEventID] ?? request.uri.queryParameters["after"].map(String.init) else {
            return (0, [])
        }
        guard let after = Int64(text), after >= 0 else {
            return (0, [FieldError(field: "after", code: "invalid_position", message: "a log position, 0 or more")])
        }
        return (after, [])
    }
}

/// Lets only auditors through (`lender users grant-auditor`); everyone else gets 403.
struct AuditorsOnly: RouterMiddleware {
    let auditors: Auditors

    func handle(_ request: Request, context: UserContext, next: (Request, UserContext) async throws -> Response) async throws
        -> Response
    {
        guard try await auditors.contains(context.user) else {
            throw DomainError(.forbidden, "not_auditor", "Only auditors may read the log.")
        }
        return try await next(request, context)
    }
}

extension HTTPField.Name {
    static let lastEventID = HTTPField.Name("Last-Event-ID")!
}
