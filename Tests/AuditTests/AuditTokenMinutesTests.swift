@testable import Audit
import Foundation
import Testing

/// Migration 0007: the per-minute and per-hour device-send counts behind the
/// stale-token ratio panel stay equal to the rows, however rows arrive.
@Suite("Audit schema: migration 0007, token counts per minute and hour")
struct AuditTokenMinutesTests {
    /// Per app: device sends and dead ones, from the rows and from each counts table.
    static let fromRows = """
        SELECT string_agg(app || ' ' || sends || ' ' || dead, ',' ORDER BY app) FROM (
          SELECT app, count(*) AS sends, count(*) FILTER (WHERE reason IN ('Unregistered', 'ExpiredToken')) AS dead
          FROM apns_audit WHERE token_fingerprint IS NOT NULL GROUP BY app) AS r
        """
    static func fromCounts(_ table: String) -> String {
        "SELECT string_agg(app || ' ' || sends || ' ' || dead, ',' ORDER BY app) FROM (SELECT app, sum(sends) AS sends, sum(dead) AS dead FROM \(table) GROUP BY app) AS c"
    }
    /// Per minute too: each count row is its minute's rows (UTC minutes).
    static let minutesMatch = """
        SELECT count(*) FROM apns_audit_token_minutes m FULL JOIN (
          SELECT date_bin('1 minute', recorded_at, timestamptz '2000-01-01 00:00:00+00') AS minute, app, count(*) AS sends
          FROM apns_audit WHERE token_fingerprint IS NOT NULL GROUP BY 1, 2) AS r USING (minute, app)
        WHERE m.sends IS DISTINCT FROM r.sends
        """

    @Test("rows before the migration are counted by it, rows the writer copies after by the trigger, a spool replayed twice once; per minute and per hour alike, in any session time zone")
    func countsFollowTheRows() async throws {
        let database = try AuditInsertCostMigrationTests.database(Migration.all.filter { $0.version < 7 })
        defer { database.drop() }
        // Dead tokens one in 7; a second apart, so they span several minutes.
        let events = (0..<1_200).map { EventFactory.event($0, dead: $0 % 7 == 3) }
        // A relay of row format 2: this database has no apns_timestamp yet (0012).
        var older = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "old")
        older.rowLayout = .standard(upTo: .v2)
        let before = try AuditWriter.started(configuration: older, logger: quietLogger())
        events[0..<400].forEach(before.sendFinished)
        await before.shutdown()

        let report = try Migrator().apply(conninfo: database.conninfo)
        #expect(report.applied.first == "0007_token_minutes", "\(report.applied)")
        let connection = try database.connect()
        _ = try connection.execute("SET TIME ZONE 'Asia/Kathmandu'")
        #expect(try connection.execute(Self.fromCounts("apns_audit_token_minutes")).rows == connection.execute(Self.fromRows).rows)

        // Live: the writer's COPY.
        let live = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "new"), logger: quietLogger())
        events[400..<800].forEach(live.sendFinished)
        await live.shutdown()
        #expect(live.statistics.written == 400)

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
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "1200")
        #expect(rows.first?.first??.hasPrefix("alpha 600 ") == true, "\(rows)")
        #expect(try connection.execute(Self.fromCounts("apns_audit_token_minutes")).rows == rows)
        #expect(try connection.execute(Self.fromCounts("apns_audit_token_hours")).rows == rows)
        #expect(try connection.execute(Self.minutesMatch).rows == [["0"]])
    }
}
