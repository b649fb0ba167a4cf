import Aggregates
import EventStore
import Foundation
import Logging
import Postgres
import Synchronization

/// Rebuilds views from the log alone into a schema of their own, in batches of events, each
/// batch one transaction on one connection with the projections' prepared statements. Then
/// it can swap them in for the live views, compare them with the live views, or leave them
/// for investigation. Run as the owner of the views (it creates and moves tables).
public struct ViewRebuilder: Sendable {
    public let pool: PostgresPool
    public let groups: [ViewGroup]
    public let logger: Logger
    /// Events a batch. Batches of 20,000 built 1.08M events faster in one series (19.8 s
    /// against 23.3 s) and not in the next (medians 24.0 s against 24.7 s), and took 113 MB
    /// against 68 MB.
    public var batchSize = 5000
    /// Opens personal fields before projecting, as the appending server saw them; without it
    /// they read as a forgotten person's (`lender replay` always has it).
    public let personalData: PersonalData?

    public init(pool: PostgresPool, groups: [ViewGroup], logger: Logger, personalData: PersonalData? = nil) {
        self.pool = pool
        self.groups = groups
        self.logger = logger
        self.personalData = personalData
    }

    var tables: [String] { groups.flatMap(\.tables) }
    var projections: [any InlineProjection] { groups.flatMap(\.projections) }

    /// A fresh schema name for a rebuild: `rebuild_<time>_<random>`.
    public static func temporarySchema() -> String {
        "rebuild_\(Int(Date().timeIntervalSince1970))_\(UInt32.random(in: 0...UInt32.max))"
    }

    /// The columns the projections find rows by while rebuilding, beside keys (but those of
    /// `keysAfterRows`, in a build from the first event): the indexes
    /// that lead with them are kept while a rebuild writes. Others wait for the end of the
    /// build (`build`), which measured 15% faster without them. A column missing here makes a
    /// rebuild scan its table for each lookup: never wrong, but slow on a large log. (The
    /// market's cells read items by `map_x`, but only once a rebuild is finished. No projection
    /// reads bids by item: the feed finds a bid by its key; its index by item, kept until the
    /// bids went by COPY, cost 0.4 s of a 1.04M-event build in index entries.)
    /// (The items' owners, the loans' borrowers and the cards' users serve a catch-up's
    /// forgetting: a build from the first event holds those rows in memory and writes them
    /// at its end.)
    static let lookups: [String: Set<String>] = [
        "items_view": ["owner_id"], "bids_view": ["bidder_id"], "reviews_view": ["author_id"],
        "messages_view": ["author_id"], "loans_view": ["borrower_id"], "cards_view": ["user_id"],
        // A catch-up's: a second release's closing completes its rental's booking, found by item; a forgotten
        // party's words on a claim or a dispute are found by party.
        "bookings_view": ["item_id", "owner_id", "renter_id"],
        // A forgotten reporter's words, found by reporter.
        "reports_view": ["reporter_id"],
    ]

    /// The tables a build from the first event writes by COPY and finds no row of by its key
    /// (the feed's forgotten users' notices are deleted once at its end): it drops their
    /// primary keys before its first batch and makes them at its end with the indexes, over
    /// all the rows, where keeping them row by row cost the feed's 433,800 rows 1,091 ms
    /// against 332 ms and 180 ms (the built tables, by hand). A schema `createSchema` made
    /// keeps them, for a catch-up. Not the bids': a bid decided after the batch that copied it
    /// is updated by key (`ItemsProjection`'s late fates).
    static let keysAfterRows: Set<String> = ["feed_view"]

    static func dropKeysAfterRows(_ session: inout PostgresSession, _ schema: String, _ tables: [String]) throws {
        let drops = try session.query(
            """
            SELECT format('ALTER TABLE %I.%I DROP CONSTRAINT %I', \(schema), c.relname, k.conname) AS statement
            FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = \(schema) AND c.relname = ANY (\(tables.filter(Self.keysAfterRows.contains))) AND k.contype = 'p'
            """)
        for drop in drops { _ = try session.query(PostgresQuery(unsafeSQL: try drop.decode("statement", as: String.self))) }
    }

