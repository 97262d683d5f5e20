@testable import Audit
import Foundation
import Testing

/// dashboards/apns-relay-audit.json against a million audit rows: every
/// panel's SQL and every variable query, expanded the way Grafana's
/// PostgreSQL data source expands them, runs, reads the index it promises in
/// the daily partitions its time range overlaps, and touches no more buffers
/// than the rows of its range need (fewer than any partition holds).
@Suite("Audit dashboard")
struct AuditDashboardTests {
    /// The instants the dashboard is looked at ("now" of its relative time
    /// range; fixed, so a verdict never depends on the wall clock): the end
    /// of the data (today's partition half full), just before midnight (the
    /// range inside one full partition) and just after (the range across two).
    static let referenceInstants = ["2026-11-22T12:00:00Z", "2026-11-21T23:50:00Z", "2026-11-21T00:30:00Z"]

    /// The newest row's instant; send `g` is recorded `g * 0.432` seconds before it.
    static let end = ISO8601DateFormatter().date(from: "2026-11-22T12:00:00Z")!

    static let dashboardURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("dashboards/apns-relay-audit.json")

    /// Five days of sends back from `end` (200,000 a day), in daily partitions
    /// from three days before the first row (a 7-day range ends in them, not
    /// in the default partition) to the day after the last, with a
    /// mix like a busy relay's: 94% success, 5% rejected (three in five for
    /// a dead token), 0.8% no answer, 0.2% cancelled; traps on 6%; a latency
    /// tail into seconds, except for wallet-ios, none of whose sends took a
    /// second (the "Slowest sends" of a healthy app); 4% channel broadcasts
    /// without a token; 70% traced.
    static let rows = 1_000_000
    static let load = """
        SELECT apns_audit_ensure_partitions(date '2026-11-14', 10);
        INSERT INTO apns_audit (id, recorded_at, started_at, finished_at, apns_id, trace_id, app, environment, operation, push_type,
                                priority, topic, token_fingerprint, channel_id, outcome, status, reason, error_type, trap_ids, attempts,
                                retried, latency_ms, attempt_log, payload_bytes, caller, relay_instance)
        SELECT gen_random_uuid(), at, at - latency * interval '1 millisecond', at,
               md5('id' || g), CASE WHEN g % 10 < 7 THEN md5('trace' || g) END,
               (ARRAY['checkout-ios', 'checkout-ios', 'checkout-ios', 'news-ios', 'news-ios', 'chat-ios', 'chat-ios', 'chat-ios',
                      'wallet-ios', 'widgets-ios'])[1 + g % 10],
               CASE WHEN g % 20 = 0 THEN 'development' ELSE 'production' END,
               CASE WHEN g % 25 = 0 THEN 'broadcast' ELSE 'alert' END, 'alert', 10, 'com.example.app',
               CASE WHEN g % 25 <> 0 THEN substr(md5('token' || (g % 300000)), 1, 12) END,
               CASE WHEN g % 25 = 0 THEN 'channel-' || (g % 7) END,
               CASE WHEN kind < 50 THEN 'rejected' WHEN kind < 58 THEN 'failed' WHEN kind < 60 THEN 'cancelled' ELSE 'success' END,
               CASE WHEN kind < 30 THEN 410 WHEN kind < 40 THEN 400 WHEN kind < 50 THEN 429 WHEN kind < 60 THEN NULL ELSE 200 END,
               CASE WHEN kind < 25 THEN 'Unregistered' WHEN kind < 30 THEN 'ExpiredToken' WHEN kind < 37 THEN 'BadDeviceToken'
                    WHEN kind < 40 THEN 'DeviceTokenNotForTopic' WHEN kind < 50 THEN 'TooManyRequests' END,
               CASE WHEN kind >= 50 AND kind < 58 THEN 'timeout' END,
               CASE WHEN kind < 30 THEN '{MS020}'::text[] WHEN kind < 50 THEN '{MS015}'::text[] WHEN kind < 53 THEN '{MS008,MS015}'::text[]
                    WHEN kind % 97 = 0 THEN '{MS011}'::text[] ELSE '{}' END,
               CASE WHEN kind >= 40 AND kind < 58 THEN 3 WHEN kind % 37 = 0 THEN 2 ELSE 1 END,
               kind >= 40 AND kind < 58 OR kind % 37 = 0,
               latency, '[{"status":200,"reason":null,"duration_ms":2}]'::jsonb, 180 + g % 3000, 'backend', 'relay-' || (g % 3)
        FROM generate_series(1::bigint, \(rows)) AS g,
             LATERAL (SELECT timestamptz '2026-11-22 12:00:00Z' - (g * 0.432) * interval '1 second' AS at,
                             (g * 7919) % 1000 AS kind,
                             round((3 + exp(CASE WHEN g % 10 = 8 THEN 6.9 ELSE 9 END * power(((g * 104729) % 1000) / 1000.0, 4)))::numeric, 3)::double precision
                                 AS latency) AS v;
        ANALYZE;
        """

