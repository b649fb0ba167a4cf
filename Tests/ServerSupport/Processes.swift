import Foundation
import HTTPTypes
import Marketplace
import Postgres
import Testing
import UseCases

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The repository's root: `.build/debug/lender`, `.local/venv`, `scripts/db`.
public let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// Runs the built `lender` executable against `database` and returns what it printed.
/// Standard error goes to `standardError` when given, else where the tests' own goes.
public func runLender(
    _ arguments: [String], database: PostgresConfiguration?, expectedStatus: Int32 = 0, environment: [String: String] = [:],
    directory: String? = nil, standardError: FileHandle? = nil
) throws -> String {
    let process = Process()
    process.executableURL = root.appendingPathComponent(".build/debug/lender")
    process.arguments = arguments + (database.map { ["--database-url", $0.connectionString] } ?? [])
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    process.environment = [
        "LOG_LEVEL": "error", "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "", "DATA_KEY_FILE": testMasterKeyFile,
        // The suite makes many databases at once on two cores: a slow connection is not what is tested.
        "PGCONNECT_TIMEOUT": "30",
    ].merging(environment) { $1 }
    let output = Pipe()
    process.standardOutput = output
    if let standardError { process.standardError = standardError }
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == expectedStatus)
    return String(decoding: data, as: UTF8.self)
}

/// Runs `lender` expecting it to fail, and returns what it printed on standard error: the
/// message an operator reads. Through a file, which a pipe read after standard output is
/// not: a long one would fill the pipe and stall the process.
public func runLenderFailing(
    _ arguments: [String], database: PostgresConfiguration?, expectedStatus: Int32 = 1, environment: [String: String] = [:]
) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("lender-stderr-\(UUID().uuidString)").path
    FileManager.default.createFile(atPath: path, contents: nil)
    defer { try? FileManager.default.removeItem(atPath: path) }
    let errors = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    _ = try runLender(arguments, database: database, expectedStatus: expectedStatus, environment: environment, standardError: errors)
    try errors.close()
    return String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
}

/// `runLender` on a thread of its own, not one of the few the concurrency pool has: for a run
/// that may wait on the test itself (a lock the test holds), which must not stall its tasks.
public func runLenderAside(
    _ arguments: [String], database: PostgresConfiguration?, expectedStatus: Int32 = 0, environment: [String: String] = [:],
    directory: String? = nil
) async throws -> String {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(
                with: Result {
                    try runLender(
                        arguments, database: database, expectedStatus: expectedStatus, environment: environment,
                        directory: directory)
                })
        }
    }
}

/// Every request reaches the server: `URLSession.shared` keeps GET answers in a disk cache,
/// and looks through all it kept before each request, slower with every one (a follower
/// paging `/v1/events` for seconds crawled to a halt).
private let uncachedSession: URLSession = {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    return URLSession(configuration: configuration)
}()

/// A real `lender serve` process on a port of its own, against a test database: what the
/// crash, shutdown and several-servers tests need, since they kill and signal it.
public final class ServerProcess: @unchecked Sendable {
    let process = Process()
    public let port: Int
    /// What the server writes, in a file: a pipe nobody reads fills up (64 KiB) under errors
    /// logged during an outage, and the server then blocks on its next log line.
    let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("lender-serve-\(UUID().uuidString).log").path

    /// Starts the server as the owner of `database` (it runs its pool as lender_app) and waits
    /// until it is ready.
    public init(database: PostgresConfiguration, environment: [String: String] = [:]) async throws {
        port = try Self.freePort()
        process.executableURL = root.appendingPathComponent(".build/debug/lender")
        process.arguments = ["serve", "--database-url", database.connectionString]
        process.environment = [
            "PORT": "\(port)", "LOG_LEVEL": "error", "BCRYPT_COST": "4", "DATABASE_POOL_SIZE": "4",
            "WRITE_LIMIT_POSTINGS_PER_HOUR": "0", "WRITE_LIMIT_BIDS_PER_HOUR": "0", "WRITE_LIMIT_CHANGES_PER_HOUR": "0",
            "WRITE_LIMIT_PHOTOS_PER_HOUR": "0", "WRITE_LIMIT_REGISTRATIONS_PER_HOUR": "0",
            "CARD_FINGERPRINT_SECRET": String(decoding: testCardSecret, as: UTF8.self), "DATA_KEY_FILE": testMasterKeyFile,
            "PGCONNECT_TIMEOUT": "30",
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "",
        ].merging(environment) { $1 }
        FileManager.default.createFile(atPath: outputPath, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardOutput = output
        process.standardError = output
        try process.run()
        try output.close()
        let clock = ContinuousClock()
        let started = clock.now
        while clock.now - started < .seconds(30) {
            if let ready = try? await send(.get, "/health/ready"), ready.status == .ok { return }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        process.terminate()
        throw ServerProcessError.notReady(self.output)
    }

    enum ServerProcessError: Error { case notReady(String) }

    /// A port nobody listens on now: the kernel's pick for a socket bound to port 0.
    public static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(socket, pointer, length) == 0 && getsockname(socket, pointer, &length) == 0
            }
        }
        try #require(bound)
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Sends a request, JSON and an `Idempotency-Key` if given; the whole answer. Throws when the
    /// server cannot be reached.
    public func send(
        _ method: HTTPRequest.Method, _ path: String, json: [String: Any]? = nil, token: String? = nil,
        idempotencyKey: String? = nil, headers: [String: String] = [:]
    ) async throws -> Reply {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpMethod = method.rawValue
        request.timeoutInterval = 30
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let idempotencyKey { request.setValue(idempotencyKey, forHTTPHeaderField: "Idempotency-Key") }
        if let json {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try jsonBody(json)
        }
        let (data, response) = try await uncachedSession.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        var headers = HTTPFields()
        for (name, value) in http.allHeaderFields {
            guard let name = (name as? String).flatMap({ HTTPField.Name($0) }), let value = value as? String else { continue }
            headers[name] = value
        }
        return Reply(status: HTTPResponse.Status(code: http.statusCode), headers: headers, data: data)
    }

    /// A registered, logged-in user: id and token.
    public func user(_ handle: String) async throws -> (id: UserID, token: String) {
        let registered = try await send(
            .post, "/v1/users",
            body: API.RegisterBody(handle: handle, displayName: handle, email: "\(handle)@example.org", password: "correct horse battery"))
        #expect(registered.status == .created, "\(registered)")
        let session = try await send(.post, "/v1/sessions", body: API.LoginBody(handle: handle, password: "correct horse battery"))
        return (try registered.decode(RegisteredUser.self).id, try session.decode(Session.self).token)
    }

    public func kill(_ signal: Int32) { Glibc.kill(process.processIdentifier, signal) }

    /// The server's resident memory now, in bytes (Linux's VmRSS).
    public var residentBytes: Int {
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    /// Waits for the process to end; its exit status, or nil if it is still running after `timeout`.
    public func waitForExit(timeout: Duration = .seconds(20)) async -> Int32? {
        let clock = ContinuousClock()
        let started = clock.now
        while process.isRunning {
            if clock.now - started > timeout { return nil }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return process.terminationStatus
    }

    /// Everything the server has written so far.
    public var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    deinit {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(atPath: outputPath)
    }
}