    /// Creates `schema` with an empty copy of each table: columns, defaults, generated
    /// columns, constraints and indexes (but those `build` makes at its end); and the
    /// server's grants.
    public func createSchema(_ schema: String) async throws {
        guard schema.range(of: "^[a-z][a-z0-9_]{0,62}$", options: .regularExpression) != nil else {
            throw RebuildError.invalidSchemaName(schema)
        }
        let exists = try await pool.query("SELECT 1 FROM pg_namespace WHERE nspname = \(schema)")
        guard exists.isEmpty else { throw RebuildError.schemaExists(schema) }
        try await pool.withConnection { connection in
            try await connection.withBlockingSession { session in
                try session.withTransaction { session in
                    _ = try session.query("CREATE SCHEMA \(unsafeRaw: schema)")
                    for table in tables {
                        _ = try session.query(
                            "CREATE TABLE \(unsafeRaw: schema).\(unsafeRaw: table) (LIKE public.\(unsafeRaw: table) INCLUDING ALL)")
                        _ = try session.query(
                            "GRANT SELECT, INSERT, UPDATE, DELETE ON \(unsafeRaw: schema).\(unsafeRaw: table) TO lender_app")
                        // Not an index a constraint stands on (an exclusion constraint's is not unique).
                        let deferred = try session.query(
                            """
                            SELECT format('DROP INDEX %I.%I', \(schema), c.relname) AS statement FROM pg_index i
                            JOIN pg_class c ON c.oid = i.indexrelid
                            LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                            WHERE i.indrelid = \("\(schema).\(table)")::regclass AND NOT i.indisunique
                              AND NOT EXISTS (SELECT FROM pg_constraint k WHERE k.conindid = i.indexrelid)
                              AND coalesce(a.attname <> ALL (\(Array(Self.lookups[table] ?? []))), true)
                            """)
                        for index in deferred {
                            _ = try session.query(PostgresQuery(unsafeSQL: try index.decode("statement", as: String.self)))
                        }
                    }
                    _ = try session.query("GRANT USAGE ON SCHEMA \(unsafeRaw: schema) TO lender_app")
                }
            }
        }
    }

