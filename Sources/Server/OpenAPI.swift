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
/// which methods a path takes, for 405 answers and CORS preflights, and which query
/// parameters each operation reads, for refusing the others.
enum RouteTable {
    private struct Template {
        var segments: [String?]
        /// Each method's query parameters.
        var methods: [String: Set<String>]
    }

    /// The templates by their number of segments: a path is compared with those only.
    private static let templates: [Int: [Template]] = {
        guard let data = OpenAPIDocument.data,
            let document = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let paths = document["paths"] as? [String: [String: Any]]
        else { return [:] }
        let shared = (document["components"] as? [String: Any])?["parameters"] as? [String: [String: Any]] ?? [:]
        func queryNames(_ parameters: Any?) -> Set<String> {
            Set(
                (parameters as? [[String: Any]] ?? []).compactMap { parameter in
                    let resolved = (parameter["$ref"] as? String).flatMap { shared[String($0.split(separator: "/").last ?? "")] } ?? parameter
                    return resolved["in"] as? String == "query" ? resolved["name"] as? String : nil
                })
        }
        return paths.map { path, operations in
            let segments = path.split(separator: "/").map { $0.hasPrefix("{") ? nil : String($0) }
            let common = queryNames(operations["parameters"])
            var methods = [String: Set<String>]()
            for method in ["get", "post", "put", "patch", "delete"] {
                guard let operation = operations[method] as? [String: Any] else { continue }
                methods[method.uppercased()] = common.union(queryNames(operation["parameters"]))
            }
            return Template(segments: segments, methods: methods)
        }
        .reduce(into: [:]) { $0[$1.segments.count, default: []].append($1) }
    }()

    private static func matching(_ path: String) -> [Template] {
        let segments = path.utf8.split(separator: UInt8(ascii: "/"))
        return (templates[segments.count] ?? []).filter { template in
            zip(template.segments, segments).allSatisfy { literal, segment in literal.map { $0.utf8.elementsEqual(segment) } ?? true }
        }
    }

    static func methods(for path: String) -> [String] {
        let methods = Set(matching(path).flatMap(\.methods.keys))
        return ["GET", "POST", "PUT", "PATCH", "DELETE"].filter(methods.contains)
    }

    /// The query parameters an operation reads; nil for a path and method the document does
    /// not list (health, metrics, media), which this does not judge.
    static func queryParameters(for path: String, method: String) -> Set<String>? {
        // Nearly always one template: its set as it is, not a new one.
        var found: Set<String>?
        for template in matching(path) {
            guard let names = template.methods[method] else { continue }
            found = found.map { $0.union(names) } ?? names
        }
        return found
    }
}
