import Aggregates
import Crypto
import EventStore
import Foundation
import Hummingbird
import Media
import HummingbirdTesting
import Logging
import Marketplace
import Postgres
import Projections
import Server
import Synchronization
import TestSupport
import UseCases

/// The card fingerprint key of every test server.
public let testCardSecret = Data("lender-tests-card-fingerprint-secret".utf8)

/// The master key of every test server and of the `lender` processes tests run.
public let testMasterKeyLine = "bGVuZGVyLXRlc3RzLW1hc3Rlci1rZXktMzItYnl0ZXM="
public let testMasterKeys = try! MasterKeys(text: testMasterKeyLine)

/// A file holding `testMasterKeyLine`, for `DATA_KEY_FILE`.
public let testMasterKeyFile: String = {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("lender-test-data-keys-\(getpid())").path
    FileManager.default.createFile(atPath: path, contents: Data((testMasterKeyLine + "\n").utf8))
    return path
}()

/// The personal data of an event store on `pool`, with the tests' master key.
public func testPersonalData(_ pool: PostgresPool) -> PersonalData {
    PersonalData(keys: DataKeys(pool: pool, masters: testMasterKeys), fields: lenderPersonalFields)
}

/// The application on a migrated database of its own, as the server runs (role lender_app,
/// bcrypt at its cheapest), with a superuser pool on the side for looking behind it.
public func withServer(
    logger: Logger = TestDatabase.logger, testing: TestingSetup = .router, heartbeat: Duration = .seconds(15),
    writeLimits: WriteLimits = .unlimited, allowedOrigins: Set<String> = [],
    today: @escaping @Sendable () -> Day = { fixtureDay }, media: MediaSettings = testMedia,
    checkpointKey: Curve25519.Signing.PublicKey? = nil,
    _ test: @escaping @Sendable (any TestClientProtocol, PostgresPool) async throws -> Void
) async throws {
    try await TestDatabase.withMigrated { configuration in
        var server = configuration
        server.role = "lender_app"
        let pool = PostgresPool(configuration: server, options: .init(size: 4), logger: TestDatabase.logger)
        let migrator = try Migrator(directory: TestDatabase.migrationsDirectory, logger: TestDatabase.logger)
        let application = buildApplication(
            configuration: ServerConfiguration(host: "127.0.0.1", port: 0), pool: pool, migrator: migrator,
            logger: logger, payments: try .sandbox(secret: testCardSecret), bcryptCost: 4, heartbeat: heartbeat,
            writeLimits: writeLimits, allowedOrigins: allowedOrigins, masterKeys: testMasterKeys, today: today,
            media: media, checkpointKey: checkpointKey)
        let admin = try TestDatabase.adminConfiguration().database(configuration.database)
        try await TestDatabase.withPool(admin, size: 1) { adminPool in
            try await application.test(testing) { client in try await test(client, adminPool) }
        }
    }
}

/// Photos decoded as a server decodes them: in a child, the built `lender media decode`.
public let testMedia = MediaSettings(worker: testImageWorker)
public let testImageWorker = ImageWorker(executable: root.appendingPathComponent(".build/debug/lender").path)

/// Accounts over a test database of their own, as the server runs them (lender_app).
public func withAccounts(
    passwords: PasswordHasher = PasswordHasher(cost: 4), _ body: @escaping @Sendable (Accounts) async throws -> Void
) async throws {
    try await TestDatabase.withMigrated { configuration in
        var server = configuration
        server.role = "lender_app"
        try await TestDatabase.withPool(server, size: 4) { pool in
            let store = EventStore(
                pool: pool, logger: TestDatabase.logger, projections: lenderProjections, personalData: testPersonalData(pool))
            let gateway = CommandGateway(store: store, logger: TestDatabase.logger)
            try await body(Accounts(pool: pool, gateway: gateway, passwords: passwords))
        }
    }
}

/// A migrated database of its own, its owner's URL, and a superuser pool on it: for tests
/// that run the server as a process.
public func withServerDatabase(_ body: @escaping @Sendable (PostgresConfiguration, PostgresPool) async throws -> Void)
    async throws
{
    try await TestDatabase.withMigrated { configuration in
        let admin = try TestDatabase.adminConfiguration().database(configuration.database)
        try await TestDatabase.withPool(admin, size: 1) { adminPool in try await body(configuration, adminPool) }
    }
}

/// The test database as its owner sees it: what `lender replay` and the audits run as.
public func ownerURL(_ admin: PostgresPool) async throws -> PostgresConfiguration {
    let name = try await admin.query("SELECT current_database() AS d").single().decode("d", as: String.self)
    return try TestDatabase.ownerConfiguration().database(name)
}

/// How many events the log holds.
public func eventCount(_ admin: PostgresPool) async throws -> Int {
    try await admin.query("SELECT count(*) AS n FROM events").single().decode("n", as: Int.self)
}


/// The day an in-process test server decides on, unless a test gives its own clock: the
/// fixtures' dates (rentals for December 2026) stay ahead of it whenever the suite runs.
public let fixtureDay = Day("2026-11-28")!

/// The jobs as the server runs them, on `day`, in process. (`lender jobs run --as-of` refuses
/// a day before the machine's own: a fixed day in a test would fail once the calendar passes it.)
public func runJobs(_ admin: PostgresPool, on day: String) async throws -> JobsReport {
    let store = EventStore(
        pool: admin, logger: TestDatabase.logger, projections: lenderProjections, personalData: testPersonalData(admin))
    let gateway = CommandGateway(store: store, logger: TestDatabase.logger)
    let processor = try PaymentsSetup.sandbox(secret: testCardSecret).makeProcessor(admin)
    return try await Jobs(commands: ItemCommands(gateway: gateway, processor: processor)).run(today: Day(day)!, now: Date())
}

/// A clock the test moves: a server given `today` decides on `day`, `fixtureDay` at first.
public final class TestClock: Sendable {
    let day = Mutex(fixtureDay)
    public init() {}
    public var today: @Sendable () -> Day { { self.day.withLock { $0 } } }
    public func set(_ text: String) { day.withLock { $0 = Day(text)! } }

    /// `body` on `text`, then the clock back where it was: days passing for one step of a test
    /// that goes on with the fixture's days.
    public func on<T>(_ text: String, _ body: () async throws -> T) async rethrows -> T {
        let before = today()
        set(text)
        defer { day.withLock { $0 = before } }
        return try await body()
    }
}

/// A day `days` from today (UTC), as `YYYY-MM-DD`.
public func dayFromToday(_ days: Int) -> String {
    Day(Date().addingTimeInterval(Double(days) * 86_400)).description
}
