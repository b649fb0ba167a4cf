import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Marketplace
import NIOCore
import Postgres
import Synchronization

extension HTTPField.Name {
    static let idempotencyKey = HTTPField.Name("Idempotency-Key")!
    static let idempotentReplayed = HTTPField.Name("Idempotent-Replayed")!
}

/// `Idempotency-Key` on POST, PATCH and DELETE, per user: the same key with the same request
/// gets the first response again and runs nothing; with another request, a 422.
///
/// The first request claims the key with a row, runs, and stores its exact response, problems
/// included. Concurrent repeats wait for that response and give it. A claim whose request
/// ended in a 5xx or never finished (a crash) is released, so the request can run again.
struct IdempotencyMiddleware<Context: AuthenticatedRequestContext>: RouterMiddleware {
    let pool: PostgresPool
    /// Keys the request digest: a body may hold a card's number and CVV, and a plain hash of
    /// so few possible values could be reversed by trying them all.
    let digestKey: SymmetricKey
    /// How long a repeat waits for the first request's response.
    var wait: Duration = .seconds(10)
    /// After how long an unanswered claim is taken to be abandoned.
    var abandonedAfterSeconds = 60

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard [.post, .patch, .delete].contains(request.method), let key = request.headers[.idempotencyKey],
            let user = context.identity
        else { return try await next(request, context) }
        guard (1...200).contains(key.count), key.allSatisfy({ $0.isASCII && !$0.isWhitespace && !$0.isNewline }) else {
            throw Problem(.badRequest, code: "invalid_idempotency_key", detail: "An Idempotency-Key is 1 to 200 visible ASCII characters.")
        }
        var request = request
        let body = try await request.collectBodyWithinLimit(context: context)
        // Bounded before it is parsed to be made canonical.
        try JSONShape.check(body.readableBytesView)
        var digest = HMAC<SHA256>(key: digestKey)
        digest.update(data: Data("\(request.method.rawValue) \(request.uri.path)\n".utf8))
        digest.update(data: Self.canonical(Data(body.readableBytesView)))
        let requestHash = Data(digest.finalize()).hexString

        if try await claim(user, key, requestHash) {
            return try await answerFirst(request, context, user, key, next)
        }
        LenderMetrics.idempotentReplays.increment()
        return try await replay(user, key, requestHash)
    }

    /// The same JSON value gives the same bytes whatever the key order or spacing it was sent
    /// with; a body that is not JSON is taken as it is.
    static func canonical(_ body: Data) -> Data {
        guard let value = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]),
            let canonical = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed])
        else { return body }
        return canonical
    }

    /// True when this request now holds the key: new, or taken over from an abandoned claim.
    private func claim(_ user: UserID, _ key: String, _ requestHash: String) async throws -> Bool {
        let inserted = try await pool.query(
            """
            INSERT INTO http_idempotency (user_id, key, request_hash) VALUES (\(user.rawValue), \(key), \(requestHash))
            ON CONFLICT (user_id, key) DO NOTHING
            """)
        if inserted.affectedRows == 1 { return true }
        let taken = try await pool.query(
            """
            UPDATE http_idempotency SET created_at = now()
            WHERE user_id = \(user.rawValue) AND key = \(key) AND request_hash = \(requestHash) AND status IS NULL
              AND created_at < now() - make_interval(secs => \(abandonedAfterSeconds))
            """)
        return taken.affectedRows == 1
    }

    private func answerFirst(
        _ request: Request, _ context: Context, _ user: UserID, _ key: String,
        _ next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as DomainError {
            response = try Problem(error).response(from: request, context: context)
        } catch let error as any HTTPResponseError where error.status.code < 500 {
            response = try error.response(from: request, context: context)
        } catch {
            _ = try? await pool.query("DELETE FROM http_idempotency WHERE user_id = \(user.rawValue) AND key = \(key)")
            throw error
        }
        guard response.status.code < 500 else {
            _ = try? await pool.query("DELETE FROM http_idempotency WHERE user_id = \(user.rawValue) AND key = \(key)")
            return response
        }
        let collector = BodyCollector()
        try await response.body.write(collector.writer)
        let bytes = collector.bytes
        try await pool.query(
            """
            UPDATE http_idempotency
            SET status = \(Int(response.status.code)), content_type = \(response.headers[.contentType]),
                body = \(Data(bytes.readableBytesView)), completed_at = now()
            WHERE user_id = \(user.rawValue) AND key = \(key)
            """)
        response.body = ResponseBody(byteBuffer: bytes)
        return response
    }

    private func replay(_ user: UserID, _ key: String, _ requestHash: String) async throws -> Response {
        let clock = ContinuousClock()
        let deadline = clock.now + wait
        while true {
            let rows = try await pool.query(
                """
                SELECT request_hash, status, content_type, body FROM http_idempotency
                WHERE user_id = \(user.rawValue) AND key = \(key)
                """)
            if let row = rows.first {
                guard try row.decode("request_hash", as: String.self) == requestHash else {
                    throw Problem(
                        .unprocessableContent, code: "idempotency_key_reused",
                        detail: "This Idempotency-Key was used for another request.")
                }
                if let status = try row.decode("status", as: Int?.self) {
                    var headers: HTTPFields = [.idempotentReplayed: "true"]
                    if let type = try row.decode("content_type", as: String?.self) { headers[.contentType] = type }
                    let body = try row.decode("body", as: Data?.self) ?? Data()
                    return Response(
                        status: HTTPResponse.Status(code: status), headers: headers,
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
                }
            }
            guard clock.now < deadline else {
                throw Problem(
                    .conflict, code: "idempotency_key_in_progress",
                    detail: "A request with this Idempotency-Key is still being answered; try again.")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// Collects a response body as it is written.
final class BodyCollector: Sendable {
    private let buffer = Mutex(ByteBuffer())

    var bytes: ByteBuffer { buffer.withLock { $0 } }
    var writer: Writer { Writer(collector: self) }

    struct Writer: ResponseBodyWriter {
        let collector: BodyCollector

        mutating func write(_ part: ByteBuffer) async throws {
            var part = part
            _ = collector.buffer.withLock { $0.writeBuffer(&part) }
        }

        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}
