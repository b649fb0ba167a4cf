import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif


/// A real SMTP server process (aiosmtpd, from PyPI into `.local/venv` by `scripts/test`) that
/// keeps every message it accepts in a maildir: what the tests read back, never a mock.
public final class SMTPServer: @unchecked Sendable {
    let process = Process()
    public let port: Int
    let maildir: URL
    /// Made here, not handed in: removed when this server goes.
    let ownsMaildir: Bool

    /// The executable `scripts/test` installs.
    public static let executable = root.appendingPathComponent(".local/venv/bin/aiosmtpd")

    /// Starts one on `port` (a free one by default: a server restarted on the same port is
    /// how a test takes SMTP down and back) and waits until it accepts connections.
    public init(port: Int? = nil, maildir: URL? = nil) async throws {
        self.port = try port ?? ServerProcess.freePort()
        self.maildir = maildir ?? FileManager.default.temporaryDirectory.appendingPathComponent("lender-smtp-\(UUID().uuidString)")
        self.ownsMaildir = maildir == nil
        process.executableURL = Self.executable
        process.arguments = ["-n", "-l", "127.0.0.1:\(self.port)", "-c", "aiosmtpd.handlers.Mailbox", self.maildir.path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<100 {
            if Self.accepts(self.port) { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        process.terminate()
        throw SMTPServerError.notReady
    }

    enum SMTPServerError: Error { case notReady }

    public var url: String { "smtp://127.0.0.1:\(port)" }

    /// Stops it (the messages stay readable), and waits until its port is closed.
    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        // Not `waitUntilExit`, which spins here: the port closed, or two seconds.
        for _ in 0..<200 where Self.accepts(port) { usleep(10_000) }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        // Its own mailbox goes with it (a suite's runs left hundreds in /tmp); one handed in
        // is the test's, which may read it after this server is gone.
        if ownsMaildir { try? FileManager.default.removeItem(at: maildir) }
    }

    /// Every message received so far, oldest first, as raw RFC 5322 text.
    public func messages() -> [String] {
        let files = ["new", "cur"].flatMap { folder -> [URL] in
            let directory = maildir.appendingPathComponent(folder)
            return (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: [.contentModificationDateKey])) ?? []
        }
        let dated = files.map { file in
            (file, (try? file.resourceValues(forKeys: [.contentModificationDateKey]).contentModificationDate) ?? .distantPast)
        }
        return dated.sorted { $0.1 < $1.1 }.compactMap { try? String(contentsOf: $0.0, encoding: .utf8) }
    }

    /// Waits for at least `count` messages; those received by then.
    public func waitForMessages(_ count: Int, timeout: Duration = .seconds(20)) async throws -> [String] {
        let clock = ContinuousClock()
        let started = clock.now
        while clock.now - started < timeout {
            let received = messages()
            if received.count >= count { return received }
            try await Task.sleep(for: .milliseconds(100))
        }
        return messages()
    }

    static func accepts(_ port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

extension String {
    /// A message's header, unfolded; nil when it has none of that name.
    public func mailHeader(_ name: String) -> String? {
        let head = components(separatedBy: "\n\n").first ?? self
        for line in head.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n") {
            if line.lowercased().hasPrefix(name.lowercased() + ":") {
                return String(line.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    /// The plain-text part of a message this server writes (base64), decoded: the body of
    /// a one-part message, or its `text/plain` part.
    public var mailText: String { mailPart("text/plain") }

    /// The `text/html` part, decoded ("" without one).
    public var mailHTML: String { mailPart("text/html") }

    func mailPart(_ type: String) -> String {
        let normalised = replacingOccurrences(of: "\r\n", with: "\n")
        let start: String.Index
        if normalised.contains("multipart/alternative") {
            guard let part = normalised.range(of: "Content-Type: \(type); charset=utf-8\nContent-Transfer-Encoding: base64\n\n")
            else { return "" }
            start = part.upperBound
        } else {
            guard type == "text/plain", let blank = normalised.range(of: "\n\n") else { return "" }
            start = blank.upperBound
        }
        let lines = normalised[start...].split(separator: "\n", omittingEmptySubsequences: false).prefix {
            !$0.isEmpty && !$0.hasPrefix("--")
        }
        return Data(base64Encoded: lines.joined()).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }
}
