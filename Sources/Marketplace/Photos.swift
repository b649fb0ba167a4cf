// Photos (SPEC §11.4): the image lives outside the log, content-addressed by the SHA-256 of
// its stored bytes; the log records which digest belongs to which item, loan or profile.

/// The hex SHA-256 of a stored image: 64 lower-case hex digits.
public enum PhotoDigest {
    public static func isValid(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

public struct ItemPhotoAdded: EventBody, Hashable {
    public static let eventType = "ItemPhotoAdded"
    public var digest: String
    public init(digest: String) { self.digest = digest }
}

public struct ItemPhotoRemoved: EventBody, Hashable {
    public static let eventType = "ItemPhotoRemoved"
    public var digest: String
    public init(digest: String) { self.digest = digest }
}

/// A borrower's picture is often of themselves: the digest is sealed, and nil once they are
/// forgotten (their loans then show no photo).
public struct LoanPhotoAdded: EventBody, Hashable {
    public static let eventType = "LoanPhotoAdded"
    public var digest: String?
    public init(digest: String) { self.digest = digest }
}

public struct LoanPhotoRemoved: EventBody, Hashable {
    public static let eventType = "LoanPhotoRemoved"
    public var digest: String?
    public init(digest: String) { self.digest = digest }
}

/// A profile's one photo, set or (nil) removed. A face is personal: the digest is sealed.
public struct ProfilePhotoChanged: EventBody, Hashable {
    public static let eventType = "ProfilePhotoChanged"
    public var digest: String?
    public init(digest: String?) { self.digest = digest }
}

/// The rules every gallery shares: at most `maxPerGallery`, each digest once.
public enum Photos {
    public static let maxPerGallery = 8

    /// Whether adding `digest` changes the gallery: not when it is there already (a repeat).
    public static func adding(_ digest: String, to photos: [String]) throws -> Bool {
        try checkDigest(digest)
        if photos.contains(digest) { return false }
        guard photos.count < maxPerGallery else {
            throw DomainError(.conflict, "too_many_photos", "At most \(maxPerGallery) photos; remove one first.")
        }
        return true
    }

    public static func removing(_ digest: String, from photos: [String]) throws {
        guard photos.contains(digest) else { throw DomainError(.notFound, "photo_not_found", "No such photo here.") }
    }

    static func checkDigest(_ digest: String) throws {
        guard PhotoDigest.isValid(digest) else {
            throw DomainError.invalid([FieldError(field: "digest", code: "invalid_digest", message: "a hex SHA-256")])
        }
    }
}
