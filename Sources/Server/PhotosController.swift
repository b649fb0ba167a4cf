import EventStore
import Foundation
import HTTPTypes
import Hummingbird
import Marketplace
import Media
import NIOCore
import Projections
import Synchronization
import UseCases

/// Photos: uploads to an item, a loan or the profile, and the images themselves.
///
/// An upload is the image as the body (its type in `Content-Type`, or
/// `application/octet-stream`), or the first file of a `multipart/form-data` form. What it is
/// comes from decoding it; a declared type that says otherwise is refused, so that a client
/// learns that it sent a PNG called `.jpg` rather than finding out later.
struct PhotosController: Sendable {
    let photos: PhotoLibrary
    let items: ItemsView
    let loans: LoansView
    let profiles: ProfilesView
    /// Images being sent to each client address.
    let streams: MediaStreams

    // MARK: Commands

    @Sendable func addToItem(_ request: Request, context: UserContext) async throws -> EditedResponse<ItemResource> {
        let item = ItemID(try context.parameters.requireUUID("itemID"))
        let (bytes, slot) = try await Self.upload(request, context: context)
        defer { withExtendedLifetime(slot) {} }
        let append = try await Self.translating { try await photos.addToItem(bytes, item: item, by: context.user) }
        return EditedResponse(status: .created, response: try await items.item(item, position: append?.lastPosition))
    }

    @Sendable func removeFromItem(_ request: Request, context: UserContext) async throws -> ItemResource {
        let item = ItemID(try context.parameters.requireUUID("itemID"))
        let append = try await photos.removeFromItem(try Self.digest(context), item: item, by: context.user)
        return try await items.item(item, position: append?.lastPosition)
    }

    @Sendable func addToLoan(_ request: Request, context: UserContext) async throws -> EditedResponse<LoanResource> {
        let loan = LoanID(try context.parameters.requireUUID("loanID"))
        let (bytes, slot) = try await Self.upload(request, context: context)
        defer { withExtendedLifetime(slot) {} }
        let append = try await Self.translating { try await photos.addToLoan(bytes, loan: loan, by: context.user) }
        return EditedResponse(status: .created, response: try await loans.loan(loan, position: append?.lastPosition))
    }

    @Sendable func removeFromLoan(_ request: Request, context: UserContext) async throws -> LoanResource {
        let loan = LoanID(try context.parameters.requireUUID("loanID"))
        let append = try await photos.removeFromLoan(try Self.digest(context), loan: loan, by: context.user)
        return try await loans.loan(loan, position: append?.lastPosition)
    }

    /// `PUT /v1/me/photo`: the profile's one photo, replacing the one there.
    @Sendable func setProfilePhoto(_ request: Request, context: UserContext) async throws -> PrivateProfile {
        let (bytes, slot) = try await Self.upload(request, context: context)
        defer { withExtendedLifetime(slot) {} }
        let handled = try await Self.translating { try await photos.setProfilePhoto(bytes, of: context.user) }
        return try await profile(context, handled)
    }

    @Sendable func removeProfilePhoto(_ request: Request, context: UserContext) async throws -> PrivateProfile {
        try await profile(context, try await photos.setProfilePhoto(nil, of: context.user))
    }

    private func profile(_ context: UserContext, _ handled: (blocked: Set<UserID>, append: AppendResult?)) async throws
        -> PrivateProfile
    {
        try await profiles.privateProfile(context.user, blocked: handled.blocked, position: handled.append?.lastPosition)
    }

    // MARK: Images

