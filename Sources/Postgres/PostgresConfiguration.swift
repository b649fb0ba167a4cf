import Foundation
import CLibPQ

/// Where and how to connect: a libpq connection string, as a URL
/// (`postgresql://user:pass@host:port/db?sslmode=disable`, `postgresql:///db?host=/socket/dir`)
/// or as `key=value` pairs.
public struct PostgresConfiguration: Sendable, Hashable {
    public var connectionString: String
    /// Seconds before giving up on connecting, unless the connection string says otherwise.
    public var connectTimeoutSeconds: Int
    public var applicationName: String
    /// A role to `SET ROLE` to on every connection: the server runs as one with fewer
    /// rights than the owner that migrates (no UPDATE or DELETE on the log).
    public var role: String?
    /// libpq's `target_session_attrs` unless the connection string says otherwise. With
    /// several hosts (`host=a,b`, `postgresql://a,b/db`) it is `read-write`, so that a
    /// connection goes to whichever host is the primary now and follows a promotion by itself;
    /// a pool of reads sets it to nil (any host).
    public var targetSessionAttributes: String?
    /// Parsed settings (host, port, dbname, user, ...), for messages and for `database(_:)`.
    public let settings: [String: String]

    /// `connectTimeoutSeconds`: when not given, libpq's own `PGCONNECT_TIMEOUT` from the
    /// environment, else 5 (a `connect_timeout` in the connection string wins over both).
    public init(
        _ connectionString: String, connectTimeoutSeconds: Int? = nil, applicationName: String = "lender", role: String? = nil
    ) throws {
        self.connectionString = connectionString
        self.role = role
        self.connectTimeoutSeconds =
            connectTimeoutSeconds ?? ProcessInfo.processInfo.environment["PGCONNECT_TIMEOUT"].flatMap { Int($0) }.map { max(2, $0) } ?? 5
        self.applicationName = applicationName
        self.settings = try Self.parse(connectionString)
        self.targetSessionAttributes = nil
        if hasSeveralHosts { targetSessionAttributes = "read-write" }
    }

    /// Whether the string names several hosts (`host=a,b`, `postgresql://a,b/db`).
    public var hasSeveralHosts: Bool { (settings["host"] ?? settings["hostaddr"] ?? "").contains(",") }

    public var host: String { settings["hostaddr"] ?? settings["host"] ?? "localhost" }
    public var port: String { settings["port"] ?? "5432" }
    public var database: String { settings["dbname"] ?? settings["user"] ?? "postgres" }
    public var user: String? { settings["user"] }

    /// A short, password-free description: `host 127.0.0.1 port 5432 database lender`.
    public var target: String { "host \(host) port \(port) database \(database)" }

    /// The same server and credentials, another database.
    public func database(_ name: String) -> PostgresConfiguration {
        var settings = self.settings
        settings["dbname"] = name
        let rendered = settings.sorted { $0.key < $1.key }.map { key, value in
            let escaped = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'")
            return "\(key)='\(escaped)'"
        }.joined(separator: " ")
        // Parsing what we rendered from parsed settings cannot fail.
        var configuration = try! PostgresConfiguration(
            rendered, connectTimeoutSeconds: connectTimeoutSeconds, applicationName: applicationName, role: role)
        configuration.targetSessionAttributes = targetSessionAttributes
        return configuration
    }

    static func parse(_ connectionString: String) throws -> [String: String] {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &errorMessage) else {
            let message = errorMessage.map { String(cString: $0) } ?? "out of memory"
            if let errorMessage { PQfreemem(errorMessage) }
            throw PostgresError(
                .connection, message: "invalid database URL: \(message.trimmingWhitespace())")
        }
        defer { PQconninfoFree(options) }
        var settings = [String: String]()
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val {
                settings[String(cString: keyword)] = String(cString: value)
            }
            option += 1
        }
        return settings
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var text = Substring(self)
        while let last = text.last, last.isWhitespace { text.removeLast() }
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        return String(text)
    }
}
