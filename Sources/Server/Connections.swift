import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import NIOHTTPTypes
import Synchronization

/// How long a connection may take, and how many one address may hold.
///
/// A request's head must be complete within `headerTimeout` of its first byte (or of the
/// connection's opening), so that a client trickling headers (slowloris) is closed in
/// seconds; a connection with no request under way is closed after `idleTimeout`
/// (keep-alive); and one address holds at most `maxPerAddress` connections at once.
public struct ConnectionLimits: Sendable {
    public var headerTimeout: Duration
    /// How long a request's body may take after its head (a body trickled byte by byte).
    public var bodyTimeout: Duration
    public var idleTimeout: Duration
    /// How long a response may wait for a client that reads none of it (its socket full):
    /// then the connection is closed. Together with the writers' backpressure, a client that
    /// never reads holds at most a socket's buffers and one chunk of a response (issue 48:
    /// 40 such sockets took 1 GB while whole images waited for them).
    public var writeTimeout: Duration
    public var maxPerAddress: Int

    public init(
        headerTimeout: Duration = .seconds(10), bodyTimeout: Duration = .seconds(30), idleTimeout: Duration = .seconds(60),
        writeTimeout: Duration = .seconds(30), maxPerAddress: Int = 128
    ) {
        self.headerTimeout = headerTimeout
        self.bodyTimeout = bodyTimeout
        self.idleTimeout = idleTimeout
        self.writeTimeout = writeTimeout
        self.maxPerAddress = maxPerAddress
    }

    /// The HTTP/1.1 server with these limits.
    func server() -> HTTPServerBuilder {
        let counts = AddressCounts()
        let limits = self
        return .http1(
            configuration: .init(
                additionalChannelHandlers: [ConnectionGuard(limits: limits, counts: counts)],
                idleTimeout: .nanoseconds(Int64(limits.idleTimeout / .nanoseconds(1)))))
    }
}

/// Open connections per client address, shared by every connection of the server.
final class AddressCounts: Sendable {
    private let counts = Mutex([String: Int]())

    /// Counts one more for `address`; false (and nothing counted) past `limit`.
    func open(_ address: String, limit: Int) -> Bool {
        counts.withLock { counts in
            let now = counts[address, default: 0]
            guard now < limit else { return false }
            counts[address] = now + 1
            return true
        }
    }

    func close(_ address: String) {
        counts.withLock { counts in
            let left = counts[address, default: 1] - 1
            counts[address] = left > 0 ? left : nil
        }
    }
}

/// Watches one connection, after HTTP decoding: the request heads it reads and the
/// responses it writes. It puts a `ByteWatcher` at the front of the pipeline to learn when
/// the bytes of a new request start arriving, which the decoder would not say until the
/// head is complete.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let limits: ConnectionLimits
    private let counts: AddressCounts
    private var address: String?
    private var inFlight = 0
    private var headDeadline: Scheduled<Void>?
    /// Set while the socket takes no more bytes: the connection closes if it stays so.
    private var writeDeadline: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    init(limits: ConnectionLimits, counts: AddressCounts) {
        self.limits = limits
        self.counts = counts
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let address = context.channel.remoteAddress?.ipAddress.map(ClientAddress.key) ?? "unknown"
        guard counts.open(address, limit: limits.maxPerAddress) else {
            context.close(promise: nil)
            return
        }
        self.address = address
        self.context = context
        try? context.pipeline.syncOperations.addHandler(ByteWatcher(self), position: .first)
        awaitHead(context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        headDeadline?.cancel()
        writeDeadline?.cancel()
        if let address { counts.close(address) }
        address = nil
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        headDeadline?.cancel()
        writeDeadline?.cancel()
        if let address { counts.close(address) }
        address = nil
        context.fireChannelInactive()
    }

    /// The first bytes of a request, while none is under way: its head has `headerTimeout`.
    func bytesArrived() {
        if inFlight == 0, headDeadline == nil, let context { awaitHead(context) }
    }

    private func awaitHead(_ context: ChannelHandlerContext) {
        headDeadline?.cancel()
        headDeadline = closing(context, after: limits.headerTimeout)
    }

    private func closing(_ context: ChannelHandlerContext, after delay: Duration) -> Scheduled<Void> {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        return context.eventLoop.scheduleTask(in: .nanoseconds(Int64(delay / .nanoseconds(1)))) {
            loopBound.value.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            // The head is in; the body has its own time, until the request's end.
            headDeadline?.cancel()
            headDeadline = closing(context, after: limits.bodyTimeout)
            inFlight += 1
        case .end:
            headDeadline?.cancel()
            headDeadline = nil
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        writeDeadline?.cancel()
        writeDeadline = context.channel.isWritable ? nil : closing(context, after: limits.writeTimeout)
        context.fireChannelWritabilityChanged()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { inFlight = max(0, inFlight - 1) }
        context.write(data, promise: promise)
    }
}

/// Tells its `ConnectionGuard` when bytes arrive, before the HTTP decoder sees them.
final class ByteWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private weak var watcher: ConnectionGuard?

    init(_ watcher: ConnectionGuard) { self.watcher = watcher }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        watcher?.bytesArrived()
        context.fireChannelRead(data)
    }
}

/// A client address as the limits count it: IPv4 as it is (an IPv4-mapped IPv6 address
/// too), IPv6 by its /64, which one host or household holds whole.
public enum ClientAddress {
    public static func key(_ address: String) -> String {
        let lower = address.lowercased()
        if lower.hasPrefix("::ffff:"), lower.contains(".") { return String(lower.dropFirst(7)) }
        guard lower.contains(":") else { return address }
        // Expand `::` to the zero groups it stands for, then keep the first four.
        let halves = lower.components(separatedBy: "::")
        let head = halves[0].split(separator: ":", omittingEmptySubsequences: true).map(String.init)
        let tail = halves.count > 1 ? halves[1].split(separator: ":", omittingEmptySubsequences: true).map(String.init) : []
        let groups = head + Array(repeating: "0", count: max(0, 8 - head.count - tail.count)) + tail
        return groups.prefix(4).joined(separator: ":") + "::/64"
    }
}
