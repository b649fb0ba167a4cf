import HTTPTypes
import Hummingbird

/// Cross-origin requests from the origins in `ALLOWED_ORIGINS` (browser clients): their
/// preflights are answered here, and their responses say which origin may read them. Other
/// origins get no CORS headers, so browsers keep their pages from reading the answers.
struct CORSMiddleware<Context: RequestContext>: RouterMiddleware {
    let allowedOrigins: Set<String>

    static var exposed: String { "Retry-After, Idempotent-Replayed, X-Request-ID, Location, ETag" }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = request.headers[.origin], allowedOrigins.contains(origin) || allowedOrigins.contains("*") else {
            return try await next(request, context)
        }
        let methods = RouteTable.methods(for: request.uri.path)
        // A preflight for a path with routes; one for no route goes on to its 404.
        if request.method == .options, request.headers[.accessControlRequestMethod] != nil, !methods.isEmpty {
            return Response(
                status: .noContent,
                headers: [
                    .accessControlAllowOrigin: origin, .vary: "Origin",
                    .accessControlAllowMethods: methods.joined(separator: ", "),
                    .accessControlAllowHeaders: "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, If-None-Match, X-Min-Position",
                    .accessControlMaxAge: "600",
                ])
        }
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            // Errors too must be readable by the page, or it cannot show what went wrong.
            response = try error.response(from: request, context: context)
        }
        response.headers[.accessControlAllowOrigin] = origin
        response.headers[.vary] = "Origin"
        response.headers[.accessControlExposeHeaders] = Self.exposed
        return response
    }
}
