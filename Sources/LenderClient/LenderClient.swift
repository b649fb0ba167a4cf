import Foundation
import HTTPTypes
import OpenAPIRuntime
import OpenAPIURLSession

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// What the generator leaves to the app: the bearer token, idempotent retries, dates the
// server writes as calendar days, and the two answers of adding a card.

extension Client {
    /// A client of the Lender server at `serverURL` (`http://127.0.0.1:8080` from `scripts/serve`),
    /// over URLSession, signed in with `token` when there is one. Unsafe requests carry an
    /// `Idempotency-Key` and are retried with it (`IdempotentRetries`), so a retried payment
    /// moves money once.
    public static func lender(
        at serverURL: URL, token: String? = nil, session: URLSession = .shared, retries: IdempotentRetries = .init()
    ) -> Client {
        var middlewares: [any ClientMiddleware] = [retries]
        if let token { middlewares.append(BearerToken(token)) }
        return Client(
            serverURL: serverURL, configuration: Configuration(dateTranscoder: ServerDates()),
            transport: URLSessionTransport(configuration: .init(session: session)), middlewares: middlewares)
    }
}

/// Signs every request with the token `logIn` answered.
public struct BearerToken: ClientMiddleware {
    public let token: String

    public init(_ token: String) { self.token = token }

    public func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.authorization] = "Bearer \(token)"
        return try await next(request, body, baseURL)
    }
}

/// The one `Idempotency-Key` helper: every command the server keeps answers for (each
/// operation with an `Idempotency-Key` parameter) gets a fresh key when it has none, and is
/// sent again with the same key when the connection fails on the way or the server answers
/// 503 (`database_unavailable`, `Retry-After`). The server answers a repeated key with the
/// first answer, so a command is carried out once however often it is sent. Registering,
/// logging in and uploading a photo have no key but are sent again after a 503, which the
/// server answers before doing anything (`refusedFirst`); after a lost connection they are
/// not, nor is any other unkeyed command, nor a request whose body cannot be sent twice (a
/// stream).
public struct IdempotentRetries: ClientMiddleware {
    /// Sends after the first; 0 turns retrying off but keeps the keys.
    public var attempts: Int
    /// The longest wait between two sends, whatever `Retry-After` says.
    public var maximumDelay: Duration

    public init(attempts: Int = 3, maximumDelay: Duration = .seconds(5)) {
        self.attempts = attempts
        self.maximumDelay = maximumDelay
    }

    public static let keyField = HTTPField.Name("Idempotency-Key")!

    /// The commands without an `Idempotency-Key` parameter: a second send of one is a second
    /// command (a second account attempt, a second session; a closed account answers 401), or
    /// needs no key (a photo is named by its bytes: the same image again is added once).
    /// `LenderClientTests` holds this list to the document.
    public static let unkeyedOperations: Set<String> = [
        "registerUser", "logIn", "logOut", "closeAccount", "addItemPhoto", "removeItemPhoto", "addLoanPhoto",
        "removeLoanPhoto", "setProfilePhoto", "removeProfilePhoto", "requestPasswordReset", "confirmPasswordReset",
        "changePassword", "requestEmailVerification", "confirmEmailVerification", "unsubscribe",
        // Webhooks are the server's settings, not events: no key makes a registration once.
        "registerWebhook", "deleteWebhook", "moveWebhook",
    ]

    /// Unkeyed commands that a 503 leaves undone, so another send is not a second one: the
    /// server refuses registering and logging in with `busy` before a password is hashed or
    /// checked, and any command while the database is away before anything is written; a
    /// photo is named by its bytes, so one stored meanwhile is the same photo, added once.
    /// After a lost connection they are sent once: a registration may have been made.
    public static let refusedFirst: Set<String> = ["registerUser", "logIn", "addItemPhoto", "addLoanPhoto", "setProfilePhoto"]

