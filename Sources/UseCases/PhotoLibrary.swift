import Aggregates
import Crypto
import EventStore
import Foundation
import Marketplace
import Media
import NIOPosix
import Postgres
import Projections
import Synchronization

/// Photos of items, loans and profiles (SPEC §11.4): an upload is checked and cleaned by
/// decoding it (`Images`), stored in `media` by the SHA-256 of its cleaned bytes, and only
/// then named by an event. A refused command or a crash between the two leaves an image
/// nobody references, which `collectGarbage` deletes; never an event without its image.
public struct PhotoLibrary: Sendable {
    let gateway: CommandGateway
    let pool: PostgresPool

    public init(gateway: CommandGateway) {
        self.gateway = gateway
        self.pool = gateway.store.pool
    }

    /// libvips decodes on threads of its own, two at a time (a 40-megapixel photo takes
    /// 120 MB while it is decoded, more at 16 bits a sample), never on the threads Swift's
    /// tasks run on.
    static let decoding: NIOThreadPool = {
        let threads = NIOThreadPool(numberOfThreads: 2)
        threads.start()
        return threads
    }()

    /// Uploads being decoded or waiting for a thread, each holding up to 10 MiB: beyond
    /// `maxInFlight`, an upload is refused at once (503, try again) rather than queued.
    static let inFlight = Mutex(0)
    public static let maxInFlight = 8

    /// Runs `work` on the decoding threads, if there is room for one more upload.
    static func decoding<T: Sendable>(_ work: @escaping @Sendable () throws(ImageError) -> T) async throws -> T {
        let admitted = inFlight.withLock { count in
            guard count < maxInFlight else { return false }
            count += 1
            return true
        }
        guard admitted else {
            throw TryLater(
                .busy, code: "busy", detail: "Too many photos are being processed; try again in a moment.",
                retryAfterSeconds: 1)
        }
        defer { inFlight.withLock { $0 -= 1 } }
        return try await decoding.runIfActive { () throws(ImageError) -> T in try work() }
    }

    /// What an upload is, from its header alone (no pixel decoded), off Swift's threads.
    public static func header(_ bytes: [UInt8]) async throws -> ImageHeader {
        try await decoding { () throws(ImageError) -> ImageHeader in try Images.header(bytes) }
    }

    /// Checks, cleans and stores an image; its digest. Throws `ImageError` for a bad one. An
    /// image stored before is young again: `collectGarbage` spares it until its event is in.
    public func store(_ bytes: [UInt8]) async throws -> String {
        let image = try await Self.decoding { () throws(ImageError) -> ProcessedImage in try Images.process(bytes) }
        let digest = SHA256.hash(data: image.full).map { String(format: "%02x", $0) }.joined()
        var variants: [(String, [UInt8], Int, Int)] = [("full", image.full, image.width, image.height)]
        for size in Images.thumbnailSizes {
            guard let thumbnail = image.thumbnails[size] else { continue }
            let scale = Double(size) / Double(max(image.width, image.height))
            let (width, height) = scale >= 1
                ? (image.width, image.height)
                : (Int((Double(image.width) * scale).rounded()), Int((Double(image.height) * scale).rounded()))
            variants.append((String(size), thumbnail, width, height))
        }
        // One statement for the image and its thumbnails: all stored, or none.
        var insert: PostgresQuery = "INSERT INTO media (digest, variant, bytes, width, height) VALUES "
        for (index, (variant, bytes, width, height)) in variants.enumerated() {
            if index > 0 { insert.append(", ") }
            insert.append("(\(digest), \(variant), \(Data(bytes)), \(width), \(height))")
        }
        insert.append(" ON CONFLICT (digest, variant) DO UPDATE SET created_at = now()")
        try await pool.query(insert)
        return digest
    }

    /// A stored image's bytes, or nil.
    public func image(_ digest: String, variant: String) async throws -> Data? {
        guard PhotoDigest.isValid(digest) else { return nil }
        let rows = try await pool.query(
            "SELECT bytes FROM media WHERE digest = \(digest) AND variant = \(variant)", prepared: true)
        return try rows.first?.decode("bytes", as: Data.self)
    }

    /// Whether an image is stored, without reading it: what a 304 needs.
    public func hasImage(_ digest: String, variant: String) async throws -> Bool {
        guard PhotoDigest.isValid(digest) else { return false }
        return try await !pool.query(
            "SELECT 1 FROM media WHERE digest = \(digest) AND variant = \(variant)", prepared: true
        ).isEmpty
    }

    // MARK: Commands

    /// Adds a photo to the actor's item. The owner is checked before the image is stored, so
    /// that a stranger's upload stores nothing; the decider checks again at the append.
    public func addToItem(_ bytes: [UInt8], item: ItemID, by actor: UserID) async throws -> AppendResult? {
        let (state, _) = try await gateway.load(.item(item), .item)
        _ = try ItemDecider.decide(.addPhoto(digest: Self.placeholder), state, actor: actor)
        let digest = try await store(bytes)
        return try await gateway.handle(.addPhoto(digest: digest), on: .item, id: item, actor: actor).append
    }

    public func removeFromItem(_ digest: String, item: ItemID, by actor: UserID) async throws -> AppendResult? {
        try await gateway.handle(.removePhoto(digest: digest), on: .item, id: item, actor: actor).append
    }

    public func addToLoan(_ bytes: [UInt8], loan: LoanID, by actor: UserID) async throws -> AppendResult? {
        let (state, _) = try await gateway.load(.loan(loan), .loan)
        _ = try LoanDecider.decide(.addPhoto(digest: Self.placeholder), state, actor: actor)
        let digest = try await store(bytes)
        return try await gateway.handle(.addPhoto(digest: digest), on: .loan, id: loan, actor: actor).append
    }

    public func removeFromLoan(_ digest: String, loan: LoanID, by actor: UserID) async throws -> AppendResult? {
        try await gateway.handle(.removePhoto(digest: digest), on: .loan, id: loan, actor: actor).append
    }

    /// Sets the profile's photo (replacing the one there), or removes it with nil; whom the
    /// user blocked (the profile's answer shows them) and the append.
    public func setProfilePhoto(_ bytes: [UInt8]?, of me: UserID) async throws -> (blocked: Set<UserID>, append: AppendResult?) {
        let digest = try await bytes.asyncMap(store)
        let handled = try await gateway.handle(.setPhoto(digest: digest), on: .user, id: me, actor: me)
        return (handled.state.blocked, handled.append)
    }

    /// A digest no stored image has: what a check before storing decides on.
    static let placeholder = String(repeating: "0", count: 64)

    // MARK: Garbage

    /// Deletes the images that no item, loan or profile shows any more, except those stored
    /// in the last `grace` (an upload whose event is still on its way). The number deleted.
    public static func collectGarbage(_ pool: PostgresPool, grace: Duration = .seconds(3600)) async throws -> Int {
        let rows = try await pool.query(
            """
            WITH shown AS (
                SELECT unnest(photos) AS digest FROM items_view
                UNION SELECT unnest(photos) FROM loans_view
                UNION SELECT photo FROM users_view WHERE photo IS NOT NULL
            ), unused AS (
                DELETE FROM media m
                WHERE m.created_at < now() - make_interval(secs => \(Double(grace.components.seconds)))
                  AND m.digest NOT IN (SELECT digest FROM shown)
                RETURNING digest
            )
            SELECT count(DISTINCT digest) AS n FROM unused
            """)
        return try rows.first?.decode("n", as: Int.self) ?? 0
    }
}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async throws -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
