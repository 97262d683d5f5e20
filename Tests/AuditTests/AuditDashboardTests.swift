@testable import Audit
import Foundation
import Testing

/// dashboards/apns-relay-audit.json against a million audit rows: every
/// panel's SQL and every variable query, expanded the way Grafana's
/// PostgreSQL data source expands them, runs, reads only the daily partitions
/// its time range overlaps, through an index, within 100 ms.
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

    /// Five days of sends back from `now` (200,000 a day), in daily partitions
    /// from the day before the first row to the day after `now`, with a mix
    /// like a busy relay's: 94% success, 5% rejected (half of them dead
    /// tokens), 0.8% no answer, 0.2% cancelled; traps on 6%; a latency tail
    /// into seconds; 4% channel broadcasts without a token; 70% traced.
    static let rows = 1_000_000
    static let load = """
        SELECT apns_audit_ensure_partitions(date '2026-11-16', 8);
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
                             round((3 + exp(9 * power(((g * 104729) % 1000) / 1000.0, 4)))::numeric, 3)::double precision AS latency) AS v;
        ANALYZE;
        """

    /// What each query promises on a large table: the (parent) index it
    /// reads, and whether it reads only the partitions its range overlaps.
    static let promises: [String: (indexes: Set<String>, pruned: Bool)] = [
        "Recent failed sends": (["apns_audit_failed"], true),
        "Trap hits over time by app and trap": (["apns_audit_trap_time"], true),
        "Trap hits by app and trap": (["apns_audit_trap_time"], true),
        "Slowest sends": (["apns_audit_latency"], true),
        // Counts every device send in the range: all of them, by time.
        "Stale-token ratio by app": (["apns_audit_time"], true),
        "Look-up by apns-id or token fingerprint": (["apns_audit_apns_id", "apns_audit_token"], true),
        // The distinct apps: one probe per app and partition (a skip scan),
        // then one per app in the range's partitions.
        "variable $app": (["apns_audit_app_time"], false),
    ]

    static let limitMilliseconds = 100.0

    @Test("every panel and variable query on a million rows: runs, reads its index in the partitions its range overlaps, answers within 100 ms")
    func panelsOnAMillionRows() async throws {
        let dashboard = try GrafanaDashboard(contentsOf: Self.dashboardURL)
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        _ = try await psql(database.conninfo, Self.load)
        let connection = try database.connect()
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == String(Self.rows))
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
            for (range, strict) in ranges {
                // Look up a send 100 rows before `now` by its apns-id and one
                // 400 rows before by its token, whose other sends are 36 hours away.
                let byID = Int(Self.end.timeIntervalSince(now) / 0.432) + 100
                let byToken = (byID + 300...byID + 310).first { $0 % 25 != 0 }!
                var values: [String: GrafanaSQL.Value] = [
                    "apns_id": .single(try #require(try database.scalar("SELECT md5('id\(byID)')"))),
                    "fingerprint": .single(try #require(try database.scalar("SELECT substr(md5('token\(byToken % 300_000)'), 1, 12)"))),
                ]
                var timings: [(String, Double)] = []
                // Variables first, as Grafana resolves them before the panels; a
                // multi-value "All" becomes every value the variable query found.
                for variable in dashboard.queryVariables {
                    let name = "variable $\(variable.name)"
                    let sql = try GrafanaSQL.expand(variable.sql, range: range, interval: nil, values: values)
                    let found = try connection.execute(sql).rows.compactMap { $0.first ?? nil }
                    #expect(found == ["chat-ios", "checkout-ios", "news-ios", "wallet-ios", "widgets-ios"], "\(name): \(found)")
                    values[variable.name] = .multi(found)
                    timings.append((name, try Self.verify(name, sql, range: range, strict: strict, parents: parents, on: connection)))
                }
                for panel in dashboard.panels {
                    let sql = try GrafanaSQL.expand(panel.sql, range: range, interval: panel.interval, values: values)
                    #expect(panel.sql.contains("$__timeFilter(recorded_at)"), "\(panel.title): filter on recorded_at with $__timeFilter, so Postgres prunes partitions")
                    let result = try connection.execute(sql)
                    #expect(!result.rows.isEmpty, "\(panel.title) shows nothing for \(range):\n\(sql)")
                    if panel.title.hasPrefix("Look-up") {
                        #expect(result.rows.count == 2, "\(panel.title) at \(range): \(result.rows)")
                        #expect(result.rows.contains { $0[result.columns.firstIndex(of: "apns_id")!] == values["apns_id"]?.text })
                    }
                    if panel.links.contains("trace_id") {
                        #expect(result.columns.contains("trace_id"), "\(panel.title) links a trace_id column it does not return")
                    }
                    timings.append((panel.title, try Self.verify(panel.title, sql, range: range, strict: strict, parents: parents, on: connection)))
                }
                for (name, milliseconds) in timings.sorted(by: { $0.1 > $1.1 }) {
                    print("audit dashboard on \(Self.rows) rows, \(range)\(strict ? " (default)" : ""): \(String(format: "%7.2f", milliseconds)) ms  \(name)")
                    if strict && milliseconds > slowest.1 { slowest = ("\(name), \(range)", milliseconds) }
                }
            }
        }
        print("audit dashboard on \(Self.rows) rows: slowest query over a default range: \(String(format: "%.2f", slowest.1)) ms (\(slowest.0))")
    }

    /// Checks one expanded query's plan and returns its execution time in
    /// milliseconds: the median of three EXPLAIN ANALYZE runs (the first
    /// also warms the cache as Grafana's refresh would). Only the partitions
    /// the range overlaps may be read; `strict`: each through an index, and
    /// within the time limit.
    static func verify(_ name: String, _ sql: String, range: GrafanaSQL.Range, strict: Bool, parents: [String: String],
                       on connection: PostgresConnection) throws -> Double {
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
        if strict {
            #expect(promise.indexes.isSubset(of: used), "\(name) at \(range) does not read \(promise.indexes.sorted()) (reads \(used.sorted())):\n\(plan)")
            for scan in scans where !["Index Scan", "Index Only Scan", "Bitmap Heap Scan"].contains(scan.type) {
                Issue.record("\(name) at \(range) reads \(scan.relation!) with a \(scan.type), not an index:\n\(plan)")
            }
        }
        var times: [Double] = []
        for _ in 0..<3 {
            let analyzed = try PlanNode.executionTime(explainJSON: try #require(
                connection.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql).rows.first?.first ?? nil))
            times.append(try #require(analyzed))
        }
        let median = times.sorted()[1]
        #expect(!strict || median < limitMilliseconds, "\(name) took \(times) ms (median \(median)) on \(rows) rows; the limit is \(limitMilliseconds) ms:\n\(plan)")
        return median
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
    }
}

