import EventStore
import Foundation
import Postgres

/// The `photos` column of a view whose rows have photos: each digest once, in the order added.
struct Gallery {
    /// The view and its key column: names of ours, never input.
    let table: String
    let key: String

    static let items = Gallery(table: "items_view", key: "item_id")
    static let loans = Gallery(table: "loans_view", key: "loan_id")

    func add(_ digest: String, to id: UUID?, _ event: ProjectedEvent) -> PostgresQuery {
        """
        UPDATE \(unsafeRaw: table) SET photos = array_append(photos, \(digest)), updated_at = \(event.recordedAt),
               position = \(event.position)
        WHERE \(unsafeRaw: key) = \(id) AND NOT \(digest) = ANY (photos)
        """
    }

    func remove(_ digest: String, from id: UUID?, _ event: ProjectedEvent) -> PostgresQuery {
        """
        UPDATE \(unsafeRaw: table) SET photos = array_remove(photos, \(digest)), updated_at = \(event.recordedAt),
               position = \(event.position)
        WHERE \(unsafeRaw: key) = \(id)
        """
    }

    /// `add`'s rule on photos held in memory (a build): whether the row changes, which it
    /// does not for a digest already there.
    static func add(_ digest: String, to photos: inout [String]) -> Bool {
        guard !photos.contains(digest) else { return false }
        photos.append(digest)
        return true
    }

    /// `remove`'s rule on photos held in memory: every copy goes, and the row changes even
    /// when there was none.
    static func remove(_ digest: String, from photos: inout [String]) {
        photos.removeAll { $0 == digest }
    }
}
