@testable import Audit
import Foundation
import Testing

/// Migration 0006 (cheaper index work per audit row) on a database a relay
/// has been writing to, and a relay from before it (a rollback) against the
/// migrated schema.
@Suite("Audit schema: migration 0006")
struct AuditInsertCostMigrationTests {
    static let beforeMigration6 = Migration.all.filter { $0.version < 6 }

    /// A database with `migrations` applied and partitions for EventFactory's day (22 Nov 2025) and those around it.
    static func database(_ migrations: [Migration]) throws -> TestDatabase {
        let database = try TestDatabase.migrated(migrations)
        _ = try database.connect().execute("SELECT apns_audit_ensure_partitions(date '2025-11-21', 3)")
        return database
    }

    @Test("on a database with rows: rows kept, the primary key as before, look-ups by hash, slow sends in their own index")
    func migratesExistingDatabase() async throws {
        let database = try Self.database(Self.beforeMigration6)
        defer { database.drop() }
        let events = (0..<1_000).map { EventFactory.event($0) }
        // A relay of row format 2: this database has no apns_timestamp yet (0012).
        var older = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "old")
        older.rowLayout = .standard(upTo: .v2)
        let before = try AuditWriter.started(configuration: older, logger: quietLogger())
        events.forEach(before.sendFinished)
        await before.shutdown()
        #expect(before.statistics.written == 1_000)
        let sums = "SELECT count(*), count(DISTINCT id), sum(latency_ms), string_agg(apns_id, ',' ORDER BY recorded_at, id) FROM apns_audit"
        let stored = try database.connect().execute(sums).rows

        // Up to 0010: 0011 replaces apns_audit_slow with apns_audit_app_latency
        // (AuditLatencyIndexMigrationTests).
        let upTo10 = Migration.all.filter { $0.version < 11 }
        let report = try Migrator(migrations: upTo10).apply(conninfo: database.conninfo)
        #expect(report.applied == upTo10.filter { $0.version >= 6 }.map(\.name))
        #expect(try database.connect().execute(sums).rows == stored, "every row kept as it was")

        let indexes = Dictionary(uniqueKeysWithValues: try database.connect().execute("""
            SELECT c.relname, pg_get_indexdef(c.oid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = 'apns_audit'::regclass
            """).rows.map { ($0[0]!, $0[1]!) })
        #expect(indexes["apns_audit_pkey"]?.hasSuffix("USING btree (id, recorded_at)") == true, "\(indexes)")
        #expect(indexes["apns_audit_time"]?.hasSuffix("USING btree (recorded_at DESC)") == true, "\(indexes)")
        #expect(indexes["apns_audit_apns_id"]?.hasSuffix("USING hash (apns_id)") == true, "\(indexes)")
        #expect(indexes["apns_audit_token"]?.hasSuffix("USING hash (token_fingerprint) WHERE (token_fingerprint IS NOT NULL)") == true, "\(indexes)")
        #expect(indexes["apns_audit_slow"]?.contains("WHERE (latency_ms >= (1000)") == true, "\(indexes)")
        #expect(indexes["apns_audit_latency"] == nil, "\(indexes.keys.sorted())")
        // Every partition, the existing ones and the ones made later, has each new index.
        _ = try database.connect().execute("SELECT apns_audit_ensure_partitions(date '2025-11-24', 1)")
        let partitions = try database.scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = 'apns_audit'::regclass")
        #expect(partitions.flatMap(Int.init).map { $0 >= 5 } == true, "21 to 24 Nov and the default partition at least: \(partitions ?? "-")")
        for index in ["apns_audit_apns_id", "apns_audit_token", "apns_audit_slow"] {
            #expect(try database.scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = '\(index)'::regclass") == partitions, "\(index)")
        }

        // The key still refuses a second copy of a row (what the replay's ON CONFLICT relies on).
        var copy = AuditRecord(event: events[0], relayInstance: "old")
        copy.id = try #require(try database.scalar("SELECT id FROM apns_audit WHERE apns_id = '\(events[0].send.apnsID.value)'"))
        // In row format 2: the database is at 0010, without 0012's apns_timestamp.
        let layout = AuditRowLayout.standard(upTo: .v2)
        let columns = layout.columns.map(\.name).joined(separator: ", ")
        var line: [UInt8] = []
        layout.appendLine(copy, to: &line)
        let connection = try database.connect()
        do {
            _ = try connection.copyIn("COPY apns_audit (\(columns)) FROM STDIN", data: line)
            Issue.record("a row with an existing (recorded_at, id) was accepted")
        } catch {
            #expect(error.sqlState == "23505", "\(error)")
        }
        // The look-ups answer by the new indexes.
        #expect(try database.scalar("SELECT count(*) FROM apns_audit WHERE apns_id = '\(events[9].send.apnsID.value)'") == "1")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit WHERE token_fingerprint = '\(events[9].send.tokenFingerprint!)'") == "1")
    }

    @Test("a relay from before migration 0006 (a rollback) starts against the migrated schema, writes, and replays its spool exactly once")
    func olderRelayAgainstNewSchema() async throws {
        let database = try Self.database(Migration.all)
        defer { database.drop() }
        // An older relay's start: its migrations are all there, none is applied again.
        let older = try Migrator(migrations: Self.beforeMigration6).apply(conninfo: database.conninfo)
        #expect(older.applied.isEmpty)
        #expect(older.alreadyApplied == Self.beforeMigration6.map(\.name))

        // Its writer (the COPY and the replay's ON CONFLICT DO NOTHING, which
        // names no constraint, are this build's unchanged): live rows, then a
        // spool holding every row twice, half of them already in Postgres.
        let events = (0..<400).map { EventFactory.event($0, dead: $0 % 100 == 0) }
        let live = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "old"), logger: quietLogger())
        let records = events.map { AuditRecord(event: $0, relayInstance: "old") }
        live.enqueueEncodedRowsForBenchmark(records.prefix(200).map { $0.copyLine() })
        await live.shutdown()
        #expect(live.statistics.written == 200)
        let replaying = try await AuditSpool.replayTwice(records, into: database, relayInstance: "old")
        #expect(replaying.statistics.replayed == 800)
        #expect(replaying.statistics.quarantined == 0)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "400")
        #expect(try database.scalar("SELECT count(DISTINCT (recorded_at, id)) FROM apns_audit") == "400")
    }
}