    /// `GET /v1/media/{digest}?size=200|800|full`: the same bytes while they are stored (the
    /// digest names them), so a strong ETag and 304 for a client that has them. Cached for a
    /// day, not a year as `immutable`: a removed photo (a forgotten user's face) must leave
    /// caches too, and a day is what a client or a CDN may go on showing it; it revalidates
    /// with a 304 after that, which costs one indexed lookup.
    ///
    /// Read on the media pool, a chunk at a time, at most `MediaStreams.perAddress` at once
    /// from one client address (429 beyond), each chunk written before the next is read.
    @Sendable func media(_ request: Request, context: AppRequestContext) async throws -> Response {
        guard let digest = context.parameters.get("digest"), PhotoDigest.isValid(digest) else {
            throw Problem(.notFound, code: "media_not_found", detail: "No such image.")
        }
        let size = request.uri.queryParameters["size"].map(String.init) ?? "full"
        guard ["full", "800", "200"].contains(size) else {
            throw DomainError.invalid([FieldError(field: "size", code: "invalid_size", message: "200, 800 or full")])
        }
        let tag = "\"\(digest)-\(size)\""
        let headers: HTTPFields = [
            .eTag: tag, .cacheControl: "public, max-age=86400", .contentType: "image/jpeg",
            // Bytes that are a JPEG, and only ever read as one.
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        ]
        let slot = try streams.admit(context.clientAddress ?? "unknown")
        defer { withExtendedLifetime(slot) {} }
        let matches = request.headers[.ifNoneMatch].map { EntityTag.matches($0, tag) } ?? false
        // Only while it is stored: a collected image is gone, not unchanged.
        if matches, try await photos.hasImage(digest, variant: size) {
            return Response(status: .notModified, headers: headers)
        }
        guard let (total, first) = try await photos.openImage(digest, variant: size) else {
            throw Problem(.notFound, code: "media_not_found", detail: "No such image.")
        }
        if first.count >= total {
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: first)))
        }
        let photos = photos
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody(contentLength: total) { writer in
                // The slot is held until the last chunk is written (or the response dropped).
                defer { withExtendedLifetime(slot) {} }
                try await writer.write(ByteBuffer(bytes: first))
                var offset = first.count
                while offset < total {
                    guard
                        let chunk = try await photos.imageChunk(
                            digest, variant: size, from: offset, count: PhotoLibrary.chunkBytes), !chunk.isEmpty
                    else {
                        // Collected while it was being sent: the connection closes short of its length.
                        throw Problem(.notFound, code: "media_not_found", detail: "No such image.")
                    }
                    try await writer.write(ByteBuffer(bytes: chunk))
                    offset += chunk.count
                }
                try await writer.finish(nil)
            })
    }

    // MARK: Uploads

    /// What a form and its headers may add to an image's 10 MiB.
    static let formOverhead = 64 * 1024

    /// The uploaded bytes, with a declared type that does not contradict them. Admitted before
    /// the body is read (issue 48: bodies were buffered whole first): a slot among the uploads
    /// in flight, a declared length within the limit, and first bytes that begin an image.
    static func upload(_ request: Request, context: UserContext) async throws -> (bytes: [UInt8], slot: PhotoLibrary.Slot) {
        let slot = try PhotoLibrary.admit(context.user)
        let limit = Images.maxBytes + formOverhead
        if let declared = request.headers[.contentLength].flatMap({ Int($0) }), declared > limit {
            throw Problem(.contentTooLarge, code: "too_large", detail: "An image is at most 10 MiB.")
        }
        let contentType = request.headers[.contentType] ?? "application/octet-stream"
        let isForm = contentType.lowercased().hasPrefix("multipart/form-data")
        if !isForm { try Self.checkDeclared(Self.mediaType(contentType)) }
        var buffer = ByteBuffer()
        var looked = isForm
        for try await part in request.body {
            guard buffer.readableBytes + part.readableBytes <= limit else {
                throw Problem(.contentTooLarge, code: "too_large", detail: "An image is at most 10 MiB.")
            }
            buffer.writeImmutableBuffer(part)
            if !looked, buffer.readableBytes >= ImageFormat.signatureLength {
                looked = true
                guard ImageFormat(signature: buffer.readableBytesView.prefix(ImageFormat.signatureLength)) != nil else {
                    throw problem(ImageError(code: ImageError.unsupportedFormat, message: "not an image's first bytes"))
                }
            }
        }
        var declared: String
        var bytes: [UInt8]
        if isForm {
            guard let file = MultipartForm.firstFile(in: buffer, contentType: contentType) else {
                throw Problem(
                    .badRequest, code: "malformed_form", detail: "The form holds no file part (Content-Disposition with a filename or name).")
            }
            declared = file.contentType ?? "application/octet-stream"
            bytes = file.bytes
        } else {
            declared = contentType
            bytes = Array(buffer.readableBytesView)
        }
        declared = Self.mediaType(declared)
        try Self.checkDeclared(declared)
        let header = try await Self.translating { try await PhotoLibrary.header(bytes) }
        if let expected = Self.imageTypes[declared], expected != header.format {
            throw Problem(
                .unsupportedMediaType, code: "content_type_mismatch",
                detail: "The bytes are a \(header.format.rawValue.uppercased()) image, but the request says \(declared).")
        }
        return (bytes, slot)
    }

    /// A Content-Type's media type, lowercased, without its parameters.
    static func mediaType(_ contentType: String) -> String {
        contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
    }

    static func checkDeclared(_ type: String) throws {
        guard type == "application/octet-stream" || Self.imageTypes[type] != nil else {
            throw Problem(
                .unsupportedMediaType, code: "unsupported_media_type",
                detail: "Send a JPEG, PNG or WebP image (image/jpeg, image/png, image/webp, or application/octet-stream).")
        }
    }

    static let imageTypes: [String: ImageFormat] = [
        "image/jpeg": .jpeg, "image/jpg": .jpeg, "image/png": .png, "image/webp": .webp,
    ]

    /// An image the library refused, as the client's problem.
    static func problem(_ error: ImageError) -> Problem {
        switch error.code {
        case ImageError.empty:
            Problem(
                .unprocessableContent, code: "empty_image", detail: "The image has no bytes.",
                errors: [FieldError(field: "body", code: "empty_image", message: "an image of at least one byte")])
        case ImageError.tooLarge:
            Problem(.contentTooLarge, code: "too_large", detail: "An image is at most 10 MiB.")
        case ImageError.unsupportedFormat:
            Problem(
                .unsupportedMediaType, code: "unsupported_image",
                detail: "Only JPEG, PNG and WebP images are taken; these bytes are none of them.")
        case ImageError.tooManyPixels:
            Problem(
                .unprocessableContent, code: "too_many_pixels",
                detail: "An image has at most \(Images.maxPixels) pixels (its width times its height).")
        case ImageError.tooManyScans:
            Problem(
                .unprocessableContent, code: "too_many_scans",
                detail: "A JPEG has at most \(Images.maxScans) scans; this one has more. Save it again as a baseline JPEG.")
        case ImageError.tooComplex:
            Problem(
                .unprocessableContent, code: "image_too_complex",
                detail: "The image takes too long to decode, or too many bytes stored: save it again smaller or as a baseline JPEG.")
        case ImageError.unavailable:
            Problem(.serviceUnavailable, code: "images_unavailable", detail: "Images cannot be processed now; try again later.")
        default:
            Problem(.unprocessableContent, code: "undecodable_image", detail: "The image is damaged or cut short: it cannot be decoded.")
        }
    }

    /// Runs a photo command, with the library's refusals as problems.
    static func translating<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let error as ImageError { throw problem(error) }
    }

    static func digest(_ context: UserContext) throws -> String {
        guard let digest = context.parameters.get("digest"), PhotoDigest.isValid(digest) else {
            throw DomainError(.notFound, "photo_not_found", "No such photo here.")
        }
        return digest
    }
}

