import Foundation
import HTTPTypes
import Hummingbird
import JSONStream

/// The responses' JSON encoder (`JSONStream`, in the answers' style): members in declaration
/// order, absent optionals as `null`, dates as `.iso8601`, the lists' resources writing
/// themselves (`JSONWritable`). Every JSON the server answers is written here: the answers,
/// the problems (`Problem.bodyJSON`) and the server-sent events' `data:` lines.
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

    /// One server-sent event: `value` on its `data:` line as the same resource's answer writes
    /// it (one line: the encoder writes no line breaks, a string's are escaped), and `id` the
    /// position a reconnection resumes after (`Last-Event-ID`).
    static func serverSentEvent(id: Int64, event: String, _ value: some Encodable) throws -> ByteBuffer {
        var buffer = ByteBuffer(string: "id: \(id)\nevent: \(event)\ndata: ")
        buffer.writeBytes(try encode(value))
        buffer.writeString("\n\n")
        return buffer
    }
}