    /// Applies the events after `position` up to `until` (the head when nil) to the tables
    /// in `schema`; returns the last position applied. `progress(done, target)` after each batch.
    ///
    /// Three connections of the pool, so that the rebuilder's work and PostgreSQL's overlap:
    /// one sends a batch's statements while another makes the next batch's (`recording`) and
    /// a third reads, opens and decodes the batch after that. The recording is a fold, one
    /// batch after another; the decoding, a third of its work before, is not. With two
    /// connections the reading waits for the recording's, and a build takes longer (a batch
    /// recorded for longer than the pool's acquire timeout would fail the read; one of 5,000
    /// events takes tens of milliseconds); with one, the reading waits for that timeout and
    /// fails. `lender replay` and the bench open three. When the writing fails, the batches
    /// being read and recorded are waited for before the error is thrown. A catch-up (after a
    /// `position` past 0) applies each batch on the writer, as the appends do: its projections
    /// read the rows the batch before wrote.
    public func build(
        _ schema: String, after position: Int64, until: Int64? = nil,
        progress: @escaping @Sendable (Int64, Int64) -> Void = { _, _ in }
    ) async throws -> Int64 {
        let head = try await pool.query("SELECT position FROM log_head").single().decode("position", as: Int64.self)
        let target = min(until ?? head, head)
        let projections = projections
        let tables = tables
        // A table missing here would be found in `public` by the batches' `search_path`, and
        // the build would write the live view.
        let missing = try await pool.query(
            """
            SELECT t FROM unnest(\(tables)::text[]) AS t
            WHERE to_regclass(format('%I.%I', \(schema), t)) IS NULL ORDER BY t
            """
        ).map { try $0.decode("t", as: String.self) }
        guard missing.isEmpty else { throw RebuildError.tablesMissing(schema: schema, missing) }
        let (pool, personalData, batchSize) = (pool, personalData, batchSize)
        // A build from the first event may leave work for its end (`finishRebuild`); one that
        // catches an existing build up applies its events as appends do.
        let fresh = position == 0
        let memory = RebuildMemory()
        /// The batch after `position`, read, opened and decoded.
        @Sendable func fetch(after position: Int64) -> Task<[ProjectedEvent], any Error> {
            Task {
                try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        let events = try Self.readBatch(&session, personalData, after: position, until: target, limit: batchSize)
                        Self.decodeAhead(events)
                        return events
                    }
                }
            }
        }
        /// The statements that apply `events`, made in the events' order batch after batch:
        /// a build's memory is a fold. A catch-up's are made by the writer, as the appends make
        /// theirs: they read the rows the batch before wrote.
        @Sendable func record(_ events: [ProjectedEvent]) -> Task<[RecordedStatement], any Error> {
            Task {
                guard fresh else { return [] }
                return try await pool.withConnection { connection in
                    try await connection.withBlockingSession { session in
                        try session.recording { session in
                            for projection in projections { try projection.rebuild(events, &session, memory) }
                        }
                    }
                }
            }
        }
        return try await pool.withConnection { writer in
            if fresh { try await writer.withBlockingSession { session in try Self.dropKeysAfterRows(&session, schema, tables) } }
            var done = position
            var fetching = done < target ? fetch(after: done) : nil
            // Each batch recorded only once the one before it is: a build's memory is a fold.
            var recording: (last: Int64, events: [ProjectedEvent], statements: Task<[RecordedStatement], any Error>)?
            var recorded: (last: Int64, events: [ProjectedEvent], statements: [RecordedStatement])?
            do {
                while true {
                    try Task.checkCancellation()
                    if let fetched = fetching {
                        let events = try await fetched.value
                        // None left before `target`: positions may skip (a rolled-back append's).
                        let last = events.last?.position ?? target
                        fetching = last < target ? fetch(after: last) : nil
                        recording = (last, fresh ? [] : events, record(events))
                    }
                    // The batch before is sent while this one is recorded and the next one read.
                    if let batch = recorded {
                        try await writer.withBlockingSession { session in
                            try session.withTransaction { session in
                                if fresh {
                                    try Self.inSchema(schema, &session) { session in try session.pipelined(recorded: batch.statements) }
                                } else {
                                    try Self.apply(batch.events, &session, schema, projections)
                                }
                            }
                        }
                        done = batch.last
                        progress(done, target)
                    }
                    guard let next = recording else { break }
                    recorded = (next.last, next.events, try await next.statements.value)
                    recording = nil
                }
            } catch {
                // What is still reading or recording holds a connection: done with before the
                // caller drops the schema or closes the pool.
                fetching?.cancel()
                recording?.statements.cancel()
                _ = await fetching?.result
                _ = await recording?.statements.result
                throw error
            }
            let (indexes, keys) = try await writer.withBlockingSession { session in
                if fresh {
                    try session.withTransaction { session in
                        try Self.inSchema(schema, &session) { session in
                            for projection in projections { try projection.finishRebuild(&session, memory) }
                        }
                    }
                }
                return try Self.missingIndexes(&session, schema, tables)
            }
            try await Self.makeIndexes(indexes, on: writer, andOneFrom: pool)
            if !keys.isEmpty {
                try await writer.withBlockingSession { session in
                    for key in keys { _ = try session.query(PostgresQuery(unsafeSQL: key)) }
                }
            }
            return done
        }
    }

    /// The live tables' indexes that `schema`'s lack (those `createSchema` left for the end),
    /// to be made at once over the rows written: cheaper than keeping each up to date row by
    /// row. Indexes are matched by definition, since a copy's name may differ. Each is named as
    /// the live one (the migrations' name, which a later migration may drop by), or
    /// `{name}_rebuilt` where the copy's schema has that name already: built on two
    /// connections at once, two unnamed indexes on the same leading column took the same
    /// default name, and one build failed. The index of a
    /// primary key (`keysAfterRows`) is made under the live key's name, and
    /// `keys` then make it that key (`USING INDEX`, a change of the catalog alone): as one
    /// `ADD CONSTRAINT` it would lock its table against the other connection's index builds.
    static func missingIndexes(
        _ session: inout PostgresSession, _ schema: String, _ tables: [String]
    ) throws -> (indexes: [String], keys: [String]) {
        // An index's definition without its name and table: `CREATE INDEX USING btree (...)`.
        let missing = try session.query(
            """
            WITH defined AS (
                SELECT schemaname, tablename, indexname, indexdef,
                       regexp_replace(indexdef, '^(CREATE (UNIQUE )?INDEX )\\S+ ON \\S+ ', '\\1') AS shape
                FROM pg_indexes WHERE schemaname IN ('public', \(schema)) AND tablename = ANY (\(tables))
            )
            SELECT regexp_replace(p.indexdef, '^(CREATE (UNIQUE )?INDEX )\\S+ ON \\S+ ',
                                  '\\1' || quote_ident(coalesce(k.conname, CASE WHEN taken.relname IS NULL THEN p.indexname
                                                                                 ELSE left(p.indexname, 50) || '_rebuilt' END))
                                  || ' ON ' || quote_ident(\(schema)) || '.' || quote_ident(p.tablename) || ' ') AS statement,
                   CASE WHEN k.oid IS NOT NULL
                        THEN format('ALTER TABLE %I.%I ADD CONSTRAINT %I PRIMARY KEY USING INDEX %I', \(schema), p.tablename,
                                    k.conname, k.conname)
                   END AS key,
                   p.indexdef ~ '^CREATE (UNIQUE )?INDEX \\S+ ON \\S+ ' AS understood, p.indexdef
            FROM defined p
            LEFT JOIN pg_constraint k
                   ON k.conindid = format('%I.%I', p.schemaname, p.indexname)::regclass AND k.contype = 'p'
            LEFT JOIN pg_class taken
                   ON taken.relname = p.indexname AND taken.relnamespace = \(schema)::regnamespace
            WHERE p.schemaname = 'public' AND NOT EXISTS (
                SELECT FROM defined b WHERE b.schemaname = \(schema) AND b.tablename = p.tablename AND b.shape = p.shape)
            ORDER BY p.indexdef ~ ' USING (gist|gin) ' DESC, pg_relation_size(format('%I.%I', \(schema), p.tablename)) DESC
            """)
        var made: (indexes: [String], keys: [String]) = ([], [])
        for index in missing {
            // A definition the pattern does not take apart (a quoted name with a space) would
            // still name the live table: refuse it rather than build the copy without it.
            guard try index.decode("understood", as: Bool.self) else {
                throw RebuildError.indexNotUnderstood(try index.decode("indexdef", as: String.self))
            }
            made.indexes.append(try index.decode("statement", as: String.self))
            if let key = try index.decode("key", as: String?.self) { made.keys.append(key) }
        }
        return made
    }

    /// `indexes` (`missingIndexes`' statements) made on two connections at once, each taking
    /// the next when it is done: the rebuilder's own thread is idle by then, and a core with
    /// it. Two builds on one table take the same shared lock, and wait for neither. The
    /// slowest kinds come first (GiST and GIN: the items' places took 1.1 s of 1.04M events,
    /// a third of all the indexes), then the largest tables', so that neither connection is
    /// left with a long one at the end.
    static func makeIndexes(_ indexes: [String], on writer: PostgresConnection, andOneFrom pool: PostgresPool) async throws {
        let pending = IndexQueue(indexes)
        @Sendable func make(on connection: PostgresConnection) async throws {
            try await connection.withBlockingSession { session in
                while let index = pending.next() { _ = try session.query(PostgresQuery(unsafeSQL: index)) }
            }
        }
        guard indexes.count > 1 else { return try await make(on: writer) }
        /// A failure stops the other connection after the index it is making.
        @Sendable func makeOrStop(_ body: @Sendable () async throws -> Void) async throws {
            do { try await body() } catch {
                pending.drop()
                throw error
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await makeOrStop { try await make(on: writer) } }
            group.addTask { try await makeOrStop { try await pool.withConnection { try await make(on: $0) } } }
            try await group.waitForAll()
        }
    }

    /// Statements still to run, taken one at a time by whichever connection is free.
    private final class IndexQueue: Sendable {
        private let statements: Mutex<ArraySlice<String>>

        init(_ statements: [String]) { self.statements = Mutex(statements[...]) }

        func next() -> String? { statements.withLock { $0.popFirst() } }

        /// After a failure: what is left is not made.
        func drop() { statements.withLock { $0 = [] } }
    }

    /// One batch, in the caller's transaction: the events after `position` (at most `limit`,
    /// none past `until`) applied to the tables of `schema`.
    static func applyBatch(
        _ session: inout PostgresSession, _ schema: String, _ projections: [any InlineProjection],
        _ personalData: PersonalData?, after position: Int64, until: Int64, limit: Int
    ) throws -> Int64 {
        let events = try readBatch(&session, personalData, after: position, until: until, limit: limit)
        guard let last = events.last?.position else { return until }
        try apply(events, &session, schema, projections)
        return last
    }

    /// The events after `position` (at most `limit`, none past `until`), their personal
    /// fields opened.
    static func readBatch(
        _ session: inout PostgresSession, _ personalData: PersonalData?, after position: Int64, until: Int64, limit: Int
    ) throws -> [ProjectedEvent] {
        let events = try session.query(
            """
            SELECT \(unsafeRaw: EventStore.projectedColumns) FROM events
            WHERE position > \(position) AND position <= \(until) ORDER BY position LIMIT \(limit)
            """, prepared: true
        ).map(EventStore.projectedEvent)
        guard let personalData, !events.isEmpty else { return events }
        return try personalData.open(events, in: &session)
    }

    /// Each event decoded by its aggregate's codec and kept beside it (`ProjectedEvent.decoded`),
    /// where the projections find it: a batch's decoding moved off the thread that records its
    /// statements, whose work is a fold and cannot be split. An event that does not decode is
    /// left as it is, to fail where a projection reads it.
    static func decodeAhead(_ events: [ProjectedEvent]) {
        for event in events {
            if Aggregate.item.owns(event.streamID) {
                _ = try? Aggregate.item.codec.decode(event)
            } else if Aggregate.user.owns(event.streamID) {
                _ = try? Aggregate.user.codec.decode(event)
            } else if Aggregate.loan.owns(event.streamID) {
                _ = try? Aggregate.loan.codec.decode(event)
            } else if Aggregate.cart.owns(event.streamID) {
                _ = try? Aggregate.cart.codec.decode(event)
            }
        }
    }

    /// `events` applied to the tables of `schema`, in the caller's transaction.
    static func apply(
        _ events: [ProjectedEvent], _ session: inout PostgresSession, _ schema: String, _ projections: [any InlineProjection]
    ) throws {
        guard !events.isEmpty else { return }
        try inSchema(schema, &session) { session in try InlineProjections.apply(projections, events, &session) }
    }

    /// `body` with the projections' unqualified tables `schema`'s, in the caller's transaction,
    /// and their statements planned with each batch's values.
    ///
    /// A rebuild's tables start empty and without statistics. A generic plan made then (after
    /// a statement's fifth run, or when the session wants one always) is a plan for empty
    /// tables, kept as they grow. In batches of 1,500 events, the updates of users, loans and
    /// loan shares and the completed deals took 3–10 ms a batch each, whatever its size: a
    /// build of 1.08M events took 47–64 s, and 25 s planned with the values
    /// (`pg_stat_statements`). In batches of 5,000 the plans happened to be good; planning
    /// with the values costs 0.3–0.7 s of such a build.
    /// The mode before is put back after, for a caller's transaction that goes on (a swap's,
    /// a comparison's); a failed body leaves an aborted transaction, whose end undoes both.
    static func inSchema(_ schema: String, _ session: inout PostgresSession, _ body: (inout PostgresSession) throws -> Void) throws {
        // Read before it is set: the CTE's row is made before the select list's calls.
        let previous = try session.query(
            """
            WITH before AS MATERIALIZED (SELECT current_setting('plan_cache_mode') AS mode)
            SELECT mode, set_config('search_path', \(schema + ", public"), true),
                   set_config('plan_cache_mode', 'force_custom_plan', true)
            FROM before
            """
        ).single().decode("mode", as: String.self)
        defer {
            _ = try? session.query(
                "SELECT set_config('search_path', 'public', true), set_config('plan_cache_mode', \(previous), true)")
        }
        try body(&session)
    }

    public func dropSchema(_ schema: String) async throws {
        _ = try await pool.query("DROP SCHEMA IF EXISTS \(unsafeRaw: schema) CASCADE")
    }
}

/// Every inline view, in the order they are applied: what each append brings up to date in
/// its own transaction.
public let lenderProjections: [any InlineProjection] = ViewGroup.all.flatMap(\.projections)
