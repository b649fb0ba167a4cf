import Foundation
import Hummingbird
import NIOCore

/// `GET /openapi.json`: the OpenAPI 3.1 document in `Resources/openapi.json`, as it is in the
/// repository. `OpenAPITests` holds it to the routes the router really has.
enum OpenAPIDocument {
    static let data: Data? = Bundle.module.url(forResource: "openapi", withExtension: "json").flatMap {
        try? Data(contentsOf: $0)
    }

    static func addRoute<Context: RequestContext>(to router: Router<Context>) {
        router.get("/openapi.json") { _, _ -> Response in
            guard let data else {
                throw Problem(.internalServerError, code: "internal_error", detail: "The OpenAPI document is missing from this build.")
            }
            return Response(
                status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
        }
    }
}
