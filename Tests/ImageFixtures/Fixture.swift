import CVipsShim
import Media
import Testing

/// Images made in code, so no binary file is committed.
public enum Fixture {
    public struct ShimFailed: Error {}

    /// A gradient encoded by libvips, metadata kept (the saver is not asked to strip).
    public static func image(width: Int, height: Int, as suffix: String) throws -> [UInt8] {
        try made { vips_shim_test_image(Int32(width), Int32(height), suffix, &$0, &$1) }
    }

    /// The bytes a shim's test-image function writes (and libvips allocated).
    private static func made(_ make: (inout UnsafeMutableRawPointer?, inout Int) -> Int32) throws -> [UInt8] {
        guard vips_shim_init() == 0 else { throw ShimFailed() }
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard make(&buffer, &length) == 0, let buffer else { throw ShimFailed() }
        defer { vips_shim_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }

    /// One row of noise repeated down the image (issue 48's amplification: small as a PNG, large
    /// as a JPEG).
    public static func stripedNoise(width: Int, height: Int, as suffix: String = ".png") throws -> [UInt8] {
        try made { vips_shim_striped_noise(Int32(width), Int32(height), suffix, &$0, &$1) }
    }

    /// The code of the `ImageError` the body throws, or nil if it throws none.
    public static func code(_ body: () throws -> some Any) -> String? {
        do {
            _ = try body()
            return nil
        } catch {
            return (error as? ImageError)?.code ?? "not an ImageError: \(error)"
        }
    }

    /// The fields that should never survive processing.
    public static func leaks(_ fields: [String]) -> [String] {
        fields.filter { field in
            ["exif-", "xmp-", "iptc-", "icc-", "ipct-"].contains { field.hasPrefix($0) }
                || field.contains("GPS") || field == "orientation"
        }
    }

    /// The JPEG with an APP1 Exif segment spliced in right after SOI: IFD0 holds the orientation
    /// and a pointer to a GPS IFD that places the photo at 48°51'30"N 2°17'40"E.
    /// The scan bomb's shape (issue 48): a JPEG of thousands of tiny scans, each a pass over
    /// every coefficient when decoded. Made from a real JPEG: its own scan, then `scans` empty
    /// ones of fourteen bytes each, as the attack's were 72.
    public static func scanBomb(scans: Int) throws -> [UInt8] {
        let photo = try image(width: 64, height: 48, as: ".jpg")
        let emptyScan: [UInt8] = [0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34, 0xFF, 0x00]
        return Array(photo.dropLast(2)) + Array(repeating: emptyScan, count: scans).flatMap { $0 } + [0xFF, 0xD9]
    }

    public static func withExif(_ jpeg: [UInt8], orientation: UInt16) -> [UInt8] {
        precondition(jpeg.starts(with: [0xFF, 0xD8]))
        // Big-endian TIFF: header (8 bytes), IFD0 at 8 (2 entries: 30 bytes), GPS IFD at 38
        // (5 entries: 66 bytes), then the two rationals' values at 104 and 128.
        var tiff: [UInt8] = Array("MM".utf8) + be16(42) + be32(8)
        tiff += be16(2)
        tiff += entry(tag: 0x0112, type: 3, count: 1, value: be16(orientation) + [0, 0])  // Orientation
        tiff += entry(tag: 0x8825, type: 4, count: 1, value: be32(38))  // GPSInfo IFD pointer
        tiff += be32(0)
        tiff += be16(5)
        tiff += entry(tag: 0x0000, type: 1, count: 4, value: [2, 2, 0, 0])  // GPSVersionID
        tiff += entry(tag: 0x0001, type: 2, count: 2, value: Array("N".utf8) + [0, 0, 0])  // GPSLatitudeRef
        tiff += entry(tag: 0x0002, type: 5, count: 3, value: be32(104))  // GPSLatitude
        tiff += entry(tag: 0x0003, type: 2, count: 2, value: Array("E".utf8) + [0, 0, 0])  // GPSLongitudeRef
        tiff += entry(tag: 0x0004, type: 5, count: 3, value: be32(128))  // GPSLongitude
        tiff += be32(0)
        precondition(tiff.count == 104)
        for (numerator, denominator) in [(48, 1), (51, 1), (30, 1), (2, 1), (17, 1), (40, 1)] as [(UInt32, UInt32)] {
            tiff += be32(numerator) + be32(denominator)
        }
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        let app1: [UInt8] = [0xFF, 0xE1] + be16(UInt16(payload.count + 2)) + payload
        return Array(jpeg.prefix(2)) + app1 + jpeg.dropFirst(2)
    }

    /// A PNG whose header declares width × height pixels (8-bit RGB unless told: colour type 6
    /// is RGBA), followed by a few bytes of IDAT and no end: valid up to its header,
    /// undecodable after it.
    public static func pngBomb(width: UInt32, height: UInt32, bitDepth: UInt8 = 8, colorType: UInt8 = 2) -> [UInt8] {
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
            + chunk("IHDR", be32(width) + be32(height) + [bitDepth, colorType, 0, 0, 0])
            + chunk("IDAT", [0x78, 0x9C, 0x62, 0x00, 0x00])
    }

    public enum Unsupported: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case svg, gif, tiff, text, noise

        public var testDescription: String { rawValue }

        public func bytes() throws -> [UInt8] {
            switch self {
            case .svg:
                Array(#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>"#.utf8)
            case .gif: try Fixture.image(width: 32, height: 32, as: ".gif")
            case .tiff: try Fixture.image(width: 32, height: 32, as: ".tif")
            case .text: Array("Hello, this is not a picture.\n".utf8)
            case .noise: Fixture.noise(count: 4096)
            }
        }
    }

    /// Deterministic noise (SplitMix64), so a failure can be replayed.
    public static func noise(count: Int) -> [UInt8] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        return (0..<count).map { _ in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return UInt8(truncatingIfNeeded: z ^ (z >> 31))
        }
    }

    private static func entry(tag: UInt16, type: UInt16, count: UInt32, value: [UInt8]) -> [UInt8] {
        precondition(value.count == 4)
        return be16(tag) + be16(type) + be32(count) + value
    }

    private static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + data
        return be32(UInt32(data.count)) + typed + be32(crc32(typed))
    }

    private static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    private static func be16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }

    private static func be32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }
}
