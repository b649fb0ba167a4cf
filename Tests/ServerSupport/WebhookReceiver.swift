import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// A webhook receiver: a real HTTP server in the test's process (Hummingbird, on 127.0.0.1)
/// that keeps every request POSTed to `/hooks/NAME` and answers as the test tells it, name by
/// name: 200, another status, a redirect, or nothing at all (it holds the request until the
/// sender's connection closes or the receiver stops). What the tests read is what arrived.
public final class WebhookReceiver: Sendable {
    public enum Answer: Sendable, Equatable {
        case ok
        case status(Int)
        case redirect(to: String)
        case hang
    }

    /// One request, as it arrived.
    public struct Delivery: Sendable {
        public var name: String
        public var headers: HTTPFields
        public var body: Data

        public var text: String { String(decoding: body, as: UTF8.self) }

        public func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { headers[$0] } }
    }

    private struct State {
        var port = 0
        var answers: [String: Answer] = [:]
        var deliveries: [Delivery] = []
        var stopped = false
    }

    private let state = Mutex(State())

    /// Runs `body` with a receiver listening; it stops when `body` returns. (Not HummingbirdTesting's
    /// `.live`, which listens on `localhost`: `::1` first on a machine that resolves it so, where
    /// the sender is told 127.0.0.1.)
    public static func run<Value>(_ body: @Sendable (WebhookReceiver) async throws -> Value) async throws -> Value {
        let receiver = WebhookReceiver()
        let router = Router(context: ReceiverContext.self)
        router.post("/hooks/:name") { request, context -> Response in try await receiver.receive(request, context: context) }
        var logger = Logger(label: "webhook-receiver")
        logger.logLevel = .error
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in receiver.state.withLock { $0.port = channel.localAddress?.port ?? 0 } },
            logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            defer { group.cancelAll() }
            let clock = ContinuousClock()
            let started = clock.now
            while receiver.port == 0 {
                guard clock.now - started < .seconds(10) else { throw ReceiverError.notListening }
                try await Task.sleep(for: .milliseconds(20))
            }
            // Requests held open let go first, so that the server can stop.
            defer { receiver.state.withLock { $0.stopped = true } }
            return try await body(receiver)
        }
    }

    enum ReceiverError: Error { case notListening }

    public var port: Int { state.withLock { $0.port } }

    /// The URL that reaches `name`.
    public func url(_ name: String) -> String { "http://127.0.0.1:\(port)/hooks/\(name)" }

    /// How `name` answers from now on (200 until told otherwise).
    public func answer(_ name: String, with answer: Answer) {
        state.withLock { $0.answers[name] = answer }
    }

    /// Every request `name` received, oldest first.
    public func deliveries(_ name: String) -> [Delivery] {
        state.withLock { state in state.deliveries.filter { $0.name == name } }
    }

    /// Waits until `name`'s requests satisfy `condition`, or `timeout`; those received by then.
    public func wait(
        for name: String, timeout: Duration = .seconds(30), until condition: ([Delivery]) throws -> Bool
    ) async throws -> [Delivery] {
        let clock = ContinuousClock()
        let started = clock.now
        while clock.now - started < timeout {
            let received = deliveries(name)
            if try condition(received) { return received }
            try await Task.sleep(for: .milliseconds(100))
        }
        return deliveries(name)
    }

    /// TCP connections open to this receiver now, from the other end (ESTABLISHED in
    /// `/proc/net/tcp` with this port as their remote one): the sender's, since the test's
    /// process never connects to it.
    public var openConnections: Int {
        // Both tables: a client may reach 127.0.0.1 on an IPv6 socket (as ::ffff:127.0.0.1).
        let tables = ["/proc/net/tcp", "/proc/net/tcp6"].map(Self.wholeFile)
        let hex = String(port, radix: 16, uppercase: true)
        let remote = ":" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        return tables.flatMap { $0.split(separator: "\n").dropFirst() }.filter { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[2].hasSuffix(remote) && fields[3] == "01"
        }.count
    }

    /// A file of /proc, whole: it says its size is 0, and a read that trusts the size stops
    /// at the first page (about 30 connections).
    static func wholeFile(_ path: String) -> String {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var bytes = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += chunk[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    func receive(_ request: Request, context: ReceiverContext) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: 1 << 20)
        let name = context.parameters.get("name") ?? ""
        let delivery = Delivery(name: name, headers: request.headers, body: Data(body.readableBytesView))
        let answer = state.withLock { state in
            state.deliveries.append(delivery)
            return state.answers[name] ?? .ok
        }
        switch answer {
        case .ok:
            return Response(status: .ok)
        case .status(let code):
            return Response(status: HTTPResponse.Status(code: code))
        case .redirect(let target):
            return Response(status: .found, headers: [.location: target])
        case .hang:
            // Until the sender gives up (its connection closes) or the receiver stops.
            while context.channel.isActive, !state.withLock({ $0.stopped }) {
                try? await Task.sleep(for: .milliseconds(50))
            }
            return Response(status: .ok)
        }
    }
}

/// A request's context that keeps its connection, to see the sender close it.
struct ReceiverContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }
}