/// Just enough of `multipart/form-data` (RFC 7578) to take one file out of a form.
enum MultipartForm {
    struct File {
        var bytes: [UInt8]
        var contentType: String?
    }

    /// The first part with a filename, or else the first part: read part by part, and no
    /// further than the part it takes.
    static func firstFile(in body: ByteBuffer, contentType: String) -> File? {
        guard let boundary = boundary(of: contentType) else { return nil }
        let bytes = Array(body.readableBytesView)
        let delimiter = Array("\r\n--\(boundary)".utf8)
        // The body opens with the delimiter (without its CRLF) or a preamble before it.
        let opening = Array("--\(boundary)".utf8)
        guard var start = bytes.starts(with: opening) ? 0 : find(delimiter, in: bytes, from: 0).map({ $0 + 2 }) else {
            return nil
        }
        var first: File?
        while true {
            var cursor = start + opening.count
            if bytes[cursor...].starts(with: Array("--".utf8)) { break }
            if bytes[cursor...].starts(with: Array("\r\n".utf8)) { cursor += 2 }
            guard let headerEnd = find(Array("\r\n\r\n".utf8), in: bytes, from: cursor),
                let end = find(delimiter, in: bytes, from: headerEnd + 4)
            else { break }
            let headers = String(decoding: bytes[cursor..<headerEnd], as: UTF8.self)
            let type = headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-type:") }
                .map { $0.dropFirst("content-type:".count).trimmingCharacters(in: .whitespaces) }
            let file = File(bytes: Array(bytes[(headerEnd + 4)..<end]), contentType: type)
            if headers.lowercased().contains("filename=") { return file }
            first = first ?? file
            start = end + 2
        }
        return first
    }

