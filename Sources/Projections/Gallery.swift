import EventStore
import Foundation
import Postgres

/// The `photos` column of a view whose rows have photos: each digest once, in the order added.
enum Gallery {
    /// A digest added: whether the row changes, which it does not for a digest already there.
    static func add(_ digest: String, to photos: inout [String]) -> Bool {
        guard !photos.contains(digest) else { return false }
        photos.append(digest)
        return true
    }

    /// A digest removed: every copy goes, and the row changes even when there was none.
    static func remove(_ digest: String, from photos: inout [String]) {
        photos.removeAll { $0 == digest }
    }
}
