// What tests watch a server with: a count shared between tasks, its log lines, a raw socket.

import Foundation
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A count shared between tasks.
public final class Counter: Sendable {
    private let state: Mutex<Int>
    public init(_ value: Int) { state = Mutex(value) }
    public var value: Int { state.withLock { $0 } }
    public func add(_ delta: Int) { state.withLock { $0 += delta } }
}

/// Every log line the server writes, kept for searching.
public final class LogCapture: LogHandler, @unchecked Sendable {
    private let lines = Mutex<[String]>([])
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    public init() {}

    public var text: String { lines.withLock { $0.joined(separator: "\n") } }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(
        level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String,
        function: String, line: UInt
    ) {
        let all = self.metadata.merging(metadata ?? [:]) { $1 }
        lines.withLock { $0.append("\(level) \(message) \(all)") }
    }
}

/// A raw TCP connection to a server, for what HTTP clients will not do: send half a request,
/// hold a connection with nothing on it, or read a body that never ends.
public final class RawConnection: @unchecked Sendable {
    public let socket: Int32

    public init(port: Int) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0)
    }

    private var isClosed = false

    deinit { close() }

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(socket)
    }

    public func send(_ text: String) {
        _ = text.withCString { Glibc.send(socket, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    }

    /// Reads until the server closes the connection, `done` says so of the text, or `within`
    /// passes: the text, and whether the server closed. Blocks: call it off the task pool.
    public func read(within: Duration, until done: (String) -> Bool = { _ in false }) -> (text: String, closed: Bool) {
        let clock = ContinuousClock()
        let deadline = clock.now + within
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 65536)
        while clock.now < deadline, !done(text) {
            var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let left = max(1, Int32((deadline - clock.now) / .milliseconds(1)))
            guard poll(&poller, 1, min(left, 100)) > 0 else { continue }
            let count = recv(socket, &buffer, buffer.count, 0)
            if count <= 0 { return (text, true) }
            text += String(decoding: buffer[0..<count], as: UTF8.self)
        }
        return (text, false)
    }
}