    /// What each query promises on a large table: the (parent) index it
    /// reads, and whether it reads only the partitions its range overlaps.
    static let promises: [String: (indexes: Set<String>, pruned: Bool)] = [
        "Recent failed sends": (["apns_audit_failed"], true),
        // Count the trap hits of the range from the per-minute (and per-hour)
        // counts; from the rows only the part-minutes at either end.
        "Trap hits over time by app and trap": ([], true),
        "Trap hits by app and trap": ([], true),
        // Every send by app, slowest first (0011): each app's walk from its
        // slow end checks the time in the index, however few took a second
        // (one app, and wallet-ios whose sends all took less: checked below).
        "Slowest sends": (["apns_audit_app_latency"], true),
        // Counts every device send in the range from the per-hour and
        // per-minute counts; from the rows only the part-minutes at either
        // end (through an index, whichever the planner likes for so few).
        "Stale-token ratio by app": ([], true),
        "Look-up by apns-id or token fingerprint": (["apns_audit_apns_id", "apns_audit_token"], true),
        // The distinct apps: one probe per app and partition (a skip scan),
        // then one per app in the range's partitions.
        "variable $app": (["apns_audit_app_time"], false),
    ]

    /// The most shared buffers (8 KiB pages) a query over the dashboard's
    /// default range may touch. The default six hours hold 50,000 rows, in
    /// about 2,400 heap pages; every partition with rows holds more than
    /// this many pages (checked below), so a plan that reads a partition
    /// whole, or more than the range, fails. Buffers, not milliseconds: the
    /// work is fixed by the data and the plan, the time also by the machine.
    static let limitBlocks = 4_000

    /// Queries that read pre-aggregated tables, and which (issue 28: the
    /// stale-token ratio read every row of its range, whole partitions over
    /// days), at `interval` (the panel's `$__interval`).
    static func aggregates(_ name: String, interval: String?) -> Set<String> {
        switch name {
        case "Stale-token ratio by app": return ["apns_audit_token_hours", "apns_audit_token_minutes"]
        // Whole hours from the hours when its interval is whole hours (a
        // week's), else whole 5 minutes (its interval is at least 5m).
        case "Trap hits over time by app and trap":
            let hourly = interval.flatMap(GrafanaSQL.seconds).map { $0.truncatingRemainder(dividingBy: 3_600) == 0 } ?? false
            return hourly ? ["apns_audit_trap_hours", "apns_audit_trap_5min"] : ["apns_audit_trap_5min"]
        case "Trap hits by app and trap": return ["apns_audit_trap_hours", "apns_audit_trap_5min"]
        default: return []
        }
    }

    /// The counts tables (0007, 0009): the rows a counted panel reads from
    /// them are bounded by what it draws, not by the sends.
    static let countsTables: Set<String> = ["apns_audit_token_hours", "apns_audit_token_minutes", "apns_audit_trap_hours", "apns_audit_trap_5min"]

