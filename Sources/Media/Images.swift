import CVipsShim

/// An image format we accept, named by the decoder libvips picks from the bytes themselves,
/// never by a declared content type or file name.
public enum ImageFormat: String, Sendable, CaseIterable {
    case jpeg, png, webp

    /// The format read by this libvips loader, if it is one we accept. libvips 8.14 names the
    /// loader by its type (`VipsForeignLoadJpegBuffer`), not by its nickname (`jpegload_buffer`).
    /// The bytes an upload's first `signatureLength` must begin with to be one of these:
    /// checked before the rest of an upload is read.
    public static let signatureLength = 12

    public init?(signature bytes: some Collection<UInt8>) {
        let head = Array(bytes.prefix(Self.signatureLength))
        guard head.count == Self.signatureLength else { return nil }
        if head.starts(with: [0xFF, 0xD8, 0xFF]) {
            self = .jpeg
        } else if head.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            self = .png
        } else if head.starts(with: Array("RIFF".utf8)), head[8..<12].elementsEqual("WEBP".utf8) {
            self = .webp
        } else {
            return nil
        }
    }

    init?(loader: String) {
        switch loader {
        case "VipsForeignLoadJpegBuffer": self = .jpeg
        case "VipsForeignLoadPngBuffer": self = .png
        case "VipsForeignLoadWebpBuffer": self = .webp
        default: return nil
        }
    }
}

/// Why an upload was refused. `code` is one of the `ImageError` constants below; `message`
/// is for logs (libvips' own words where it gave any), not for matching.
public struct ImageError: Error, Equatable, Hashable, Sendable {
    public let code: String
    public let message: String

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    /// Zero bytes.
    public static let empty = "empty"
    /// More than `Images.maxBytes`.
    public static let tooLarge = "too_large"
    /// Not a JPEG, PNG or WebP by its bytes (SVG, GIF, HEIC, text, noise ...).
    public static let unsupportedFormat = "unsupported_format"
    /// The header declares more than `Images.maxPixels`; refused before any pixel is decoded.
    public static let tooManyPixels = "too_many_pixels"
    /// A supported format whose header or pixels fail to decode (truncated, corrupt), or whose
    /// decoded pixels cannot be re-encoded.
    public static let undecodable = "undecodable"
    /// libvips did not start: a fault of this machine, not of the upload.
    public static let unavailable = "unavailable"
    /// A JPEG of more than `Images.maxScans` scans: refused before decoding, since each scan
    /// is a pass over every coefficient of the image (issue 48: 4,000 scans of 72 bytes each
    /// kept a thread 9 s on 290 KB).
    public static let tooManyScans = "too_many_scans"
    /// Decoding took more than its budget of time (`ImageWorker`), or its output more than
    /// `Images.maxStoredBytes` at the lowest quality tried: a hostile or pathological image.
    public static let tooComplex = "too_complex"
}

/// What a stored format is, read from the header alone: the dimensions are as stored,
/// before any EXIF orientation is applied.
public struct ImageHeader: Equatable, Hashable, Sendable {
    public let format: ImageFormat
    public let width: Int
    public let height: Int

    public init(format: ImageFormat, width: Int, height: Int) {
        self.format = format
        self.width = width
        self.height = height
    }
}

/// An accepted upload, re-encoded: every image is a JPEG with no metadata (no EXIF, GPS,
/// XMP, IPTC or ICC profile), turned upright by its EXIF orientation.
public struct ProcessedImage: Equatable, Hashable, Sendable {
    /// The format of the original bytes.
    public let format: ImageFormat
    /// The dimensions of `full`, after orientation.
    public let width: Int
    public let height: Int
    /// The whole image, re-encoded.
    public let full: [UInt8]
    /// By long side (each of `Images.thumbnailSizes`): the image shrunk to fit a square of
    /// that side, never enlarged.
    public let thumbnails: [Int: [UInt8]]
}

