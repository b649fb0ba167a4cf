import Foundation
import Postgres
import Testing
import TestSupport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A real `lender serve` process on a port of its own, against a test database: what the
/// crash, shutdown and several-servers tests need, since they kill and signal it.
final class ServerProcess: @unchecked Sendable {
    let process = Process()
    let port: Int
    let output = Pipe()

    /// Starts the server as the owner of `database` (it runs its pool as lender_app) and waits
    /// until it is ready.
    init(database: PostgresConfiguration, environment: [String: String] = [:]) async throws {
        port = try Self.freePort()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        process.executableURL = root.appendingPathComponent(".build/debug/lender")
        process.arguments = ["serve", "--database-url", database.connectionString]
        process.environment = [
            "PORT": "\(port)", "LOG_LEVEL": "error", "BCRYPT_COST": "4", "DATABASE_POOL_SIZE": "4",
            "WRITE_LIMIT_POSTINGS_PER_HOUR": "0", "WRITE_LIMIT_BIDS_PER_HOUR": "0", "WRITE_LIMIT_CHANGES_PER_HOUR": "0",
            "CARD_FINGERPRINT_SECRET": String(decoding: testCardSecret, as: UTF8.self),
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "",
        ].merging(environment) { $1 }
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let clock = ContinuousClock()
        let started = clock.now
        while clock.now - started < .seconds(30) {
            if let (status, _) = try? await request(.get, "/health/ready"), status == 200 { return }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        process.terminate()
        throw ServerProcessError.notReady(String(decoding: output.fileHandleForReading.availableData, as: UTF8.self))
    }

    enum ServerProcessError: Error { case notReady(String) }

    /// A port nobody listens on now: the kernel's pick for a socket bound to port 0.
    static func freePort() throws -> Int {
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

    /// Sends a request; the status and the JSON body. Throws when the server cannot be reached.
    func request(
        _ method: String, _ path: String, json: [String: Any]? = nil, token: String? = nil
    ) async throws -> (Int, [String: Any]) {
        let (status, body, _) = try await send(method, path, json: json, token: token)
        return (status, body)
    }

    /// Like `request`, with an `Idempotency-Key` and the response's headers.
    func send(
        _ method: String, _ path: String, json: [String: Any]? = nil, token: String? = nil, idempotencyKey: String? = nil
    ) async throws -> (status: Int, body: [String: Any], headers: [AnyHashable: Any]) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        request.timeoutInterval = 30
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let idempotencyKey { request.setValue(idempotencyKey, forHTTPHeaderField: "Idempotency-Key") }
        if let json {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONSerialization.data(withJSONObject: json)
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as? HTTPURLResponse
        return (
            http?.statusCode ?? 0, (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:],
            http?.allHeaderFields ?? [:]
        )
    }

    /// A registered, logged-in user: id and token.
    func user(_ handle: String) async throws -> (id: String, token: String) {
        let (registered, body) = try await request(
            .post, "/v1/users",
            json: ["handle": handle, "displayName": handle, "email": "\(handle)@example.org", "password": "correct horse battery"])
        #expect(registered == 201, "\(body)")
        let (_, session) = try await request(.post, "/v1/sessions", json: ["handle": handle, "password": "correct horse battery"])
        return (try #require(body["id"] as? String), try #require(session["token"] as? String))
    }

    func kill(_ signal: Int32) { Glibc.kill(process.processIdentifier, signal) }

    /// Waits for the process to end; its exit status, or nil if it is still running after `timeout`.
    func waitForExit(timeout: Duration = .seconds(20)) async -> Int32? {
        let clock = ContinuousClock()
        let started = clock.now
        while process.isRunning {
            if clock.now - started > timeout { return nil }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
    }
}

extension String {
    static let get = "GET"
    static let post = "POST"
}

/// A migrated database of its own, its owner's URL, and a superuser pool on it.
func withServerDatabase(_ body: @escaping @Sendable (PostgresConfiguration, PostgresPool) async throws -> Void) async throws {
    try await TestDatabase.withMigrated { configuration in
        let admin = try TestDatabase.adminConfiguration().database(configuration.database)
        try await TestDatabase.withPool(admin, size: 1) { adminPool in try await body(configuration, adminPool) }
    }
}
