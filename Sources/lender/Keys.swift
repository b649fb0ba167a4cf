import ArgumentParser
import EventStore
import Foundation
import Postgres

/// The master keys that wrap every person's data key (SPEC §11.3).
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Master keys for personal data (DATA_KEY_FILE).", subcommands: [NewMaster.self, RotateMaster.self])

    struct NewMaster: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a new master key file: `(umask 077; lender keys new-master > FILE)`.")

        func run() {
            print(MasterKeys.newKeyLine())
        }
    }

    struct RotateMaster: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Put a new master key first in DATA_KEY_FILE and rewrap every data key with it.",
            discussion: """
                The old keys stay in the file, below the new one, so servers still running on the \\
                old file keep working (they read the file again when they meet the new key). Once \\
                every server has restarted, the old lines may be removed.
                """)
        @OptionGroup var database: DatabaseOptions

        func run() async throws {
            let logger = Logs.bootstrap()
            let file = try DataKeyOptions.file()
            let old = try String(contentsOfFile: file, encoding: .utf8)
            let text = MasterKeys.newKeyLine() + "\n" + old
            let masters = try MasterKeys(text: text, source: file)
            // The file first: a crash after it leaves keys wrapped by a master the file still holds.
            try Data(text.utf8).write(to: URL(fileURLWithPath: file), options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
            try await database.withPool(logger: logger) { pool in
                let count = try await DataKeys(pool: pool, masters: masters).rewrapAll()
                print("Rewrapped \(count) data keys under master key \(masters.currentID).")
            }
        }
    }
}
