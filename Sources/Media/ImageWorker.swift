import CChild

#if canImport(Glibc)
    import Glibc
#endif

/// Decodes uploads in a child process (`lender media decode`, the server's own binary) with a
/// CPU budget and a deadline, killed past either: a decode cannot be cancelled inside libvips,
/// and one hostile image must not hold a server's thread for minutes (issue 48: a 10 MiB
/// progressive JPEG kept one busy ~8 minutes). A crash in a decoder takes only the child.
///
/// The child reads the upload on stdin and writes `ImageWorker.Wire` on stdout.
public struct ImageWorker: Sendable {
    /// The executable whose `media decode` subcommand decodes (`lender`).
    public var executable: String
    /// The child's CPU time, as RLIMIT_CPU: a 40-megapixel phone photo takes under a second.
    public var cpuSeconds: Int
    /// Wall-clock time before the child is killed (a child waiting, not computing, is not
    /// bounded by its CPU time).
    public var timeoutMilliseconds: Int

    public init(executable: String, cpuSeconds: Int = 5, timeoutMilliseconds: Int = 10_000) {
        self.executable = executable
        self.cpuSeconds = cpuSeconds
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    /// This process's own executable (Linux): a server's decoder. `/proc/self/exe` itself,
    /// not the path it names: the child runs the very binary the server runs, even after a
    /// deploy replaced or removed the file (a newer one might write another `Wire`).
    public static var ownExecutable: String? {
        access("/proc/self/exe", X_OK) == 0 ? "/proc/self/exe" : nil
    }

    /// `Images.process(bytes)`, in a child. Blocks the thread: call from a thread pool.
    public func process(_ bytes: [UInt8]) throws(ImageError) -> ProcessedImage {
        // What a child writes at most: the full variant's cap, its thumbnails and the framing.
        let maxOutput = Images.maxStoredBytes + 2 * 1024 * 1024
        var output: UnsafeMutablePointer<UInt8>?
        var length = 0
        var detail: Int32 = 0
        let arguments = [executable, "media", "decode"]
        let outcome: child_outcome = withCStrings(arguments) { argv in
            bytes.withUnsafeBufferPointer { input in
                lender_child_run(
                    executable, argv, input.baseAddress, input.count, Int32(cpuSeconds), Int32(timeoutMilliseconds),
                    maxOutput, &output, &length, &detail)
            }
        }
        defer { free(output) }
        switch outcome {
        case CHILD_EXITED where detail == 0:
            guard let output else { throw ImageError(code: ImageError.unavailable, message: "the decoder wrote nothing") }
            return try Wire.read(Array(UnsafeBufferPointer(start: output, count: length)))
        case CHILD_TIMED_OUT:
            throw ImageError(code: ImageError.tooComplex, message: "decoding took more than \(timeoutMilliseconds) ms")
        case CHILD_SIGNALLED where detail == SIGXCPU || detail == SIGKILL:
            throw ImageError(code: ImageError.tooComplex, message: "decoding took more than \(cpuSeconds) s of CPU")
        case CHILD_SPAWN_FAILED:
            throw ImageError(code: ImageError.unavailable, message: "the decoder \(executable) did not start (\(detail))")
        case CHILD_TOO_MUCH_OUTPUT:
            throw ImageError(code: ImageError.undecodable, message: "the decoder wrote more than \(maxOutput) bytes")
        default:
            // A decoder that crashed: the image's fault as far as anyone can tell.
            throw ImageError(code: ImageError.undecodable, message: "the decoder failed (outcome \(outcome.rawValue), \(detail))")
        }
    }

    private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        let pointers = strings.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    /// What the child writes: a tag byte, then for an image its format, dimensions, full variant
    /// and thumbnails, for a refusal the error's code and message; lengths as 8-byte little-endian.
    public enum Wire {
        public static func write(_ result: Result<ProcessedImage, ImageError>) -> [UInt8] {
            var out: [UInt8] = []
            func number(_ value: Int) { withUnsafeBytes(of: UInt64(value).littleEndian) { out.append(contentsOf: $0) } }
            func bytes(_ value: [UInt8]) {
                number(value.count)
                out.append(contentsOf: value)
            }
            switch result {
            case .success(let image):
                out.append(0)
                bytes(Array(image.format.rawValue.utf8))
                number(image.width)
                number(image.height)
                bytes(image.full)
                number(image.thumbnails.count)
                for (size, thumbnail) in image.thumbnails.sorted(by: { $0.key < $1.key }) {
                    number(size)
                    bytes(thumbnail)
                }
            case .failure(let error):
                out.append(1)
                bytes(Array(error.code.utf8))
                bytes(Array(error.message.utf8))
            }
            return out
        }

        public static func read(_ wire: [UInt8]) throws(ImageError) -> ProcessedImage {
            var at = 0
            let broken = ImageError(code: ImageError.unavailable, message: "the decoder's answer is cut short")
            func number() throws(ImageError) -> Int {
                guard at + 8 <= wire.count else { throw broken }
                var value: UInt64 = 0
                for index in 0..<8 { value |= UInt64(wire[at + index]) << (8 * UInt64(index)) }
                at += 8
                guard value <= UInt64(wire.count) * 100_000 else { throw broken }
                return Int(value)
            }
            func bytes() throws(ImageError) -> [UInt8] {
                let count = try number()
                guard at + count <= wire.count else { throw broken }
                defer { at += count }
                return Array(wire[at..<(at + count)])
            }
            guard let tag = wire.first else { throw broken }
            at = 1
            if tag == 1 {
                let code = String(decoding: try bytes(), as: UTF8.self)
                throw ImageError(code: code, message: String(decoding: try bytes(), as: UTF8.self))
            }
            guard let format = ImageFormat(rawValue: String(decoding: try bytes(), as: UTF8.self)) else { throw broken }
            let width = try number()
            let height = try number()
            let full = try bytes()
            var thumbnails: [Int: [UInt8]] = [:]
            for _ in 0..<min(try number(), 16) {
                let size = try number()
                thumbnails[size] = try bytes()
            }
            return ProcessedImage(format: format, width: width, height: height, full: full, thumbnails: thumbnails)
        }
    }
}
