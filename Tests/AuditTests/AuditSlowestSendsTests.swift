@testable import Audit
import Foundation
import Testing

/// The "Slowest sends" panel (from 0011's apns_audit_app_latency; before it,
/// sends of a second or more from a partial index and the rest of its 50
/// from the range): its rows must be exactly those of the plain
/// `ORDER BY latency_ms DESC LIMIT 50`, however many were slow.
@Suite("Audit dashboard: slowest sends")
struct AuditSlowestSendsTests {
    @Test("the panel's 50 rows are the 50 slowest in the range and apps, with none, few, exactly 50 and many sends of a second or more",
          arguments: [0, 20, 50, 51, 120])
    func slowestEqualsPlainOrder(slow: Int) async throws {
        let dashboard = try GrafanaDashboard(contentsOf: AuditDashboardTests.dashboardURL)
        let panel = try #require(dashboard.panels.first { $0.title == "Slowest sends" })
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        // 600 sends on 22 Nov (apps a, b, c; the first `slow` of them from exactly
        // 1000 ms up, the rest under a second, all latencies distinct) and,
        // outside the range, slower ones the day before.
        _ = try await psql(database.conninfo, """
            SELECT apns_audit_ensure_partitions(date '2026-11-21', 2);
            INSERT INTO apns_audit (id, recorded_at, started_at, finished_at, apns_id, app, environment, operation, outcome,
                                    attempts, retried, latency_ms, payload_bytes, relay_instance)
            SELECT gen_random_uuid(), at, at, at, 'send-' || g, (ARRAY['a', 'b', 'c'])[1 + g % 3], 'production', 'alert', 'success',
                   1, false, CASE WHEN g <= \(slow) THEN 1000 + (g - 1) * 7 ELSE (g * 7919) % 997 + g / 10000.0 END, 100, 'r'
            FROM generate_series(1, 600) AS g, LATERAL (SELECT timestamptz '2026-11-22 01:00:00Z' + g * interval '1 minute' AS at) AS t;
            INSERT INTO apns_audit (id, recorded_at, started_at, finished_at, apns_id, app, environment, operation, outcome,
                                    attempts, retried, latency_ms, payload_bytes, relay_instance)
            SELECT gen_random_uuid(), at, at, at, 'yesterday-' || g, 'a', 'production', 'alert', 'success', 1, false, 90000 + g, 100, 'r'
            FROM generate_series(1, 100) AS g, LATERAL (SELECT timestamptz '2026-11-21 12:00:00Z' + g * interval '1 minute' AS at) AS t;
            ANALYZE apns_audit;
            """)
        let formatter = ISO8601DateFormatter()
        let range = GrafanaSQL.Range(from: formatter.date(from: "2026-11-22T00:00:00Z")!, to: formatter.date(from: "2026-11-22T23:59:59Z")!)
        let sql = try GrafanaSQL.expand(panel.sql, range: range, interval: panel.interval, values: ["app": .multi(["a", "b"])])
        let connection = try database.connect()
        let shown = try connection.execute(sql)
        let apnsID = try #require(shown.columns.firstIndex(of: "apns_id"))
        let latency = try #require(shown.columns.firstIndex(of: "latency_ms"))
        let expected = try connection.execute("""
            SELECT apns_id FROM apns_audit
            WHERE recorded_at BETWEEN '2026-11-22T00:00:00Z' AND '2026-11-22T23:59:59Z' AND app IN ('a', 'b')
            ORDER BY latency_ms DESC LIMIT 50
            """).rows.map { $0[0]! }
        #expect(expected.count == 50)
        #expect(shown.rows.map { $0[apnsID]! } == expected, "with \(slow) sends of a second or more:\n\(sql)")
        let latencies = shown.rows.map { Double($0[latency]!)! }
        #expect(latencies == latencies.sorted(by: >), "slowest first")
        #expect(shown.columns.contains("time") && shown.columns.contains("trace_id"))
    }
}
