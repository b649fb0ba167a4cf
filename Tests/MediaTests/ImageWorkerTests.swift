import Foundation
import ImageFixtures
@testable import Media
import Testing

/// The stored full variant is bounded, and the child a decode runs in is killed past its
/// budget (issue 48).
@Suite("Image worker and stored sizes")
struct ImageWorkerTests {
    @Test("a wide image is stored at most 4096 pixels across; the thumbnails are as before")
    func theFullVariantIsCappedInSide() throws {
        let processed = try Images.process(try Fixture.image(width: 6000, height: 1500, as: ".png"))
        #expect(processed.width == Images.maxStoredSide && processed.height == 1024, "\(processed.width)×\(processed.height)")
        #expect(try Images.header(processed.full) == ImageHeader(format: .jpeg, width: 4096, height: 1024))
        #expect(try Images.header(try #require(processed.thumbnails[800])).width == 800)
    }

    @Test("noise that PNG keeps small is not stored as tens of megabytes")
    func amplificationIsBounded() throws {
        let png = try Fixture.stripedNoise(width: 6000, height: 6000)
        #expect(png.count < 2_000_000, "the upload is small: \(png.count)")
        do {
            let processed = try Images.process(png)
            #expect(processed.full.count <= Images.maxStoredBytes, "\(processed.full.count)")
            #expect(max(processed.width, processed.height) <= Images.maxStoredSide)
        } catch {
            #expect(error.code == ImageError.tooComplex, "\(error)")
        }
    }

    /// Scripts in place of `lender`: what the worker does with a child that misbehaves. All
    /// written at once, before any is run: a script still open for writing when another test
    /// spawns its child would be inherited by that child and fail to run (ETXTBSY).
    private static let scripts: [String: String] = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("workers-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let bodies = [
            "while :; do :; done", "sleep 30", "cat >/dev/null; exit 3", "cat >/dev/null; printf 'garbage'",
            "cat >/dev/null; yes",
        ]
        var paths: [String: String] = [:]
        for (index, body) in bodies.enumerated() {
            let path = directory.appendingPathComponent("\(index).sh").path
            try! "#!/bin/sh\n\(body)\n".write(toFile: path, atomically: false, encoding: .utf8)
            try! FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
            paths[body] = path
        }
        return paths
    }()

    private func worker(_ script: String, cpuSeconds: Int = 5, timeoutMilliseconds: Int = 10_000) throws -> ImageWorker {
        ImageWorker(executable: try #require(Self.scripts[script]), cpuSeconds: cpuSeconds, timeoutMilliseconds: timeoutMilliseconds)
    }

    @Test("a child spinning on the CPU is killed at its CPU budget")
    func aSpinningChildIsKilledAtItsBudget() throws {
        let spinning = try worker("while :; do :; done", cpuSeconds: 1, timeoutMilliseconds: 20_000)
        let started = ContinuousClock.now
        let code = Fixture.code { try spinning.process([1, 2, 3]) }
        #expect(code == ImageError.tooComplex)
        #expect(ContinuousClock.now - started < .seconds(10), "killed by RLIMIT_CPU, not the deadline")
    }

    @Test("a child that waits without computing is killed at the deadline, its input unread")
    func aWaitingChildIsKilledAtTheDeadline() throws {
        let waiting = try worker("sleep 30", timeoutMilliseconds: 300)
        let started = ContinuousClock.now
        // More than a pipe holds: the writer must not block on a child that never reads.
        #expect(Fixture.code { try waiting.process([UInt8](repeating: 7, count: 1 << 20)) } == ImageError.tooComplex)
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test("a child that fails, answers nonsense or cannot start is a clear refusal")
    func brokenChildren() throws {
        #expect(Fixture.code { try worker("cat >/dev/null; exit 3").process([1]) } == ImageError.undecodable)
        #expect(Fixture.code { try worker("cat >/dev/null; printf 'garbage'").process([1]) } == ImageError.unavailable)
        #expect(Fixture.code { try worker("cat >/dev/null; yes").process([1]) } == ImageError.undecodable)
        let missing = ImageWorker(executable: "/nonexistent/lender")
        #expect(Fixture.code { try missing.process([1]) } == ImageError.unavailable)
    }

    @Test("what a child writes reads back as the image, or as the refusal")
    func theWireRoundTrips() throws {
        let processed = try Images.process(try Fixture.image(width: 120, height: 90, as: ".jpg"))
        #expect(try ImageWorker.Wire.read(ImageWorker.Wire.write(.success(processed))) == processed)
        let refusal = ImageError(code: ImageError.tooManyPixels, message: "too many")
        #expect(Fixture.code { try ImageWorker.Wire.read(ImageWorker.Wire.write(.failure(refusal))) } == ImageError.tooManyPixels)
        #expect(Fixture.code { try ImageWorker.Wire.read(Array(ImageWorker.Wire.write(.success(processed)).dropLast(9))) } == ImageError.unavailable)
    }

    @Test("an upload's first twelve bytes say whether it can be an image, before the rest is read")
    func signatures() throws {
        for (suffix, format) in [(".jpg", ImageFormat.jpeg), (".png", .png), (".webp", .webp)] {
            #expect(ImageFormat(signature: try Fixture.image(width: 8, height: 8, as: suffix)) == format, "\(suffix)")
        }
        #expect(ImageFormat(signature: try Fixture.Unsupported.gif.bytes()) == nil)
        #expect(ImageFormat(signature: [UInt8](repeating: 0xFF, count: 64)) == nil)
        #expect(ImageFormat(signature: [0xFF, 0xD8, 0xFF]) == nil, "fewer than twelve bytes say nothing")
    }
}
