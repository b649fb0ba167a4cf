import EventStore
import Foundation
import Hummingbird
import Postgres
import Marketplace
import NIOCore
import UseCases

/// An error answer in RFC 9457 form (`application/problem+json`), with a stable `code`
/// that clients can rely on and, for validation, every failing field at once.
public struct Problem: HTTPResponseError, Sendable, Equatable {
    /// One invalid field: the domain's own, passed through unchanged.
    public typealias FieldError = Marketplace.FieldError

    public var status: HTTPResponse.Status
    public var code: String
    public var title: String
    public var detail: String
    public var errors: [FieldError]
    /// The periods standing in the way of a booking or a blackout (`dates_unavailable`, `dates_booked`).
    public var conflicts: [Period] = []
    public var headers: HTTPFields

    public init(
        _ status: HTTPResponse.Status, code: String, title: String? = nil, detail: String,
        errors: [FieldError] = [], headers: HTTPFields = [:]
    ) {
        self.status = status
        self.code = code
        self.title = title ?? status.reasonPhrase
        self.detail = detail
        // Every 422 lists what to fix in `errors` (a client shows them by field): one that
        // names no field is about the request as a whole, `body`.
        self.errors =
            errors.isEmpty && status == .unprocessableContent ? [FieldError(field: "body", code: code, message: detail)] : errors
        self.headers = headers
    }

    /// A rule the domain refused, with its kind's status and its code unchanged.
    public init(_ error: DomainError) {
        let status: HTTPResponse.Status =
            switch error.kind {
            case .invalid: .unprocessableContent
            case .unauthorized: .unauthorized
            case .forbidden: .forbidden
            case .notFound: .notFound
            case .conflict: .conflict
            case .paymentDeclined: HTTPResponse.Status(code: 402, reasonPhrase: "Payment Required")
            case .gone: .gone
            case .tooOften: .tooManyRequests
            }
        self.init(
            status, code: error.code, detail: error.message, errors: error.fields,
            headers: error.kind == .tooOften ? [.retryAfter: "3600"] : [:])
        conflicts = error.conflicts
    }

    /// The body's shape, as clients read it, written like every other answer
    /// (`StreamingJSONEncoder`, `JSONStream` in the answers' style): members in declaration
    /// order, `/` unescaped.
    public struct Body: Codable, Sendable, Equatable {
        public var type: String
        public var title: String
        public var status: Int
        public var detail: String
        public var code: String
        public var errors: [FieldError]?
        public var conflicts: [Period]?

        /// `errors` and `conflicts` are left out when there are none, where the answers' style
        /// writes an absent optional as `null`: a problem has always said only what applies.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(type, forKey: .type)
            try container.encode(title, forKey: .title)
            try container.encode(status, forKey: .status)
            try container.encode(detail, forKey: .detail)
            try container.encode(code, forKey: .code)
            if let errors { try container.encode(errors, forKey: .errors) }
            if let conflicts { try container.encode(conflicts, forKey: .conflicts) }
        }
    }

    /// `type` is `about:blank` (RFC 9457 §4.2.1): the problem means what its status and its
    /// stable `code` say, and no URI pretends to resolve to more.
    public var body: Body {
        Body(
            type: "about:blank", title: title, status: status.code, detail: detail, code: code,
            errors: errors.isEmpty ? nil : errors, conflicts: conflicts.isEmpty ? nil : conflicts)
    }

    /// The body's bytes, by the encoder of every other answer.
    func bodyJSON() throws -> [UInt8] { try StreamingJSONEncoder.encode(body) }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = headers
        headers[.contentType] = "application/problem+json"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: try bodyJSON())))
    }
}

/// Logs every error that is not already an HTTP answer at error level, and answers it with
/// a 500 problem instead of Hummingbird's bare one, which it would log only at debug.
struct UnexpectedErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch let error as DomainError {
            throw Problem(error)
        } catch let error as TryLater {
            throw Problem(
                error.reason == .busy ? .serviceUnavailable : .tooManyRequests, code: error.code, detail: error.detail,
                headers: [.retryAfter: "\(error.retryAfterSeconds)"])
        } catch let error as HTTPError where error.status == .notFound {
            // No route: a problem too, and 405 with `Allow` when the path has other methods.
            let allowed = RouteTable.methods(for: request.uri.path)
            let method = request.method == .head ? "GET" : request.method.rawValue
            if !allowed.isEmpty, !allowed.contains(method) {
                throw Problem(
                    .methodNotAllowed, code: "method_not_allowed",
                    detail: "\(request.method.rawValue) is not allowed here; \(allowed.joined(separator: ", ")) is.",
                    headers: [.allow: allowed.joined(separator: ", ")])
            }
            throw Problem(.notFound, code: "not_found", detail: "No such resource: \(request.uri.path).")
        } catch let error as any HTTPResponseError {
            throw error
        } catch DataKeyError.forgotten {
            // Everything sealed is sealed for the person acting: their account closed while
            // this request was on its way, and its session with it.
            throw Problem(.unauthorized, code: "unauthenticated", detail: "This account was closed.")
        } catch let error as LogBehind {
            // Never hand out a position twice: no appends until an operator has looked.
            context.logger.critical("appends refused: the log is behind", metadata: ["error": "\(error)"])
            throw Problem(
                .serviceUnavailable, code: "log_behind",
                detail: "The database lost commits this server acknowledged (a failover without synchronous commit); "
                    + "writes are refused until an operator restarts the server.")
        } catch let error as PostgresError where error.kind == .poolExhausted {
            // Every connection busy past the wait: the server is loaded, the database is fine.
            throw Problem(
                .serviceUnavailable, code: "busy", detail: "The server is busy; try again shortly.", headers: [.retryAfter: "1"])
        } catch let error as PostgresError where error.isUnavailable {
            // The database is down, unreachable or saturated: say so at once, and when to retry.
            context.logger.error("database unavailable", metadata: ["error": "\(error)"])
            throw Problem(
                .serviceUnavailable, code: "database_unavailable",
                detail: "The database is unavailable; try again shortly.", headers: [.retryAfter: "2"])
        } catch {
            context.logger.error(
                "unexpected error",
                metadata: ["error": "\(String(reflecting: error))", "path": "\(request.uri.path)"])
            throw Problem(.internalServerError, code: "internal_error", detail: "The server failed to handle the request.")
        }
    }
}
