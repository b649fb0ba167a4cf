import Foundation
import Hummingbird
import NIOCore

/// `GET /openapi.json`: the OpenAPI 3.1 document in `Resources/openapi.json`, as it is in the
/// repository. `OpenAPITests` holds it to the routes the router really has.
enum OpenAPIDocument {
    static let data: Data? = Bundle.module.url(forResource: "openapi", withExtension: "json").flatMap {
        try? Data(contentsOf: $0)
    }

    @Sendable static func serve(_ request: Request, context: some RequestContext) async throws -> Response {
        guard let data else {
            throw Problem(.internalServerError, code: "internal_error", detail: "The OpenAPI document is missing from this build.")
        }
        return Response(
            status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// The routes as the OpenAPI document lists them (`OpenAPITests` holds it to the router):
/// which methods a path takes, for 405 answers and CORS preflights.
enum RouteTable {
    private static let templates: [(segments: [String?], methods: [String])] = {
        guard let data = OpenAPIDocument.data,
            let document = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let paths = document["paths"] as? [String: [String: Any]]
        else { return [] }
        return paths.map { path, operations in
            let segments = path.split(separator: "/").map { $0.hasPrefix("{") ? nil : String($0) }
            let methods = ["get", "post", "put", "patch", "delete"].filter { operations[$0] != nil }.map { $0.uppercased() }
            return (segments, methods)
        }
    }()

    static func methods(for path: String) -> [String] {
        let segments = path.split(separator: "/")
        var methods = Set<String>()
        for template in templates where template.segments.count == segments.count {
            if zip(template.segments, segments).allSatisfy({ $0 == nil || $0 == String($1) }) {
                methods.formUnion(template.methods)
            }
        }
        return ["GET", "POST", "PUT", "PATCH", "DELETE"].filter(methods.contains)
    }
}
