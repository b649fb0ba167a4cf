import Foundation
import HTTPTypes
import HummingbirdTesting
import ImageFixtures
import Marketplace
import Media
import NIOCore
import Projections
import ServerTestSupport
import Testing
import TestSupport
import UseCases

extension TestClientProtocol {
    /// Sends bytes as they are, with their declared type.
    func upload(
        _ uri: String, _ bytes: [UInt8], type: String, token: String, method: HTTPRequest.Method = .post
    ) async throws -> Reply {
        let headers: HTTPFields = [.contentType: type, .authorization: "Bearer \(token)"]
        return try await execute(uri: uri, method: method, headers: headers, body: ByteBuffer(bytes: bytes)) {
            Reply(status: $0.status, headers: $0.headers, data: Data(buffer: $0.body))
        }
    }

    func media(_ path: String, ifNoneMatch: String? = nil) async throws -> Reply {
        var headers: HTTPFields = [:]
        if let ifNoneMatch { headers[.ifNoneMatch] = ifNoneMatch }
        return try await execute(uri: path, method: .get, headers: headers, body: nil) {
            Reply(status: $0.status, headers: $0.headers, data: Data(buffer: $0.body))
        }
    }
}

@Suite("Photos")
struct PhotosTests {
    /// A phone photo: 1600 × 1200 stored sideways (orientation 6), with where it was taken.
    static func phonePhoto(width: Int = 1200, height: Int = 1600) throws -> [UInt8] {
        Fixture.withExif(try Fixture.image(width: width, height: height, as: ".jpg"), orientation: 6)
    }