/// Decoding, checking and re-encoding uploaded photos with libvips.
///
/// Every call blocks its thread for as long as the decode takes (tens of milliseconds for a
/// phone photo): call it from a thread pool, not from an event loop or Swift's cooperative
/// pool. Calls may run on many threads at once.
public enum Images {
    /// The largest upload accepted, in bytes (10 MiB).
    public static let maxBytes = 10_485_760
    /// The most pixels (width × height) accepted, checked from the header before decoding.
    public static let maxPixels = 40_000_000
    /// The most memory one decoded image may take: 40 megapixels of 8-bit RGBA. A 16-bit
    /// PNG with alpha (eight bytes a pixel) is held to 20 megapixels.
    public static let maxDecodedBytes = 160_000_000
    /// The long sides of the thumbnails made for every image.
    public static let thumbnailSizes = [200, 800]
    /// The JPEG quality of every output, and the lower one a full variant over
    /// `maxStoredBytes` is tried again at.
    public static let jpegQuality = 85
    public static let fallbackQuality = 70
    /// The long side of the stored full variant: a larger image is shrunk to it (no screen
    /// shows more of a listing's photo), so that no upload is stored as more than it shows.
    public static let maxStoredSide = 4096
    /// The most bytes a stored full variant may take (issue 48: an 803 KB noise PNG was
    /// stored as 25.8 MB at Q85). Over it at `jpegQuality`, the image is encoded again at
    /// `fallbackQuality`, then at half the side; past that it is refused as `too_complex`.
    public static let maxStoredBytes = 8 * 1024 * 1024
    /// The most scans a JPEG may have: a baseline JPEG has one, encoders' progressive scripts
    /// about ten; browsers' decoders bound them too.
    public static let maxScans = 100

    /// Starts libvips on first use; `vips_shim_init` itself runs only once per process.
    private static let isStarted: Bool = vips_shim_init() == 0

    /// Checks the size, the format and the pixel count of an upload without decoding its pixels.
    public static func header(_ bytes: [UInt8]) throws(ImageError) -> ImageHeader {
        if bytes.isEmpty { throw ImageError(code: ImageError.empty, message: "the image is empty") }
        if bytes.count > maxBytes {
            throw ImageError(
                code: ImageError.tooLarge, message: "the image has \(bytes.count) bytes, more than \(maxBytes)")
        }
        try start()
        let loader = bytes.withUnsafeBytes { raw in vips_shim_loader(raw.baseAddress, raw.count) }
        guard let loader, let format = ImageFormat(loader: String(cString: loader)) else {
            clearError()
            throw ImageError(code: ImageError.unsupportedFormat, message: "the bytes are not a JPEG, PNG or WebP image")
        }
        if format == .jpeg {
            let scans = jpegScans(bytes)
            if scans > maxScans {
                throw ImageError(code: ImageError.tooManyScans, message: "the JPEG has \(scans) scans, more than \(maxScans)")
            }
        }
        var width: Int32 = 0
        var height: Int32 = 0
        var pixelBytes: Int32 = 0
        let status = bytes.withUnsafeBytes { raw in
            vips_shim_header(raw.baseAddress, raw.count, &width, &height, &pixelBytes)
        }
        if status != 0 { throw ImageError(code: ImageError.undecodable, message: takeError()) }
        let pixels = Int(width) * Int(height)
        if pixels > maxPixels {
            throw ImageError(
                code: ImageError.tooManyPixels,
                message: "the image is \(width)×\(height) = \(pixels) pixels, more than \(maxPixels)")
        }
        // 16 bits a sample and an alpha band take eight bytes a pixel: fewer pixels, then.
        let decodedBytes = pixels * max(1, Int(pixelBytes))
        if decodedBytes > maxDecodedBytes {
            throw ImageError(
                code: ImageError.tooManyPixels,
                message: "the image would take \(decodedBytes) bytes decoded (\(pixelBytes) a pixel), more than \(maxDecodedBytes)")
        }
        return ImageHeader(format: format, width: Int(width), height: Int(height))
    }

    /// The start-of-scan markers of a JPEG, counted by walking its segments and the entropy-coded
    /// data between them (where `FF 00` is a byte and `FF D0`–`FF D7` a restart), without
    /// decoding anything: one pass over the bytes.
    static func jpegScans(_ bytes: [UInt8]) -> Int {
        var scans = 0
        var index = 2  // after SOI
        while index + 1 < bytes.count {
            guard bytes[index] == 0xFF else {
                index += 1
                continue
            }
            let marker = bytes[index + 1]
            switch marker {
            case 0xD9: return scans  // EOI
            case 0x00, 0x01, 0xD0...0xD8, 0xFF: index += marker == 0xFF ? 1 : 2  // no length
            default:
                guard index + 3 < bytes.count else { return scans }
                if marker == 0xDA { scans += 1 }
                index += 2 + (Int(bytes[index + 2]) << 8 | Int(bytes[index + 3]))
            }
        }
        return scans
    }