    /// What each pre-aggregated panel shows, counted from the rows of its
    /// range (the panels' SQL before the counts tables): the counts must equal it.
    static let fromRows: [String: String] = [
        "Stale-token ratio by app": """
            SELECT app, count(*) FILTER (WHERE reason IN ('Unregistered', 'ExpiredToken')) AS dead, count(*) AS sends
            FROM apns_audit WHERE $__timeFilter(recorded_at) AND token_fingerprint IS NOT NULL AND app IN ($app)
            GROUP BY app ORDER BY app
            """,
        "Trap hits over time by app and trap": """
            SELECT $__timeGroupAlias(recorded_at, $__interval), app || ' ' || trap AS metric, count(*) AS hits
            FROM apns_audit, unnest(trap_ids) AS trap
            WHERE $__timeFilter(recorded_at) AND trap_ids <> '{}' AND app IN ($app)
            GROUP BY 1, 2 ORDER BY 1, 2
            """,
        "Trap hits by app and trap": """
            SELECT app, trap AS trap_id, count(*) AS hits, min(recorded_at) AS first_hit, max(recorded_at) AS last_hit
            FROM apns_audit, unnest(trap_ids) AS trap
            WHERE $__timeFilter(recorded_at) AND trap_ids <> '{}' AND app IN ($app)
            GROUP BY app, trap ORDER BY app, trap
            """,
    ]

    /// The queries held to their plan and ``weekLimitBlocks`` over any range
    /// up to 7 days: every panel and variable ("Slowest sends" too since
    /// 0011: before it, with fewer than 50 sends of a second or more in the
    /// range, it sorted the range's rows).
    static let weekStrict: Set<String> = Set(promises.keys)

    /// The most buffers a ``weekStrict`` query may touch over 7 days: the
    /// counts of 7 × 24 hours and up to 118 minutes (or 5-minute buckets)
    /// per app (and trap), the rows of two part-minutes, a LIMIT's rows or a
    /// look-up's probes in each partition, fit in a few hundred; the rows of
    /// 7 days fill thousands of pages per day.
    static let weekLimitBlocks = 600

    /// The `$app` variable reads every partition (one probe per app in each,
    /// then one per app in the range's): its buffers grow with the number of
    /// partitions (10 here), not with the rows of the range.
    static let variableWeekLimitBlocks = 1_500

    @Test("every panel and variable query on a million rows: runs, reads its index in the partitions its range overlaps, touches fewer buffers than a partition holds")
    func panelsOnAMillionRows() async throws {
        let dashboard = try GrafanaDashboard(contentsOf: Self.dashboardURL)
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        _ = try await psql(database.conninfo, Self.load)
        let connection = try database.connect()
        // As Grafana's role runs them (deploy/container/audit-reader.sql): JIT
        // would compile for seconds for a never-run branch's planned cost.
        _ = try connection.execute("SET jit = off")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == String(Self.rows))
        // The limit's premise: reading any partition with rows whole touches more than it.
        let pages = try connection.execute("""
            SELECT c.relname, c.relpages FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'apns_audit'::regclass AND c.reltuples > 0
            """).rows.map { ($0[0]!, Int($0[1]!)!) }
        #expect(pages.count >= 5, "\(pages)")
        for (partition, count) in pages { #expect(count > Self.limitBlocks, "\(partition) holds \(count) pages, not more than the limit") }
        // Each partition's index by the partitioned index it belongs to.
        let parents = Dictionary(uniqueKeysWithValues: try connection.execute("""
            SELECT c.relname, p.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
            WHERE c.relkind = 'i'
            """).rows.map { ($0[0]!, $0[1]!) })
        #expect(Set(dashboard.panels.map(\.title) + dashboard.queryVariables.map { "variable $\($0.name)" }) == Set(Self.promises.keys),
                "every panel and variable needs a stated promise")
        #expect(dashboard.panels.count >= 6, "failed sends, trap hits (2), slowest sends, stale-token ratio, look-up")
        #expect(!dashboard.queryVariables.isEmpty, "the $app variable's query is tested too")

