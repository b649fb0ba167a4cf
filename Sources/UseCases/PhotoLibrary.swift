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
    /// Where uploads are decoded: a child process with a CPU budget (a server), or this
    /// process (nil: the library's own tests and tools).
    let worker: ImageWorker?
    /// The bytes of stored images (every variant) one user may have uploaded.
    let quotaBytes: Int
    /// Where images are read for serving: a small pool of their own, so that readers of large
    /// images never wait on, or hold, the connections commands need (issue 48: 24 anonymous
    /// readers took a signed-in user's market read to 13.7 s).
    let reads: PostgresPool

    /// A gigabyte: a few hundred listings' photos at the stored variants' sizes.
    public static let defaultQuotaBytes = 1 << 30

    public init(
        gateway: CommandGateway, worker: ImageWorker? = nil, quotaBytes: Int = PhotoLibrary.defaultQuotaBytes,
        reads: PostgresPool? = nil
    ) {
        self.gateway = gateway
        self.pool = gateway.store.pool
        self.worker = worker
        self.quotaBytes = quotaBytes
        self.reads = reads ?? gateway.store.pool
    }

    /// libvips decodes on threads of its own, two at a time (a 40-megapixel photo takes
    /// 120 MB while it is decoded, more at 16 bits a sample), never on the threads Swift's
    /// tasks run on.
    static let decoding: NIOThreadPool = {
        let threads = NIOThreadPool(numberOfThreads: 2)
        threads.start()
        return threads
    }()

    /// Uploads being received, decoded or waiting for a thread, each holding up to 10 MiB:
    /// beyond `maxInFlight`, an upload is refused before its body is read (503, try again)
    /// rather than queued.
    /// One user holds at most `maxInFlightPerUser` of them: eight accounts trickling bodies
    /// must not hold every slot (review of issue 48).
    static let inFlight = Mutex((total: 0, byUser: [UserID: Int]()))
    public static let maxInFlight = 8
    public static let maxInFlightPerUser = 2

    /// One upload's place among those in flight, given back when it is dropped.
    public final class Slot: Sendable {
        let user: UserID

        init(_ user: UserID) { self.user = user }

        deinit {
            PhotoLibrary.inFlight.withLock { state in
                state.total -= 1
                let left = state.byUser[user, default: 1] - 1
                state.byUser[user] = left > 0 ? left : nil
            }
        }
    }

    /// A slot for one more upload by `user`, or 503 `busy` (429 `too_many_uploads` when it is
    /// theirs that are in flight).
    public static func admit(_ user: UserID) throws -> Slot {
        enum Refusal { case none, full, theirs }
        let refusal = inFlight.withLock { state -> Refusal in
            guard state.total < maxInFlight else { return .full }
            guard state.byUser[user, default: 0] < maxInFlightPerUser else { return .theirs }
            state.total += 1
            state.byUser[user, default: 0] += 1
            return .none
        }
        switch refusal {
        case .none: return Slot(user)
        case .theirs:
            throw TryLater(
                .tooManyAttempts, code: "too_many_uploads",
                detail: "At most \(maxInFlightPerUser) of your photos at once; try again when one is done.", retryAfterSeconds: 1)
        case .full:
            throw TryLater(
                .busy, code: "busy", detail: "Too many photos are being processed; try again in a moment.",
                retryAfterSeconds: 1)
        }
    }

    /// Runs `work` on the decoding threads (two: the uploads admitted wait their turn there).
    static func decoding<T: Sendable>(_ work: @escaping @Sendable () throws(ImageError) -> T) async throws -> T {
        try await decoding.runIfActive { () throws(ImageError) -> T in try work() }
    }

    /// What an upload is, from its header alone (no pixel decoded), off Swift's threads.
    public static func header(_ bytes: [UInt8]) async throws -> ImageHeader {
        try await decoding { () throws(ImageError) -> ImageHeader in try Images.header(bytes) }
    }

    /// Checks, cleans and stores an image `owner` uploads; its digest. Throws `ImageError` for
    /// a bad one, 409 `storage_quota_exceeded` past the owner's quota. An image stored before
    /// is young again: `collectGarbage` spares it until its event is in.
    public func store(_ bytes: [UInt8], by owner: UserID) async throws -> String {
        // A full quota refuses before the decode is spent.
        let used = try await usedBytes(by: owner)
        if used >= quotaBytes { throw quotaExceeded(used) }
        let worker = worker
        let image = try await Self.decoding { () throws(ImageError) -> ProcessedImage in
            if let worker { return try worker.process(bytes) }
            return try Images.process(bytes)
        }
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
        // One statement for the image and its thumbnails: all stored, or none; and only within
        // the quota, unless the image is stored already (then nothing more is stored). Uploads
        // in flight at once may pass the quota together: by at most `maxInFlight` images.
        let total = variants.reduce(0) { $0 + $1.1.count }
        var insert: PostgresQuery = "INSERT INTO media (digest, variant, bytes, width, height, owner_id) SELECT * FROM (VALUES "
        for (index, (variant, bytes, width, height)) in variants.enumerated() {
            if index > 0 { insert.append(", ") }
            insert.append(
                "(\(digest)::text, \(variant)::text, \(Data(bytes))::bytea, \(width)::int, \(height)::int, \(owner.rawValue)::uuid)")
        }
        insert.append(
            """
            ) AS v WHERE EXISTS (SELECT 1 FROM media WHERE digest = \(digest))
                OR (SELECT coalesce(sum(size), 0) FROM media WHERE owner_id = \(owner.rawValue)) + \(total)::bigint <= \(quotaBytes)::bigint
            ON CONFLICT (digest, variant) DO UPDATE SET created_at = now()
            RETURNING 1 AS stored
            """)
        if try await pool.query(insert).isEmpty { throw quotaExceeded(try await usedBytes(by: owner)) }
        return digest
    }

    /// The bytes of the images `owner` uploaded that are still stored.
    public func usedBytes(by owner: UserID) async throws -> Int {
        try await pool.query("SELECT coalesce(sum(size), 0)::bigint AS used FROM media WHERE owner_id = \(owner.rawValue)")
            .single().decode("used", as: Int.self)
    }

    private func quotaExceeded(_ used: Int) -> DomainError {
        DomainError(
            .conflict, "storage_quota_exceeded",
            "Your photos take \(used / 1_048_576) MiB of your \(quotaBytes / 1_048_576) MiB; remove some to add more.")
    }

    /// The bytes of a stored image read at once: larger ones are read a chunk at a time, each
    /// chunk a short statement, so that no connection waits on a slow reader and no response
    /// holds a whole image in memory.
    public static let chunkBytes = 256 * 1024

    /// A stored image's size and its first `chunkBytes`, or nil.
    public func openImage(_ digest: String, variant: String) async throws -> (size: Int, first: Data)? {
        guard PhotoDigest.isValid(digest) else { return nil }
        let rows = try await reads.query(
            """
            SELECT octet_length(bytes) AS size, substring(bytes FROM 1 FOR \(Self.chunkBytes)::int) AS first
            FROM media WHERE digest = \(digest) AND variant = \(variant)
            """, prepared: true)
        guard let row = rows.first else { return nil }
        return (try row.decode("size", as: Int.self), try row.decode("first", as: Data.self))
    }

    /// `count` bytes of a stored image from `offset` (0 first), or nil if it is gone.
    public func imageChunk(_ digest: String, variant: String, from offset: Int, count: Int) async throws -> Data? {
        let rows = try await reads.query(
            """
            SELECT substring(bytes FROM \(offset + 1)::int FOR \(count)::int) AS chunk
            FROM media WHERE digest = \(digest) AND variant = \(variant)
            """, prepared: true)
        return try rows.first?.decode("chunk", as: Data.self)
    }

    /// Whether an image is stored, without reading it: what a 304 needs.
    public func hasImage(_ digest: String, variant: String) async throws -> Bool {
        guard PhotoDigest.isValid(digest) else { return false }
        return try await !reads.query(
            "SELECT 1 FROM media WHERE digest = \(digest) AND variant = \(variant)", prepared: true
        ).isEmpty
    }

    // MARK: Commands

    /// Adds a photo to the actor's item. The owner is checked before the image is stored, so
    /// that a stranger's upload stores nothing; the decider checks again at the append.
    public func addToItem(_ bytes: [UInt8], item: ItemID, by actor: UserID) async throws -> AppendResult? {
        let (state, _) = try await gateway.load(.item(item), .item)
        _ = try ItemDecider.decide(.addPhoto(digest: Self.placeholder), state, actor: actor)
        let digest = try await store(bytes, by: actor)
        return try await gateway.handle(.addPhoto(digest: digest), on: .item, id: item, actor: actor).append
    }

    public func removeFromItem(_ digest: String, item: ItemID, by actor: UserID) async throws -> AppendResult? {
        try await gateway.handle(.removePhoto(digest: digest), on: .item, id: item, actor: actor).append
    }

    public func addToLoan(_ bytes: [UInt8], loan: LoanID, by actor: UserID) async throws -> AppendResult? {
        let (state, _) = try await gateway.load(.loan(loan), .loan)
        _ = try LoanDecider.decide(.addPhoto(digest: Self.placeholder), state, actor: actor)
        let digest = try await store(bytes, by: actor)
        return try await gateway.handle(.addPhoto(digest: digest), on: .loan, id: loan, actor: actor).append
    }

    public func removeFromLoan(_ digest: String, loan: LoanID, by actor: UserID) async throws -> AppendResult? {
        try await gateway.handle(.removePhoto(digest: digest), on: .loan, id: loan, actor: actor).append
    }

    /// Sets the profile's photo (replacing the one there), or removes it with nil; whom the
    /// user blocked (the profile's answer shows them) and the append.
    public func setProfilePhoto(_ bytes: [UInt8]?, of me: UserID) async throws -> (blocked: Set<UserID>, append: AppendResult?) {
        let digest = try await bytes.asyncMap { try await store($0, by: me) }
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
