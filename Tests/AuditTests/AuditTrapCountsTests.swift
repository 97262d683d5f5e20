@testable import Audit
import Foundation
import Testing

/// Migration 0009: the per-5-minute and per-hour trap hits behind the two trap
/// panels stay equal to the rows (hits, first and last hit per app and trap),
/// however rows arrive.
@Suite("Audit schema: migration 0009, trap hits per 5 minutes and hour")
struct AuditTrapCountsTests {
    /// Per app and trap: hits, first and last hit, from the rows.
    static let fromRows = """
        SELECT string_agg(app || ' ' || trap || ' ' || hits || ' ' || first_hit || ' ' || last_hit, ',' ORDER BY app, trap) FROM (
          SELECT app, trap, count(*) AS hits, min(recorded_at) AS first_hit, max(recorded_at) AS last_hit
          FROM apns_audit, unnest(trap_ids) AS trap WHERE trap_ids <> '{}' GROUP BY app, trap) AS r
        """
    static func fromCounts(_ table: String) -> String {
        """
        SELECT string_agg(app || ' ' || trap || ' ' || hits || ' ' || first_hit || ' ' || last_hit, ',' ORDER BY app, trap) FROM (
          SELECT app, trap, sum(hits) AS hits, min(first_hit) AS first_hit, max(last_hit) AS last_hit FROM \(table) GROUP BY app, trap) AS c
        """
    }
    /// Per 5 minutes too: each row of the 5-minute table is its 5 minutes' rows (on UTC).
    static let bucketsMatch = """
        SELECT count(*) FROM apns_audit_trap_5min m FULL JOIN (
          SELECT date_bin('5 minutes', recorded_at, timestamptz '2000-01-01 00:00:00+00') AS bucket, app, trap,
                 count(*) AS hits, min(recorded_at) AS first_hit, max(recorded_at) AS last_hit
          FROM apns_audit, unnest(trap_ids) AS trap WHERE trap_ids <> '{}' GROUP BY 1, 2, 3) AS r USING (bucket, app, trap)
        WHERE (m.hits, m.first_hit, m.last_hit) IS DISTINCT FROM (r.hits, r.first_hit, r.last_hit)
        """

    @Test("rows before the migration are counted by it, rows the writer copies after by the trigger, a spool replayed twice once; per 5 minutes and per hour alike, in any session time zone")
    func countsFollowTheRows() async throws {
        let database = try AuditInsertCostMigrationTests.database(Migration.all.filter { $0.version < 9 })
        defer { database.drop() }
        // Dead tokens (trap MS020) one in 7, retried sends (MS015) one in 5;
        // a second apart, so they span several 5-minute buckets.
        let events = (0..<1_200).map { EventFactory.event($0, dead: $0 % 7 == 3) }
        // A relay of row format 2: this database has no apns_timestamp yet (0012).
        var older = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "old")
        older.rowLayout = .standard(upTo: .v2)
        let before = try AuditWriter.started(configuration: older, logger: quietLogger())
        events[0..<400].forEach(before.sendFinished)
        await before.shutdown()

        let report = try Migrator().apply(conninfo: database.conninfo)
        #expect(report.applied.first == "0009_trap_counts", "\(report.applied)")
        let connection = try database.connect()
        _ = try connection.execute("SET TIME ZONE 'Asia/Kathmandu'")
        let backfilled = try connection.execute(Self.fromRows).rows
        #expect(backfilled.first?.first??.isEmpty == false)
        #expect(try connection.execute(Self.fromCounts("apns_audit_trap_5min")).rows == backfilled)
        #expect(try connection.execute(Self.fromCounts("apns_audit_trap_hours")).rows == backfilled)

        // Live: the writer's COPY, and a row with two traps (each counted, as unnest counts them).
        let live = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "new"), logger: quietLogger())
        events[400..<800].forEach(live.sendFinished)
        await live.shutdown()
        #expect(live.statistics.written == 400)
        _ = try connection.execute("""
            INSERT INTO apns_audit (id, recorded_at, started_at, finished_at, apns_id, app, environment, operation, outcome,
                                    trap_ids, attempts, retried, latency_ms, payload_bytes, relay_instance)
            VALUES (gen_random_uuid(), timestamptz '2025-11-22 08:59:59.999Z', now(), now(), 'two-traps', 'alpha', 'production', 'alert',
                    'rejected', '{MS008,MS015}', 3, true, 12, 100, 'r')
            """)

        // A spool replayed twice: the second replay inserts nothing, counts nothing.
        let spool = temporaryDirectory()
        let offline = try AuditWriter.started(configuration: .init(conninfo: "postgresql://postgres@127.0.0.1:1/none?connect_timeout=1", spoolDirectory: spool, relayInstance: "down"), logger: quietLogger())
        events[800...].forEach(offline.sendFinished)
        await offline.shutdown()
        #expect(offline.statistics.spooled == 400)
        let copy = temporaryDirectory()
        for name in try FileManager.default.contentsOfDirectory(atPath: spool) where !name.hasPrefix(".") {
            try FileManager.default.copyItem(atPath: spool + "/" + name, toPath: copy + "/" + name)
        }
        for directory in [spool, copy] {
            let replaying = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "up"), logger: quietLogger())
            await replaying.shutdown()
        }
        let rows = try connection.execute(Self.fromRows).rows
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "1201")
        // Every fifth send was retried (MS015) unless dead (MS020 only), the dead
        // ones one in 7, and the row with two traps counts twice.
        let deadNotRetried = (0..<1_200).filter { $0 % 7 == 3 && $0 % 5 != 0 }.count
        let hits: Int = 1_200 / 5 + deadNotRetried + 2
        #expect(try database.scalar("SELECT sum(hits) FROM apns_audit_trap_5min") == String(hits))
        #expect(try connection.execute(Self.fromCounts("apns_audit_trap_5min")).rows == rows)
        #expect(try connection.execute(Self.fromCounts("apns_audit_trap_hours")).rows == rows)
        #expect(try connection.execute(Self.bucketsMatch).rows == [["0"]])

        // Retention drops the counts with their partitions.
        _ = try connection.execute("SELECT apns_audit_drop_partitions(0)")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit_trap_5min") == "0")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit_trap_hours") == "0")
    }
}
