import Foundation
import Postgres

/// The schema's migrations, built with the binary as its resources (`Package.swift` lists every
/// `NNNN_name.sql` here): SwiftPM puts them in `lender_Migrations.resources` beside the
/// executable, so `lender migrate` works from any folder, with no checkout. A deployed binary
/// takes that folder along.
public enum EmbeddedMigrations {
    static let folder = "lender_Migrations.resources"

    public static func load() throws -> [Migration] {
        // Found by hand rather than through `Bundle.module`, whose accessor stops the process
        // when the folder is missing: here that is an error saying what to do.
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for directory in [executable, Bundle.main.bundleURL, Bundle.main.resourceURL].compactMap(\.self) {
            let candidate = directory.appendingPathComponent(folder).path
            if FileManager.default.fileExists(atPath: candidate) { return try Migration.load(from: candidate) }
        }
        throw MigrationError.unreadableDirectory(
            "\(folder) beside the executable (deploy it with the binary, or pass --migrations DIR)")
    }
}