    static func boundary(of contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, pair[0].lowercased() == "boundary" else { continue }
            let value = pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            return (1...70).contains(value.count) ? value : nil
        }
        return nil
    }

    /// Where `needle` first stands in `haystack` from `start`, by Knuth-Morris-Pratt: linear
    /// in the body whatever it holds, where a naive search is not (a body of near-boundaries).
    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, start <= haystack.count else { return nil }
        // fallback[i]: the length of the longest proper prefix of needle[...i] that is also its suffix.
        var fallback = [Int](repeating: 0, count: needle.count)
        var length = 0
        for index in 1..<max(1, needle.count) {
            while length > 0, needle[index] != needle[length] { length = fallback[length - 1] }
            if needle[index] == needle[length] { length += 1 }
            fallback[index] = length
        }
        var matched = 0
        for index in start..<haystack.count {
            while matched > 0, haystack[index] != needle[matched] { matched = fallback[matched - 1] }
            if haystack[index] == needle[matched] { matched += 1 }
            if matched == needle.count { return index - needle.count + 1 }
        }
        return nil
    }
}

/// The images being sent to each client address: at most `perAddress` at once, so that one
/// client's readers share out the media pool and the server's outbound bytes with everyone
/// else's (429 `too_many_media_requests` past it, retried a second later).
final class MediaStreams: Sendable {
    let perAddress: Int
    private let counts = Mutex([String: Int]())

    init(perAddress: Int) { self.perAddress = perAddress }

    /// A slot for one image to `address`, given back when the slot is released (dropped).
    final class Slot: Sendable {
        let streams: MediaStreams
        let address: String

        init(_ streams: MediaStreams, _ address: String) {
            self.streams = streams
            self.address = address
        }

        deinit {
            streams.counts.withLock { counts in
                let left = counts[address, default: 1] - 1
                counts[address] = left > 0 ? left : nil
            }
        }
    }

    func admit(_ address: String) throws -> Slot {
        let admitted = counts.withLock { counts in
            let now = counts[address, default: 0]
            guard now < perAddress else { return false }
            counts[address] = now + 1
            return true
        }
        guard admitted else {
            throw Problem(
                .tooManyRequests, code: "too_many_media_requests",
                detail: "At most \(perAddress) images at once to one client; try again in a moment.",
                headers: [.retryAfter: "1"])
        }
        return Slot(self, address)
    }
}