/// The parts of a dashboard JSON file the SQL tests need.
struct GrafanaDashboard {
    struct Panel {
        var title: String
        var sql: String
        /// The panel's minimum interval ("5m"), what `$__interval` is at least.
        var interval: String?
        /// Field names that carry data links.
        var links: [String]
    }

    struct Variable {
        var name: String
        var sql: String
    }

    var json: [String: Any]
    var panels: [Panel] = []
    var queryVariables: [Variable] = []

    init(contentsOf url: URL) throws {
        json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        var stack = (json["panels"] as? [[String: Any]]) ?? []
        while !stack.isEmpty {
            let panel = stack.removeFirst()
            stack += (panel["panels"] as? [[String: Any]]) ?? []  // panels inside collapsed rows
            let title = panel["title"] as? String ?? "?"
            let overrides = ((panel["fieldConfig"] as? [String: Any])?["overrides"] as? [[String: Any]]) ?? []
            let links = overrides.compactMap { override -> String? in
                let properties = override["properties"] as? [[String: Any]] ?? []
                guard properties.contains(where: { $0["id"] as? String == "links" }) else { return nil }
                return (override["matcher"] as? [String: Any])?["options"] as? String
            }
            for target in (panel["targets"] as? [[String: Any]]) ?? [] {
                let sql = try #require(target["rawSql"] as? String, "panel \(title): a target without rawSql")
                panels.append(Panel(title: title, sql: sql, interval: panel["interval"] as? String, links: links))
            }
        }
        for variable in ((json["templating"] as? [String: Any])?["list"] as? [[String: Any]]) ?? [] where variable["type"] as? String == "query" {
            let query = variable["query"]
            let sql = (query as? String) ?? ((query as? [String: Any])?["rawSql"] as? String) ?? ((query as? [String: Any])?["query"] as? String)
            queryVariables.append(Variable(name: variable["name"] as? String ?? "?", sql: try #require(sql)))
        }
    }

    /// The dashboard's default time range ("now-6h" to "now") at `now`.
    func defaultRange(now: Date) throws -> GrafanaSQL.Range {
        let time = try #require(json["time"] as? [String: String])
        return GrafanaSQL.Range(from: try Self.instant(try #require(time["from"]), now: now),
                                to: try Self.instant(try #require(time["to"]), now: now))
    }

    /// "now", "now-30m", "now-6h", "now-7d".
    static func instant(_ text: String, now: Date) throws -> Date {
        if text == "now" { return now }
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800]
        let amount = try #require(Double(text.dropFirst(4).dropLast()), "relative time \(text)")
        let unit = try #require(text.last.flatMap { units[$0] }, "relative time \(text)")
        #expect(text.hasPrefix("now-"), "relative time \(text)")
        return now.addingTimeInterval(-amount * unit)
    }
}

/// How Grafana turns a panel's SQL into what Postgres runs: the browser
/// interpolates dashboard variables and `$__interval` (the SQL data sources'
/// quoting), then the server expands the macros
/// (pkg/tsdb/grafana-postgresql-datasource/macros.go).
enum GrafanaSQL {
    struct Range: CustomStringConvertible {
        var from: Date
        var to: Date
        var description: String { "\(GrafanaSQL.rfc3339(from)) to \(GrafanaSQL.rfc3339(to))" }
    }

    enum Value {
        case single(String)
        case multi([String])

        var text: String? {
            if case .single(let value) = self { return value }
            return nil
        }
    }

    struct Unknown: Error, CustomStringConvertible {
        var description: String
    }

    static func expand(_ sql: String, range: Range, interval: String?, values: [String: Value]) throws -> String {
        try macros(try variables(sql, interval: interval, values: values), range: range)
    }

    /// `$name`, `${name}` and `${name:sqlstring}`. A single value (textbox)
    /// has its quotes doubled; a multi-value one becomes a list of quoted
    /// literals, ready for `IN (...)`; `:sqlstring` quotes either.
    static func variables(_ sql: String, interval: String?, values: [String: Value]) throws -> String {
        let pattern = #/\$(\w+)|\$\{(\w+)(?::(\w+))?\}/#
        var output = ""
        var rest = Substring(sql)
        while let match = rest.firstMatch(of: pattern) {
            output += rest[..<match.range.lowerBound]
            rest = rest[match.range.upperBound...]
            let name = String(match.output.1 ?? match.output.2!)
            let format = match.output.3.map(String.init)
            if name == "__interval", let interval {
                output += interval
                continue
            }
            if name.hasPrefix("__") {  // a macro or built-in the server expands
                output += match.output.0
                continue
            }
            guard let value = values[name] else { throw Unknown(description: "no value for variable $\(name)") }
            switch (value, format) {
            case (.single(let text), nil): output += escape(text)
            case (.single(let text), "sqlstring"): output += "'\(escape(text))'"
            case (.multi(let texts), nil), (.multi(let texts), "sqlstring"): output += texts.map { "'\(escape($0))'" }.joined(separator: ",")
            default: throw Unknown(description: "format \(format!) of $\(name)")
            }
        }
        return output + rest
    }

    static func escape(_ text: String) -> String { text.replacingOccurrences(of: "'", with: "''") }

    static func macros(_ sql: String, range: Range) throws -> String {
        let pattern = #/\$([_a-zA-Z0-9]+)\(([^\)]*)\)/#
        var output = ""
        var rest = Substring(sql)
        while let match = rest.firstMatch(of: pattern) {
            output += rest[..<match.range.lowerBound]
            rest = rest[match.range.upperBound...]
            let arguments = match.output.2.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            output += try macro(String(match.output.1), arguments, range: range)
        }
        return output + rest
    }

    static func macro(_ name: String, _ arguments: [String], range: Range) throws -> String {
        switch name {
        case "__timeFilter": return "\(arguments[0]) BETWEEN '\(rfc3339(range.from))' AND '\(rfc3339(range.to))'"
        case "__timeFrom": return "'\(rfc3339(range.from))'"
        case "__timeTo": return "'\(rfc3339(range.to))'"
        case "__timeGroup", "__timeGroupAlias":
            guard arguments.count >= 2, let seconds = seconds(arguments[1].trimmingCharacters(in: CharacterSet(charactersIn: "'"))) else {
                throw Unknown(description: "$\(name)(\(arguments.joined(separator: ", "))): needs a column and an interval")
            }
            let number = seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
            let group = "floor(extract(epoch from \(arguments[0]))/\(number))*\(number)"
            return name == "__timeGroup" ? group : group + " AS \"time\""
        default: throw Unknown(description: "macro $\(name)")
        }
    }

    /// "30s", "5m", "1h", "1d" as seconds.
    static func seconds(_ interval: String) -> Double? {
        let units: [String: Double] = ["ms": 0.001, "s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800]
        guard let unit = units.keys.sorted(by: { $0.count > $1.count }).first(where: { interval.hasSuffix($0) }),
              let amount = Double(interval.dropLast(unit.count)) else { return nil }
        return amount * units[unit]!
    }

    /// Go's time.RFC3339Nano in UTC: fractional seconds only when non-zero,
    /// without trailing zeros.
    static func rfc3339(_ date: Date) -> String {
        let whole = date.timeIntervalSince1970.rounded(.down)
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        var text = formatter.string(from: Date(timeIntervalSince1970: whole))
        let nanoseconds = Int(((date.timeIntervalSince1970 - whole) * 1e9).rounded())
        if nanoseconds > 0 {
            var fraction = String(format: "%09d", nanoseconds)
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text.removeLast()  // "Z"
            text += "." + fraction + "Z"
        }
        return text
    }
}

/// A node of `EXPLAIN (FORMAT JSON)`.
struct PlanNode: CustomStringConvertible {
    var type: String
    var relation: String?
    var index: String?
    var children: [PlanNode]

    init(explainJSON text: String) throws {
        let top = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
        self.init(try #require(top.first?["Plan"] as? [String: Any]))
    }

    init(_ node: [String: Any]) {
        type = node["Node Type"] as? String ?? "?"
        relation = node["Relation Name"] as? String
        index = node["Index Name"] as? String
        children = ((node["Plans"] as? [[String: Any]]) ?? []).map(PlanNode.init)
    }

    static func executionTime(explainJSON text: String) throws -> Double? {
        let top = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
        return top.first?["Execution Time"] as? Double
    }

    /// This node and every node below it.
    var all: [PlanNode] { [self] + children.flatMap(\.all) }

    var description: String { lines(depth: 0).joined(separator: "\n") }

    func lines(depth: Int) -> [String] {
        let detail = [relation.map { "on \($0)" }, index.map { "using \($0)" }].compactMap { $0 }.joined(separator: " ")
        return [String(repeating: "  ", count: depth) + type + (detail.isEmpty ? "" : " " + detail)] + children.flatMap { $0.lines(depth: depth + 1) }
    }
}
