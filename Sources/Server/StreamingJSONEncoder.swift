import Foundation
import HTTPTypes
import Hummingbird
import JSONStream

/// The responses' JSON encoder (`JSONStream`, in the answers' style): absent optionals as
/// `null`, dates as `.iso8601`, the lists' resources writing themselves (`JSONWritable`).
public struct StreamingJSONEncoder: ResponseEncoder {
    public init() {}

    public func encode(_ value: some Encodable, from request: Request, context: some RequestContext) throws -> Response {
        let bytes = try Self.encode(value)
        var headers = HTTPFields()
        headers.reserveCapacity(4)
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.contentLength] = String(bytes.count)
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The lists of items, loans and bids, and those resources anywhere, write themselves (`JSONWritable`).
    public static func encode(_ value: some Encodable) throws -> [UInt8] {
        try JSONStream.encode(value, style: .responses)
    }

    /// Every value through `Encodable`, none writing itself: what a `JSONWritable` must match.
    static func encodeThroughCodable(_ value: some Encodable) throws -> [UInt8] {
        try JSONStream.encode(value, style: .responsesThroughCodable)
    }
}
