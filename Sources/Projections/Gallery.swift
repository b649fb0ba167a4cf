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
}
