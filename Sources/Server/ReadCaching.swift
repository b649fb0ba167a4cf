import Crypto
import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// What HTTP says of reads, for every `GET` route at once (RFC 9110, 9111):
/// - `HEAD` is the `GET` without its body (§9.3.2), errors included: the router answers it
///   on every `GET` route (`autoGenerateHeadEndpoints`), and this passes it on as the `GET`;
/// - a JSON answer carries `Cache-Control`: `private, no-store` when it is the user's own
///   (their profile, money, bookings, messages, the audit log), else `private, no-cache`
///   (kept, but asked again each time);
/// - a `200` JSON answer that may be kept carries a weak `ETag` of its bytes, and a request whose
///   `If-None-Match` names it is answered `304 Not Modified` with no body: a pull-to-refresh
///   that changes nothing moves a few hundred bytes, not the page.
/// Streams (`text/event-stream`) and media (their own headers) pass through untouched.
struct ReadCachingMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let isHead = request.method == .head
        guard isHead || request.method == .get else { return try await next(request, context) }
        var head = request.head
        head.method = .get
        var response: Response
        do {
            response = try await next(isHead ? Request(head: head, body: request.body) : request, context)
        } catch let error as any HTTPResponseError where isHead {
            response = try error.response(from: request, context: context)
        }
        guard response.headers[.contentType]?.hasPrefix("application/json") == true else {
            return isHead ? Self.bodiless(response) : response
        }
        let personal = Self.isPersonal(request.uri.path)
        if response.headers[.cacheControl] == nil {
            response.headers[.cacheControl] = personal ? "private, no-store" : "private, no-cache"
        }
        // What is never stored is never revalidated: no tag to make.
        if response.status == .ok, !personal {
            let collected = Collected()
            try await response.body.write(Collector(into: collected))
            let bytes = collected.bytes.withLock { $0 }
            let tag = Self.weakTag(of: bytes)
            response.headers[.eTag] = tag
            if let asked = request.headers[.ifNoneMatch], EntityTag.matches(asked, tag) {
                var headers = response.headers
                headers[.contentLength] = nil
                headers[.contentType] = nil
                return Response(status: .notModified, headers: headers, body: ResponseBody())
            }
            response.body = ResponseBody(byteBuffer: bytes)
        }
        return isHead ? Self.bodiless(response) : response
    }

    /// The answer's status and headers (its `Content-Length` too), and no body.
    static func bodiless(_ response: Response) -> Response {
        var headers = response.headers
        if headers[.contentLength] == nil, let length = response.body.contentLength {
            headers[.contentLength] = String(length)
        }
        return Response(status: response.status, headers: headers, body: ResponseBody())
    }

    /// Paths whose answers hold what only the signed-in user may see.
    static func isPersonal(_ path: String) -> Bool {
        path == "/v1/me" || path.hasPrefix("/v1/me/") || path == "/v1/cart" || path.hasPrefix("/v1/bookings/")
            || (path.hasPrefix("/v1/bids/") && path.hasSuffix("/messages")) || path.hasPrefix("/v1/events")
            || path.hasPrefix("/v1/audit/") || path.hasPrefix("/v1/admin/")
    }

    /// `W/"…"`: the first 16 bytes of the SHA-256 of the body, in hex. Weak, because the same
    /// resource may be written with other bytes (a position) and still be the same to a client.
    static func weakTag(of bytes: ByteBuffer) -> String {
        let digest = bytes.withUnsafeReadableBytes { SHA256.hash(data: $0) }
        let hex = Array("0123456789abcdef".utf8)
        var text = Array("W/\"".utf8)
        for byte in digest.prefix(16) { text += [hex[Int(byte >> 4)], hex[Int(byte & 15)]] }
        text.append(UInt8(ascii: "\""))
        return String(decoding: text, as: UTF8.self)
    }

    /// The body's bytes, gathered (a JSON answer is in memory already): the writer is
    /// consumed by the body, so the bytes are kept beside it.
    final class Collected: Sendable {
        let bytes = Mutex(ByteBuffer())
    }

    struct Collector: ResponseBodyWriter {
        let into: Collected
        mutating func write(_ buffer: ByteBuffer) async throws {
            into.bytes.withLock { bytes in
                // The usual single buffer is kept as it is, not copied.
                if bytes.readableBytes == 0 {
                    bytes = buffer
                } else {
                    var buffer = buffer
                    bytes.writeBuffer(&buffer)
                }
            }
        }
        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}

enum EntityTag {
    /// `If-None-Match`: `*`, or a list of tags compared weakly (RFC 9110 §13.1.2): `W/` makes
    /// no difference.
    static func matches(_ header: String, _ tag: String) -> Bool {
        let bare = { (value: Substring) in value.hasPrefix("W/") ? value.dropFirst(2) : value }
        return header.split(separator: ",").contains { candidate in
            let trimmed = candidate.trimmingCharacters(in: .whitespaces)
            return trimmed == "*" || bare(Substring(trimmed)) == bare(Substring(tag))
        }
    }
}
