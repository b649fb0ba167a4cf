import Foundation
import HTTPTypes
import Hummingbird
import Logging
import UUIDs

extension HTTPField.Name {
    static let requestID = HTTPField.Name("X-Request-ID")!
}

/// One log line per request: method, route (the pattern, never the query, so no secret in
/// it), status, duration and a request id. The id is the client's `X-Request-ID` when it is
/// a sensible one, else a new one; it is on every line logged for the request and in the
/// response, errors included.
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let started = ContinuousClock.now
        let id = Self.requestID(request.headers[.requestID])
        var context = context
        context.logger[metadataKey: "request_id"] = "\(id)"
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        }
        response.headers[.requestID] = id
        let duration = ContinuousClock.now - started
        context.logger.info(
            "request",
            metadata: [
                "method": "\(request.method.rawValue)", "route": "\(context.endpointPath ?? "unmatched")",
                "status": "\(response.status.code)",
                "duration_ms": "\(String(format: "%.2f", duration / .milliseconds(1)))",
            ])
        return response
    }

    /// The client's id if it is 1 to 128 visible ASCII characters; else a fresh UUID.
    static func requestID(_ given: String?) -> String {
        if let given, (1...128).contains(given.count), given.allSatisfy({ $0.isASCII && !$0.isWhitespace && !$0.isNewline }) {
            return given
        }
        return UUID.random().lowercaseText
    }
}