    public func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let keyed = [.post, .put, .patch, .delete].contains(request.method) && !Self.unkeyedOperations.contains(operationID)
        guard keyed || Self.refusedFirst.contains(operationID) else {
            return try await next(request, body, baseURL)
        }
        var request = request
        if keyed, request.headerFields[Self.keyField] == nil { request.headerFields[Self.keyField] = UUID().uuidString }
        let repeatable = body.map { $0.iterationBehavior == .multiple } ?? true
        var sent = 0
        while true {
            sent += 1
            let last = !repeatable || sent > attempts
            do {
                let (response, responseBody) = try await next(request, body, baseURL)
                guard response.status == .serviceUnavailable, !last else { return (response, responseBody) }
                try await Task.sleep(for: delay(response.headerFields[.retryAfter], sent: sent))
            } catch {
                guard keyed, !last, !Task.isCancelled, Self.isTransient(error) else { throw error }
                try await Task.sleep(for: delay(nil, sent: sent))
            }
        }
    }

    /// A failure that another send may not meet: the connection, not the request. The
    /// runtime hands the transport's errors on wrapped in `ClientError`.
    static func isTransient(_ error: any Error) -> Bool {
        let cause = (error as? ClientError)?.underlyingError ?? error
        guard let failure = cause as? URLError else { return false }
        let transient: Set<URLError.Code> = [
            .networkConnectionLost, .timedOut, .cannotConnectToHost, .notConnectedToInternet, .cannotFindHost,
            .dnsLookupFailed,
        ]
        return transient.contains(failure.code)
    }

    /// `Retry-After` in seconds when given, else 0.2 s doubled per send; never over `maximumDelay`.
    func delay(_ retryAfter: String?, sent: Int) -> Duration {
        let asked = retryAfter.flatMap(Int.init).map { Duration.seconds($0) } ?? .milliseconds(200 << min(sent - 1, 10))
        return min(asked, maximumDelay)
    }
}

/// The server's timestamps: RFC 3339 in UTC, whole seconds; fractional ones are read as well.
public struct ServerDates: DateTranscoder {
    public init() {}

    public func encode(_ date: Date) throws -> String { try ISO8601DateTranscoder.iso8601.encode(date) }

    public func decode(_ text: String) throws -> Date {
        if let date = try? ISO8601DateTranscoder.iso8601.decode(text) { return date }
        return try ISO8601DateTranscoder.iso8601WithFractionalSeconds.decode(text)
    }
}

/// A calendar day (`Components.Schemas.Day`, `YYYY-MM-DD`): availability, bid dates and loan
/// deadlines are days, not instants, and the generator leaves them strings. A `Date` is an
/// instant, so which day it falls on depends on where: the user's time zone by default, the
/// one a date picker shows.
public enum CalendarDay {
    private static func calendar(_ timeZone: TimeZone) -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        return calendar
    }

    /// The day `date` falls on in `timeZone`.
    public static func string(from date: Date, in timeZone: TimeZone = .current) -> String {
        let day = calendar(timeZone).dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", day.year!, day.month!, day.day!)
    }

    /// The day `days` after today in `timeZone` (before it when negative).
    public static func fromToday(_ days: Int, in timeZone: TimeZone = .current) -> String {
        let calendar = calendar(timeZone)
        return string(from: calendar.date(byAdding: .day, value: days, to: Date())!, in: timeZone)
    }

    /// The start of `day` in `timeZone`, or nil when it is not a `YYYY-MM-DD` day that exists.
    public static func date(from day: String, in timeZone: TimeZone = .current) -> Date? {
        guard day.utf8.count == 10, day.wholeMatch(of: /[0-9]{4}-[0-9]{2}-[0-9]{2}/) != nil else { return nil }
        let parts = day.split(separator: "-").compactMap { Int($0) }
        let components = DateComponents(year: parts[0], month: parts[1], day: parts[2])
        let calendar = calendar(timeZone)
        guard components.isValidDate(in: calendar) else { return nil }
        return calendar.date(from: components)
    }
}

/// An answer the caller did not expect: its status, and the problem the server described.
public struct UnexpectedAnswer: Error, CustomStringConvertible {
    public let description: String
}

extension Operations.AddPaymentCard.Output {
    /// The card on file: added now (201), or already there with its expiry updated (200).
    public var card: Components.Schemas.Card {
        get throws {
            switch self {
            case .created(let created): return try created.body.json
            case .ok(let ok): return try ok.body.json
            default: throw UnexpectedAnswer(description: "adding a card: \(self)")
            }
        }
    }
}