    /// Checks an upload, decodes it fully, turns it upright and re-encodes it as a stripped JPEG
    /// with thumbnails.
    public static func process(_ bytes: [UInt8]) throws(ImageError) -> ProcessedImage {
        let header = try header(bytes)
        // The decoded image is a copy in memory: it does not read from `bytes` afterwards.
        let decoded = bytes.withUnsafeBytes { raw in vips_shim_decode(raw.baseAddress, raw.count) }
        guard let image = decoded else { throw ImageError(code: ImageError.undecodable, message: takeError()) }
        defer { vips_shim_unref(image) }

        var width: Int32 = 0
        var height: Int32 = 0
        vips_shim_size(image, &width, &height)
        let (full, fullWidth, fullHeight) = try fullVariant(image, width: Int(width), height: Int(height))
        var thumbnails: [Int: [UInt8]] = [:]
        for size in thumbnailSizes {
            var thumbnail: OpaquePointer?
            guard vips_shim_thumbnail(image, Int32(size), &thumbnail) == 0, let thumbnail else {
                throw ImageError(code: ImageError.undecodable, message: takeError())
            }
            defer { vips_shim_unref(thumbnail) }
            thumbnails[size] = try jpeg(thumbnail)
        }
        return ProcessedImage(format: header.format, width: fullWidth, height: fullHeight, full: full, thumbnails: thumbnails)
    }

    /// The full variant as stored: at most `maxStoredSide` on its long side and
    /// `maxStoredBytes` long (see there); its bytes and dimensions.
    static func fullVariant(_ image: OpaquePointer, width: Int, height: Int) throws(ImageError) -> ([UInt8], Int, Int) {
        let side = min(max(width, height), maxStoredSide)
        let attempts = [(side, jpegQuality), (side, fallbackQuality), (side / 2, fallbackQuality)]
        var last = 0
        for (side, quality) in attempts {
            let bytes: [UInt8]
            var size = (Int32(width), Int32(height))
            if side < max(width, height) {
                var shrunk: OpaquePointer?
                guard vips_shim_thumbnail(image, Int32(side), &shrunk) == 0, let shrunk else {
                    throw ImageError(code: ImageError.undecodable, message: takeError())
                }
                defer { vips_shim_unref(shrunk) }
                vips_shim_size(shrunk, &size.0, &size.1)
                bytes = try jpeg(shrunk, quality: quality)
            } else {
                bytes = try jpeg(image, quality: quality)
            }
            if bytes.count <= maxStoredBytes { return (bytes, Int(size.0), Int(size.1)) }
            last = bytes.count
        }
        throw ImageError(
            code: ImageError.tooComplex,
            message: "the image takes \(last) bytes as a JPEG at \(fallbackQuality) and half its side, more than \(maxStoredBytes)")
    }

    /// The names of the metadata fields libvips reads from an image's header (`exif-data`,
    /// `exif-ifd3-GPSLatitude`, `xmp-data`, `icc-profile-data`, `orientation` ...), or none if
    /// the bytes are not an image we accept. For checking what an output carries.
    public static func metadataFields(_ bytes: [UInt8]) -> [String] {
        guard !bytes.isEmpty, (try? start()) != nil else { return [] }
        guard let fields = bytes.withUnsafeBytes({ raw in vips_shim_fields(raw.baseAddress, raw.count) }) else {
            clearError()
            return []
        }
        defer { vips_shim_free_fields(fields) }
        var names: [String] = []
        var index = 0
        while let field = fields[index] {
            names.append(String(cString: field))
            index += 1
        }
        return names
    }

    private static func start() throws(ImageError) {
        if !isStarted { throw ImageError(code: ImageError.unavailable, message: "libvips did not start") }
    }

    /// Encodes an image as a stripped JPEG and copies it into Swift's memory.
    private static func jpeg(_ image: OpaquePointer, quality: Int = jpegQuality) throws(ImageError) -> [UInt8] {
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard vips_shim_jpeg(image, Int32(quality), &buffer, &length) == 0, let buffer else {
            throw ImageError(code: ImageError.undecodable, message: takeError())
        }
        defer { vips_shim_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }

    /// libvips' error text, cleared. The buffer is shared by every thread, so under load it may
    /// also hold another call's words: good for logs, never for deciding anything.
    private static func takeError() -> String {
        var text = [CChar](repeating: 0, count: 1024)
        vips_shim_take_error(&text, text.count)
        let lines = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: true)
        return lines.isEmpty ? "libvips gave no reason" : lines.joined(separator: "; ")
    }

    private static func clearError() {
        var nothing: CChar = 0
        vips_shim_take_error(&nothing, 1)
    }
}