        var slowest: (String, Double) = ("", 0)
        for instant in Self.referenceInstants {
            let now = try #require(ISO8601DateFormatter().date(from: instant))
            // The dashboard's default range (asserted); at the end of the data
            // also the 24 hours before it, across two partitions (run and
            // pruned, times reported: a whole partition may rightly be read
            // without an index).
            var ranges = [(try dashboard.defaultRange(now: now), true)]
            if now == Self.end { ranges.append((GrafanaSQL.Range(from: now.addingTimeInterval(-86_400), to: now), false)) }
            // The longest range "Trap hits over time" draws below an hour
            // (30m, each point six 5-minute counts): 112 hours over its 150 points.
            if now == Self.end { ranges.append((GrafanaSQL.Range(from: now.addingTimeInterval(-112 * 3_600), to: now), false)) }
            // Seven days back (every row and more), and a week starting and
            // ending mid-minute: held to ``weekStrict``, times reported.
            ranges.append((GrafanaSQL.Range(from: now.addingTimeInterval(-7 * 86_400), to: now), false))
            ranges.append((GrafanaSQL.Range(from: now.addingTimeInterval(-7 * 86_400 + 17.25), to: now.addingTimeInterval(-31.5)), false))
            for (range, strict) in ranges {
                let week = range.to.timeIntervalSince(range.from) > 6 * 86_400
                // Look up a send 100 rows before `now` by its apns-id and one
                // 400 rows before by its token, whose other sends are 36 hours away.
                let byID = Int(Self.end.timeIntervalSince(now) / 0.432) + 100
                let byToken = (byID + 300...byID + 310).first { $0 % 25 != 0 }!
                var values: [String: GrafanaSQL.Value] = [
                    "apns_id": .single(try #require(try database.scalar("SELECT md5('id\(byID)')"))),
                    "fingerprint": .single(try #require(try database.scalar("SELECT substr(md5('token\(byToken % 300_000)'), 1, 12)"))),
                ]
                var timings: [(String, (median: Double, best: Double, blocks: Int))] = []
                // Variables first, as Grafana resolves them before the panels; a
                // multi-value "All" becomes every value the variable query found.
                for variable in dashboard.queryVariables {
                    let name = "variable $\(variable.name)"
                    let sql = try GrafanaSQL.expand(variable.sql, range: range, interval: nil, values: values)
                    let found = try connection.execute(sql).rows.compactMap { $0.first ?? nil }
                    #expect(found == ["chat-ios", "checkout-ios", "news-ios", "wallet-ios", "widgets-ios"], "\(name): \(found)")
                    values[variable.name] = .multi(found)
                    timings.append((name, try Self.verify(name, sql, range: range, strict: strict, week: week, parents: parents, on: connection)))
                }
                for panel in dashboard.panels {
                    let sql = try GrafanaSQL.expand(panel.sql, range: range, interval: panel.interval(over: range), values: values)
                    #expect(panel.sql.contains("$__timeFilter(recorded_at)"), "\(panel.title): filter on recorded_at with $__timeFilter, so Postgres prunes partitions")
                    let result = try connection.execute(sql)
                    #expect(!result.rows.isEmpty, "\(panel.title) shows nothing for \(range):\n\(sql)")
                    // Over 36 hours or more the token's other sends (36 hours away) are in the range too.
                    if panel.title.hasPrefix("Look-up"), range.to.timeIntervalSince(range.from) < 36 * 3_600 {
                        #expect(result.rows.count == 2, "\(panel.title) at \(range): \(result.rows)")
                        #expect(result.rows.contains { $0[result.columns.firstIndex(of: "apns_id")!] == values["apns_id"]?.text })
                    }
                    if panel.links.contains("trace_id") {
                        #expect(result.columns.contains("trace_id"), "\(panel.title) links a trace_id column it does not return")
                    }
                    if let rowsSQL = Self.fromRows[panel.title] {
                        // The counts equal the rows': the panel's question asked of the rows of the range.
                        let fromRows = try connection.execute(try GrafanaSQL.expand(rowsSQL, range: range, interval: panel.interval(over: range), values: values))
                        #expect(!fromRows.rows.isEmpty)
                        let width = fromRows.columns.count
                        let key = { (row: [String?]) in row.map { $0 ?? "" }.joined(separator: "\u{1}") }
                        let shown = result.rows.map { Array($0.prefix(width)) }.sorted { key($0) < key($1) }
                        let expected = fromRows.rows.sorted { key($0) < key($1) }
                        #expect(shown == expected, "\(panel.title) at \(range) shows \(shown.prefix(5))…, the rows \(expected.prefix(5))…")
                    }
                    if panel.title == "Trap hits over time by app and trap" {
                        try Self.checkCountsRead(panel: panel, sql: sql, shown: result, range: range, on: connection)
                    }
                    timings.append((panel.title, try Self.verify(panel.title, sql, range: range, strict: strict, week: week,
                                                                 interval: panel.interval(over: range), parents: parents, on: connection)))
                    if panel.title == "Slowest sends", week {
                        // Every app, one app, and wallet-ios, none of whose
                        // sends took a second (before 0011 the panel sorted
                        // its rows of the range): the walk down
                        // apns_audit_app_latency, within the week's buffer
                        // limit, equal to a plain ORDER BY latency_ms DESC LIMIT 50.
                        for apps in [values["app"]!, .multi(["chat-ios"]), .multi(["wallet-ios"])] {
                            var chosen = values
                            chosen["app"] = apps
                            let single = try GrafanaSQL.expand(panel.sql, range: range, interval: panel.interval(over: range), values: chosen)
                            let plan = try PlanNode(explainJSON: try #require(connection.execute("EXPLAIN (FORMAT JSON) " + single).rows.first?.first ?? nil))
                            let used = Set(plan.all.compactMap { $0.index.flatMap { parents[$0] } })
                            #expect(used.contains("apns_audit_app_latency"), "Slowest sends for \(apps) at \(range) reads \(used.sorted()):\n\(plan)")
                            let shown = try connection.execute(single)
                            let plain = try connection.execute(try GrafanaSQL.expand("""
                                SELECT latency_ms FROM apns_audit WHERE $__timeFilter(recorded_at) AND app IN ($app) ORDER BY latency_ms DESC LIMIT 50
                                """, range: range, interval: nil, values: chosen)).rows.map { $0[0] }
                            // Latencies, not ids: the test's sends share latencies (ties).
                            let column = try #require(shown.columns.firstIndex(of: "latency_ms"))
                            #expect(plain.count == 50 && shown.rows.map { $0[column] } == plain, "Slowest sends for \(apps) at \(range)")
                            if case .multi(["wallet-ios"]) = apps {
                                #expect(plain.allSatisfy { Double($0 ?? "") ?? 1_000 < 1_000 }, "wallet-ios has no send of a second or more")
                            }
                            let analyzed = try #require(connection.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + single).rows.first?.first ?? nil)
                            let touched = try #require(try PlanNode.sharedBlocks(explainJSON: analyzed))
                            #expect(touched <= Self.weekLimitBlocks, "Slowest sends for \(apps) touched \(touched) buffers at \(range)")
                            print("audit dashboard on \(Self.rows) rows, \(range): Slowest sends for \(apps): \(touched) buffers, "
                                + String(format: "%.2f ms", try #require(try PlanNode.executionTime(explainJSON: analyzed))))
                        }
                    }
                }
                for (name, time) in timings.sorted(by: { $0.1.median > $1.1.median }) {
                    print("audit dashboard on \(Self.rows) rows, \(range)\(strict ? " (default)" : ""): "
                        + String(format: "%6d buffers, median %7.2f ms, best %7.2f ms  ", time.blocks, time.median, time.best) + name)
                    if strict && time.median > slowest.1 { slowest = ("\(name), \(range)", time.median) }
                }
            }
        }
        print("audit dashboard on \(Self.rows) rows: slowest query over a default range: median \(String(format: "%.2f", slowest.1)) ms (\(slowest.0))")
    }

    /// Checks one expanded query's plan and times it with EXPLAIN ANALYZE's
    /// execution time, five runs (the first also warms the cache, as
    /// Grafana's refresh would). Only the partitions the range overlaps may be
    /// read; `strict`: through the promised index, touching at most
    /// ``limitBlocks`` buffers (the times are reported, not judged).
    static func verify(_ name: String, _ sql: String, range: GrafanaSQL.Range, strict: Bool, week: Bool = false, interval: String? = nil,
                       parents: [String: String], on connection: PostgresConnection) throws -> (median: Double, best: Double, blocks: Int) {
        // Over 7 days only ``weekStrict`` queries are held to their plan.
        let strict = strict || (week && weekStrict.contains(name))
        let plan = try PlanNode(explainJSON: try #require(connection.execute("EXPLAIN (FORMAT JSON) " + sql).rows.first?.first ?? nil))
        let promise = try #require(promises[name], "no promise for \(name)")
        let scans = plan.all.filter { $0.relation.map(Self.isAuditPartition) == true }
        #expect(!scans.isEmpty, "\(name) reads no audit partition:\n\(plan)")
        let overlapped = Self.partitions(overlapping: range)
        for scan in scans {
            #expect(!promise.pruned || overlapped.contains(scan.relation!),
                    "\(name) reads \(scan.relation!), outside \(range) (\(overlapped.sorted())):\n\(plan)")
        }
        let used = Set(plan.all.compactMap { $0.index.flatMap { parents[$0] } })
        let read = Set(plan.all.compactMap(\.relation))
        for table in aggregates(name, interval: interval) {
            #expect(read.contains(table), "\(name) at \(range) does not read \(table):\n\(plan)")
        }
        if strict {
            #expect(promise.indexes.isSubset(of: used), "\(name) at \(range) does not read \(promise.indexes.sorted()) (reads \(used.sorted())):\n\(plan)")
            for scan in scans where !["Index Scan", "Index Only Scan", "Bitmap Heap Scan"].contains(scan.type) {
                // An empty partition (a 7-day range reaches days before the
                // first row) is read whole for free: no page to read.
                if try connection.execute("SELECT relpages FROM pg_class WHERE relname = '\(scan.relation!)'").rows == [["0"]] { continue }
                Issue.record("\(name) at \(range) reads \(scan.relation!) with a \(scan.type), not an index:\n\(plan)")
            }
        }
        var times: [Double] = []
        var blocks: [Int] = []
        for _ in 0..<5 {
            let analyzed = try #require(connection.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql).rows.first?.first ?? nil)
            times.append(try #require(try PlanNode.executionTime(explainJSON: analyzed)))
            blocks.append(try #require(try PlanNode.sharedBlocks(explainJSON: analyzed)))
        }
        times.sort()
        // The verdict is the work done, which the data and the plan fix; the
        // times are printed for the reader (they measure the shared machine too).
        let touched = blocks.max()!
        let limit = week ? (name.hasPrefix("variable") ? variableWeekLimitBlocks : weekLimitBlocks) : limitBlocks
        #expect(!strict || touched <= limit, "\(name) touched \(touched) buffers on \(rows) rows at \(range); the limit is \(limit):\n\(plan)")
        return (times[2], times[0], touched)
    }

    /// "Trap hits over time" reads from the counts about as many rows as it
    /// draws points: one per point at an interval of whole hours (from the
    /// per-hour counts), at most interval / 5 minutes below an hour (from the
    /// per-5-minute counts), plus the 5 minutes outside the whole hours at
    /// either end (at most 11 + 11 per series). Before maxDataPoints and the
    /// hours it read every 5 minutes of the range: 12 per point at 1h.
    static func checkCountsRead(panel: GrafanaDashboard.Panel, sql: String, shown: PostgresRows, range: GrafanaSQL.Range,
                                on connection: PostgresConnection) throws {
        let interval = try #require(panel.interval(over: range).flatMap(GrafanaSQL.seconds))
        let perPoint = interval.truncatingRemainder(dividingBy: 3_600) == 0 ? 1 : interval / 300
        let metric = try #require(shown.columns.firstIndex(of: "metric"))
        let series = Set(shown.rows.map { $0[metric] }).count
        let analyzed = try #require(connection.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql).rows.first?.first ?? nil)
        let read = try PlanNode(explainJSON: analyzed).all.filter { $0.relation.map(countsTables.contains) == true }.compactMap(\.rowsRead).reduce(0, +)
        let bound = Double(shown.rows.count) * perPoint + Double(22 * series)
        print("audit dashboard: \(panel.title) at \(range), $__interval \(panel.interval(over: range) ?? "-"): "
            + "\(shown.rows.count) points, \(Int(read)) rows read from the counts (bound \(Int(bound)))")
        #expect(read <= bound, "\(panel.title) at \(range) ($__interval \(panel.interval(over: range) ?? "-")) read \(Int(read)) counts for \(shown.rows.count) points")
    }

    static func isAuditPartition(_ relation: String) -> Bool {
        relation == "apns_audit_default" || relation.hasPrefix("apns_audit_p")
    }

    /// The daily partitions (`apns_audit_pYYYYMMDD`) whose day overlaps the
    /// range, both ends included as in BETWEEN.
    static func partitions(overlapping range: GrafanaSQL.Range) -> Set<String> {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var day = calendar.startOfDay(for: range.from)
        var names = Set<String>()
        while day <= range.to {
            let parts = calendar.dateComponents([.year, .month, .day], from: day)
            names.insert(String(format: "apns_audit_p%04d%02d%02d", parts.year!, parts.month!, parts.day!))
            day = calendar.date(byAdding: .day, value: 1, to: day)!
        }
        return names
    }

    @Test("Grafana's expansion: macros as the postgres data source writes them, variables quoted as its SQL interpolation does")
    func expansion() throws {
        let range = GrafanaSQL.Range(from: Date(timeIntervalSince1970: 1_795_327_200), to: Date(timeIntervalSince1970: 1_795_348_800.5))
        let sql = try GrafanaSQL.expand(
            "SELECT $__timeGroupAlias(t, $__interval), x FROM a WHERE $__timeFilter(t) AND t > $__timeFrom() AND t <= $__timeTo() AND app IN ($app) AND id = ${id:sqlstring} AND f = '$f'",
            range: range, interval: "5m", values: ["app": .multi(["a", "o'b"]), "id": .single("x' OR '1'='1"), "f": .single("it's")])
        #expect(sql == """
            SELECT floor(extract(epoch from t)/300)*300 AS "time", x FROM a WHERE t BETWEEN '2026-11-22T06:00:00Z' AND '2026-11-22T12:00:00.5Z' \
            AND t > '2026-11-22T06:00:00Z' AND t <= '2026-11-22T12:00:00.5Z' AND app IN ('a','o''b') AND id = 'x'' OR ''1''=''1' AND f = 'it''s'
            """)
        #expect(throws: GrafanaSQL.Unknown.self) { try GrafanaSQL.expand("SELECT $__nope(t)", range: range, interval: nil, values: [:]) }
        #expect(throws: GrafanaSQL.Unknown.self) { try GrafanaSQL.expand("SELECT $missing", range: range, interval: nil, values: [:]) }
        let dashboard = try GrafanaDashboard(contentsOf: Self.dashboardURL)
        let defaultRange = try dashboard.defaultRange(now: Self.end)
        #expect(GrafanaSQL.rfc3339(defaultRange.from) == "2026-11-22T06:00:00Z")
        #expect(GrafanaSQL.rfc3339(defaultRange.to) == "2026-11-22T12:00:00Z")
        #expect(Self.partitions(overlapping: .init(from: defaultRange.from.addingTimeInterval(-86_400), to: defaultRange.to))
            == ["apns_audit_p20261121", "apns_audit_p20261122"])
        // $__interval as the data source computes it: the range over maxDataPoints, rounded, at least the minimum.
        let day = GrafanaSQL.Range(from: defaultRange.to.addingTimeInterval(-86_400), to: defaultRange.to)
        let week = GrafanaSQL.Range(from: defaultRange.to.addingTimeInterval(-7 * 86_400), to: defaultRange.to)
        #expect(GrafanaSQL.interval(range: defaultRange, maxDataPoints: 150, minimum: "5m") == "5m")
        #expect(GrafanaSQL.interval(range: day, maxDataPoints: 150, minimum: "5m") == "10m")
        #expect(GrafanaSQL.interval(range: week, maxDataPoints: 150, minimum: "5m") == "1h")
        #expect(GrafanaSQL.interval(range: week, maxDataPoints: 40, minimum: "5m") == "3h")
        #expect(GrafanaSQL.interval(range: .init(from: week.from.addingTimeInterval(-21 * 86_400), to: week.to), maxDataPoints: 20, minimum: nil) == "1d")
        #expect(GrafanaSQL.interval(range: day, maxDataPoints: 1_000, minimum: nil) == "1m")
        #expect(try GrafanaSQL.expand("$__interval_ms $__interval", range: day, interval: "2h", values: [:]) == "7200000 2h")
        // A week draws hourly points on the trap panel, whatever the panel's width.
        let trapsOverTime = try #require(dashboard.panels.first { $0.title == "Trap hits over time by app and trap" })
        #expect(trapsOverTime.maxDataPoints != nil && trapsOverTime.interval == "5m")
        #expect(trapsOverTime.interval(over: week) == "1h")
        #expect(trapsOverTime.interval(over: defaultRange) == "5m")
    }
}
