@testable import Audit
import Foundation
import Testing

/// Migration 0011: one latency index of every send by app (apns_audit_app_latency) in
/// place of 0006's and 0010's partial ones, on a database a relay has been
/// writing to.
@Suite("Audit schema: migration 0011, every send in the latency index")
struct AuditLatencyIndexMigrationTests {
    @Test("on a database with rows: rows kept, apns_audit_app_latency on every partition (and later ones), the partial latency indexes gone, the slowest sends read from it")
    func migratesExistingDatabase() async throws {
        let database = try AuditInsertCostMigrationTests.database(Migration.all.filter { $0.version < 11 })
        defer { database.drop() }
        let events = (0..<600).map { EventFactory.event($0) }
        // A relay of row format 2: this database has no apns_timestamp yet (0012).
        var older = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "old")
        older.rowLayout = .standard(upTo: .v2)
        let before = try AuditWriter.started(configuration: older, logger: quietLogger())
        events.forEach(before.sendFinished)
        await before.shutdown()
        #expect(before.statistics.written == 600)
        let sums = "SELECT count(*), sum(latency_ms), string_agg(apns_id, ',' ORDER BY recorded_at, id) FROM apns_audit"
        let stored = try database.connect().execute(sums).rows

        let report = try Migrator().apply(conninfo: database.conninfo)
        #expect(report.applied == ["0011_latency_by_app", "0012_audit_apns_timestamp"])
        #expect(try database.connect().execute(sums).rows == stored, "every row kept as it was")

        let indexes = Dictionary(uniqueKeysWithValues: try database.connect().execute("""
            SELECT c.relname, pg_get_indexdef(c.oid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = 'apns_audit'::regclass
            """).rows.map { ($0[0]!, $0[1]!) })
        #expect(indexes["apns_audit_app_latency"]?.hasSuffix("USING btree (app, latency_ms DESC, recorded_at)") == true, "\(indexes)")
        #expect(indexes["apns_audit_slow"] == nil && indexes["apns_audit_slow_app"] == nil, "\(indexes.keys.sorted())")
        _ = try database.connect().execute("SELECT apns_audit_ensure_partitions(date '2025-11-24', 1)")
        let partitions = try database.scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = 'apns_audit'::regclass")
        #expect(try database.scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = 'apns_audit_app_latency'::regclass") == partitions)

        // Applying it again (a second relay starting) changes nothing.
        #expect(try Migrator().apply(conninfo: database.conninfo).applied.isEmpty)

        // The slowest of one app, none of whose sends took a second (every
        // latency here is under 100 ms), in latency order from the index.
        let connection = try database.connect()
        _ = try connection.execute("ANALYZE apns_audit")
        _ = try connection.execute("SET enable_seqscan = off")
        let query = """
            SELECT latency_ms FROM apns_audit
            WHERE recorded_at BETWEEN '2025-11-22T00:00:00Z' AND '2025-11-22T23:59:59Z' AND app IN ('beta')
            ORDER BY latency_ms DESC LIMIT 50
            """
        let plan = try PlanNode(explainJSON: try #require(connection.execute("EXPLAIN (FORMAT JSON) " + query).rows.first?.first ?? nil))
        let parents = Dictionary(uniqueKeysWithValues: try connection.execute("""
            SELECT c.relname, p.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
            WHERE c.relkind = 'i'
            """).rows.map { ($0[0]!, $0[1]!) })
        #expect(plan.all.contains { $0.index.flatMap { parents[$0] } == "apns_audit_app_latency" } && !plan.all.contains { $0.type == "Sort" },
                "\(plan)")
        let expected = events.enumerated().filter { $0.offset % 2 == 1 }.map { ($0.element.latencySeconds * 1_000).rounded() }.sorted(by: >).prefix(50)
        #expect(try connection.execute(query).rows.map { Double($0[0]!)!.rounded() } == Array(expected))
    }
}
