import ImageFixtures
@testable import Media
import Testing

@Suite("Images")
struct ImagesTests {
    // MARK: Accepted images

    @Test("a photo with GPS and orientation 6 comes out upright, with no metadata left")
    func stripsMetadataAndTurnsUpright() throws {
        let photo = Fixture.withExif(try Fixture.image(width: 300, height: 100, as: ".jpg"), orientation: 6)
        let input = Images.metadataFields(photo)
        // The fixture is real: libvips reads its GPS and orientation back.
        #expect(input.contains("exif-data"))
        #expect(input.contains("exif-ifd3-GPSLatitude"))
        #expect(input.contains("exif-ifd3-GPSLongitude"))
        #expect(input.contains("exif-ifd0-Orientation"))
        #expect(Fixture.leaks(input).contains("exif-ifd3-GPSLatitude"))

        let processed = try Images.process(photo)
        #expect(processed.format == .jpeg)
        #expect(processed.width == 100)
        #expect(processed.height == 300)
        #expect(try Images.header(processed.full) == ImageHeader(format: .jpeg, width: 100, height: 300))
        for output in [processed.full] + processed.thumbnails.values {
            let fields = Images.metadataFields(output)
            #expect(!fields.isEmpty)
            #expect(Fixture.leaks(fields).isEmpty, "left in the output: \(Fixture.leaks(fields))")
        }
        let thumbnail = try Images.header(try #require(processed.thumbnails[200]))
        #expect(thumbnail.height == 200)
        #expect(thumbnail.width < thumbnail.height)
    }

    @Test("a JPEG of thousands of scans is refused before any decoding; an ordinary one has one")
    func scanBombsAreRefused() throws {
        let photo = try Fixture.image(width: 64, height: 48, as: ".jpg")
        #expect(Images.jpegScans(photo) == 1)
        let bomb = try Fixture.scanBomb(scans: 4_000)
        #expect(Images.jpegScans(bomb) == 4_001)
        #expect(throws: ImageError(code: ImageError.tooManyScans, message: "the JPEG has 4001 scans, more than 100")) {
            try Images.header(bomb)
        }
        #expect(throws: ImageError.self) { try Images.process(bomb) }
        #expect(try Images.header(try Fixture.scanBomb(scans: 50)).format == .jpeg, "a hundred scans at most pass the check")
    }

    @Test("thumbnails have long sides of exactly 200 and 800 when the source is larger")
    func thumbnailsOfALargeImage() throws {
        let processed = try Images.process(try Fixture.image(width: 1600, height: 1200, as: ".jpg"))
        #expect(processed.width == 1600)
        #expect(processed.height == 1200)
        #expect(processed.thumbnails.keys.sorted() == [200, 800])
        #expect(try Images.header(try #require(processed.thumbnails[800])) == ImageHeader(format: .jpeg, width: 800, height: 600))
        #expect(try Images.header(try #require(processed.thumbnails[200])) == ImageHeader(format: .jpeg, width: 200, height: 150))
    }

    @Test("a small image is never enlarged")
    func thumbnailsOfASmallImage() throws {
        let processed = try Images.process(try Fixture.image(width: 150, height: 100, as: ".jpg"))
        for size in [200, 800] {
            let thumbnail = try Images.header(try #require(processed.thumbnails[size]))
            #expect(thumbnail == ImageHeader(format: .jpeg, width: 150, height: 100))
        }
    }

    @Test("a PNG is accepted as a PNG whatever it was called: the format comes from the bytes")
    func pngByItsBytes() throws {
        let png = try Fixture.image(width: 320, height: 240, as: ".png")
        #expect(try Images.header(png) == ImageHeader(format: .png, width: 320, height: 240))
        let processed = try Images.process(png)
        #expect(processed.format == .png)
        #expect(Array(processed.full.prefix(3)) == [0xFF, 0xD8, 0xFF])
        #expect(try Images.header(processed.full) == ImageHeader(format: .jpeg, width: 320, height: 240))
    }

    @Test("a WebP is accepted and re-encoded as JPEG")
    func webp() throws {
        let processed = try Images.process(try Fixture.image(width: 64, height: 48, as: ".webp"))
        #expect(processed.format == .webp)
        #expect(try Images.header(processed.full) == ImageHeader(format: .jpeg, width: 64, height: 48))
    }

    @Test("many uploads at once give the same bytes as one")
    func concurrentUploads() async throws {
        let photo = Fixture.withExif(try Fixture.image(width: 640, height: 480, as: ".jpg"), orientation: 6)
        let expected = try Images.process(photo)
        let results = try await withThrowingTaskGroup(of: ProcessedImage.self) { group in
            for _ in 0..<16 { group.addTask { try Images.process(photo) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 16)
        #expect(results.allSatisfy { $0 == expected })
    }

    // MARK: Refused uploads

    @Test("zero bytes are empty")
    func empty() {
        #expect(Fixture.code { try Images.process([]) } == "empty")
    }

    @Test("one byte over 10 MiB is too large, whatever it holds")
    func tooLarge() {
        #expect(Fixture.code { try Images.process([UInt8](repeating: 0, count: 10_485_761)) } == "too_large")
    }

    @Test("a JPEG cut in half is undecodable, though its header reads")
    func truncated() throws {
        let jpeg = try Fixture.image(width: 1600, height: 1200, as: ".jpg")
        let half = Array(jpeg.prefix(jpeg.count / 2))
        #expect(try Images.header(half) == ImageHeader(format: .jpeg, width: 1600, height: 1200))
        #expect(Fixture.code { try Images.process(half) } == "undecodable")
    }

    @Test("a PNG cut in half is undecodable")
    func truncatedPNG() throws {
        let png = try Fixture.image(width: 800, height: 600, as: ".png")
        #expect(Fixture.code { try Images.process(Array(png.prefix(png.count / 2))) } == "undecodable")
    }

    @Test("SVG, GIF, TIFF, text and noise are unsupported", arguments: Fixture.Unsupported.allCases)
    func unsupported(_ kind: Fixture.Unsupported) throws {
        let bytes = try kind.bytes()
        #expect(Fixture.code { try Images.process(bytes) } == "unsupported_format")
    }

    @Test("a 20000×20000 PNG header is refused from the header, before any pixel is decoded")
    func decompressionBomb() throws {
        let bomb = Fixture.pngBomb(width: 20_000, height: 20_000)
        #expect(bomb.count < 100)
        // A full decode of these bytes would fail as undecodable: too_many_pixels shows the header decided.
        #expect(Fixture.code { try Images.header(bomb) } == "too_many_pixels")
        #expect(Fixture.code { try Images.process(bomb) } == "too_many_pixels")
        // Just under the limit, the same bytes pass the header and fail on their missing pixels.
        #expect(try Images.header(Fixture.pngBomb(width: 8000, height: 5000)).width == 8000)
        #expect(Fixture.code { try Images.process(Fixture.pngBomb(width: 8000, height: 5000)) } == "undecodable")
    }

    @Test("30 megapixels of 16-bit RGBA would take 240 MB decoded: refused from the header; 8-bit RGB is not")
    func deepPixelsCountDouble() throws {
        let deep = Fixture.pngBomb(width: 6000, height: 5000, bitDepth: 16, colorType: 6)
        #expect(Fixture.code { try Images.header(deep) } == "too_many_pixels")
        #expect(try Images.header(Fixture.pngBomb(width: 6000, height: 5000)).width == 6000)
    }
}
