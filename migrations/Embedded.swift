import Foundation
import Postgres

/// The schema's migrations, built into the binary as resources (`Package.swift` lists every
/// `NNNN_name.sql` here), so that `lender migrate` works from any folder with no checkout.
public enum EmbeddedMigrations {
    public static func load() throws -> [Migration] {
        guard let directory = Bundle.module.resourcePath else {
            throw MigrationError.unreadableDirectory("the migrations built into this binary")
        }
        return try Migration.load(from: directory)
    }
}