    /// A JPEG of thousands of tiny scans is refused before it reaches a decoding thread.
    @Test func aScanBombIsRefusedBeforeDecoding() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let item = try await client.postRental(owner.token).id
            let refused = try await client.upload("/v1/items/\(item)/photos", try Fixture.scanBomb(scans: 4_000), type: "image/jpeg", token: owner.token)
            #expect(refused.status == .unprocessableContent, "\(refused)")
            #expect(refused.code == "too_many_scans")
        }
    }

    @Test func aPhotoIsStrippedOfWhereItWasTakenTurnedUprightAndServedForever() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let item = try await client.postRental(owner.token).id
            let photo = try Self.phonePhoto()
            #expect(Fixture.leaks(Images.metadataFields(photo)).contains("exif-ifd3-GPSLatitude"), "the upload has GPS tags")

            let added = try await client.upload("/v1/items/\(item)/photos", photo, type: "image/jpeg", token: owner.token)
            #expect(added.status == .created, "\(added)")
            let photos = try added.decode(ItemResource.self).photos
            let digest = try #require(photos.first?.digest)
            #expect(photos.map(\.url) == ["/v1/media/\(digest)"])

            for (size, long) in [("full", 1600), ("800", 800), ("200", 200)] {
                let served = try await client.media("/v1/media/\(digest)?size=\(size)")
                #expect(served.status == .ok, "\(size): \(served)")
                #expect(served.headers[.contentType] == "image/jpeg")
                #expect(served.headers[.cacheControl] == "public, max-age=86400")
                #expect(served.headers[.eTag] == "\"\(digest)-\(size)\"")
                #expect(served.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff", "read as a JPEG only (issue 48)")
                let bytes = [UInt8](served.data)
                #expect(Fixture.leaks(Images.metadataFields(bytes)).isEmpty, "\(size): \(Images.metadataFields(bytes))")
                let header = try Images.header(bytes)
                // Stored 1200 wide and 1600 high, sideways: upright it is 1600 wide.
                #expect(header.width == long && header.height == long * 3 / 4, "\(size): \(header)")
            }
            let full = try await client.media("/v1/media/\(digest)")
            #expect(full.status == .ok)
            let again = try await client.media("/v1/media/\(digest)", ifNoneMatch: "\"\(digest)-full\"")
            #expect(again.status == .notModified && again.data.isEmpty, "\(again)")
            let weakly = try await client.media("/v1/media/\(digest)", ifNoneMatch: "\"other\", W/\"\(digest)-full\"")
            #expect(weakly.status == .notModified, "a weak tag matches too: \(weakly)")
            #expect(try await client.media("/v1/media/\(digest)", ifNoneMatch: "\"\(digest)-200\"").status == .ok)
            #expect(try await client.media("/v1/media/\(digest)?size=300").status == .unprocessableContent)
            #expect(try await client.media("/v1/media/\(String(repeating: "a", count: 64))").status == .notFound)
            #expect(try await client.media("/v1/media/..%2F..%2Fetc%2Fpasswd").status == .notFound)

            // The same image again is the same photo: nothing new in the log.
            let events = try await eventCount(admin)
            let repeated = try await client.upload("/v1/items/\(item)/photos", photo, type: "image/jpeg", token: owner.token)
            #expect(repeated.status == .created)
            #expect(try repeated.decode(ItemResource.self).photos.count == 1)
            #expect(try await eventCount(admin) == events)
        }
    }

    @Test func everyBadUploadIsAClearProblemAndTheServerStaysReady() async throws {
        try await withServer { client, admin in
            let owner = try await client.user("owner")
            let stranger = try await client.user("stranger")
            let item = try await client.postRental(owner.token).id
            let png = try Fixture.image(width: 320, height: 240, as: ".png")
            let jpeg = try Fixture.image(width: 1600, height: 1200, as: ".jpg")
            let path = "/v1/items/\(item)/photos"
            let events = try await eventCount(admin)
            let cases: [(String, [UInt8], String, HTTPResponse.Status, String)] = [
                ("a PNG called a JPEG", png, "image/jpeg", .unsupportedMediaType, "content_type_mismatch"),
                ("a JPEG cut short", Array(jpeg.prefix(jpeg.count / 2)), "image/jpeg", .unprocessableContent, "undecodable_image"),
                ("a 20000 × 20000 bomb", Fixture.pngBomb(width: 20_000, height: 20_000), "image/png", .unprocessableContent, "too_many_pixels"),
                ("an SVG", try Fixture.Unsupported.svg.bytes(), "image/svg+xml", .unsupportedMediaType, "unsupported_media_type"),
                ("an SVG unnamed", try Fixture.Unsupported.svg.bytes(), "application/octet-stream", .unsupportedMediaType, "unsupported_image"),
                ("a GIF", try Fixture.Unsupported.gif.bytes(), "application/octet-stream", .unsupportedMediaType, "unsupported_image"),
                ("zero bytes", [], "image/jpeg", .unprocessableContent, "empty_image"),
                ("11 MiB", [UInt8](repeating: 0xFF, count: 11 * 1024 * 1024), "image/jpeg", .contentTooLarge, "too_large"),
                ("NUL bytes", [UInt8](repeating: 0, count: 512), "image/png", .unsupportedMediaType, "unsupported_image"),
                ("a form without a file", Array("--x\r\n\r\n".utf8), "multipart/form-data; boundary=y", .badRequest, "malformed_form"),
                // Near-boundaries all the way: a naive search would compare every byte with every other.
                ("a form of near-boundaries", Array(repeating: Array(("--" + String(repeating: "-", count: 69) + "x").utf8), count: 100_000).flatMap { $0 },
                 "multipart/form-data; boundary=" + String(repeating: "-", count: 70), .badRequest, "malformed_form"),
                ("a form without a boundary", png, "multipart/form-data", .badRequest, "malformed_form"),
            ]
            for (name, bytes, type, status, code) in cases {
                let refused = try await client.upload(path, bytes, type: type, token: owner.token)
                #expect(refused.status == status && refused.code == code, "\(name): \(refused)")
                #expect(refused.headers[.contentType] == "application/problem+json", "\(name)")
            }
            let foreign = try await client.upload(path, jpeg, type: "image/jpeg", token: stranger.token)
            #expect(foreign.status == .forbidden && foreign.code == "not_owner", "\(foreign)")
            #expect(try await eventCount(admin) == events, "no refusal wrote an event")
            #expect(try await count(admin, "SELECT count(*) FROM media") == 0, "and none stored an image")
            #expect(try await client.send(.get, "/health/ready").status == .ok, "the server is still ready")

            // A form from a browser: the file part, whatever the other fields.
            let boundary = "----lender\(UUID().uuidString)"
            let form = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"caption\"\r\n\r\nMy bike\r\n--\(boundary)\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"bike.png\"\r\nContent-Type: image/png\r\n\r\n".utf8)
                + png + Array("\r\n--\(boundary)--\r\n".utf8)
            let fromForm = try await client.upload(path, form, type: "multipart/form-data; boundary=\(boundary)", token: owner.token)
            #expect(fromForm.status == .created, "\(fromForm)")
            #expect(try fromForm.decode(ItemResource.self).photos.count == 1)
        }
    }

    @Test func aGalleryHoldsEightAndARemovedPhotoIsCollected() async throws {
        try await withServer { client, admin in
            let borrower = try await client.user("borrower")
            let other = try await client.user("other")
            let loan = try await client.postLoan(borrower.token)
            var digests = [String]()
            for index in 0..<8 {
                let image = try Fixture.image(width: 100 + index, height: 80, as: ".webp")
                let added = try await client.upload("/v1/loans/\(loan)/photos", image, type: "image/webp", token: borrower.token)
                #expect(added.status == .created, "\(added)")
                digests = try added.decode(LoanResource.self).photos.map(\.digest)
            }
            #expect(digests.count == 8)
            let ninth = try await client.upload(
                "/v1/loans/\(loan)/photos", try Fixture.image(width: 99, height: 80, as: ".webp"), type: "image/webp", token: borrower.token)
            #expect(ninth.status == .conflict && ninth.code == "too_many_photos", "\(ninth)")
            let notTheirs = try await client.send(.delete, "/v1/loans/\(loan)/photos/\(digests[0])", token: other.token)
            #expect(notTheirs.status == .forbidden && notTheirs.code == "not_borrower", "\(notTheirs)")

            let removed = try await client.send(.delete, "/v1/loans/\(loan)/photos/\(digests[0])", token: borrower.token)
            #expect(removed.status == .ok, "\(removed)")
            #expect(try removed.decode(LoanResource.self).photos.map(\.digest) == Array(digests.dropFirst()))
            let twice = try await client.send(.delete, "/v1/loans/\(loan)/photos/\(digests[0])", token: borrower.token)
            #expect(twice.status == .notFound && twice.code == "photo_not_found", "\(twice)")

            // Still served until collected; young images are left for their events to arrive.
            #expect(try await client.media("/v1/media/\(digests[0])").status == .ok)
            let database = try await ownerURL(admin)
            let young = try runLender(["media", "gc"], database: database)
            #expect(young.contains("0 unused photos deleted"), "\(young)")
            let collected = try runLender(["media", "gc", "--older-than", "0"], database: database)
            #expect(collected.contains("1 unused photos deleted"), "\(collected)")
            #expect(try await client.media("/v1/media/\(digests[0])").status == .notFound)
            #expect(try await client.media("/v1/media/\(digests[1])?size=200").status == .ok, "what is shown stays")
        }
    }

    @Test func aProfileHasOnePhotoAndAForgottenPersonsFaceIsDeletedAtOnce() async throws {
        try await withServer { client, admin in
            let zelda = try await client.user("zelda")
            let first = try await client.upload("/v1/me/photo", try Self.phonePhoto(), type: "image/jpeg", token: zelda.token, method: .put)
            #expect(first.status == .ok, "\(first)")
            let second = try await client.upload(
                "/v1/me/photo", try Fixture.image(width: 400, height: 400, as: ".png"), type: "image/png", token: zelda.token,
                method: .put)
            let photos = try second.decode(PrivateProfile.self).photos
            let before = try first.decode(PrivateProfile.self).photos
            #expect(photos.count == 1 && before.count == 1 && photos != before, "one photo, replaced")
            let digest = try #require(photos.first?.digest)
            let seen = try await client.send(.get, "/v1/users/\(zelda.id)", token: zelda.token).decode(PublicProfile.self)
            #expect(seen.photos.map(\.digest) == [digest])

            let closed = try await client.send(
                .delete, "/v1/me", body: API.CloseAccountBody(password: "correct horse battery"), token: zelda.token)
            #expect(closed.status == .noContent, "\(closed)")
            #expect(try await client.media("/v1/media/\(digest)").status == .notFound, "the face went with the account")
            #expect(try await count(admin, "SELECT count(*) FROM media WHERE digest = \(digest)") == 0)
            #expect(try await count(admin, "SELECT count(*) FROM users_view WHERE photo IS NOT NULL") == 0)
        }
    }
}
