@testable import Audit
import APNs
import Foundation
import Relay
import TestSupport
import Testing

/// Runs psql, the PostgreSQL client nobody here wrote.
func psql(_ conninfo: String, _ sql: String, variables: [String: String] = [:]) async throws -> String {
    let arguments = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", conninfo] + variables.flatMap { ["-v", "\($0.key)=\($0.value)"] }
    let (status, text) = try await ProcessRunner.runOffPool(arguments, input: Data(sql.utf8))
    try #require(status == 0, "psql failed: \(text)")
    return text
}

@Suite("On-call queries")
struct OnCallQueryTests {
    @Test("the embedded queries are exactly the files in sql/queries, each says what it answers")
    func embeddedMatchesFiles() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("sql/queries")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(files.map { String($0.dropLast(4)) } == OnCallQuery.all.map(\.name), "run scripts/embed-sql")
        for (file, query) in zip(files, OnCallQuery.all) {
            var text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            while text.hasSuffix("\n") { text.removeLast() }
            #expect(text == query.sql, "\(file) differs from the embedded copy: run scripts/embed-sql")
            #expect(query.sql.hasPrefix("-- "), "\(file) must open with a comment saying which question it answers")
        }
        #expect(OnCallQuery.named("dead_tokens_since")?.bindable.variables == ["app", "since"])
        #expect(OnCallQuery.named("dead_tokens_since")?.bindable.sql.contains("$2::timestamptz") == true)
    }

    /// Reference instants the clock-dependent tests run at: how a window
    /// splits across daily partitions depends on the hour, so each verdict
    /// must hold at every one of them (just past midnight, the hour CI once
    /// failed at, midday, just before midnight).
    static let referenceInstants = [
        "2026-11-22T00:30:00Z", "2026-11-22T07:30:00Z", "2026-11-22T12:00:00Z", "2026-11-22T23:50:00Z",
    ]

    @Test("each query returns the expected rows for a known history", arguments: referenceInstants)
    func expectedRows(at instant: String) async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        try database.pinClock(at: instant)
        let now = try #require(Self.nanoseconds(instant))
        let writer = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "q"), logger: quietLogger())
        var events = (0..<20).map { EventFactory.event($0, dead: $0 < 4) }
        for index in events.indices {
            events[index].startedAt = now - 2_000_000_000
            events[index].finishedAt = now - UInt64(index) * 1_000_000
            events[index].latencySeconds = Double(index) / 100
        }
        events.forEach(writer.sendFinished)
        await writer.shutdown()
        #expect(writer.statistics.written == 20, "rows must land in their partition, not the spool: \(writer.statistics)")
        let runner = AuditQueryRunner(conninfo: database.conninfo)
        let sample = events[7]

        let byID = try runner.run(try #require(OnCallQuery.named("by_apns_id")), ["apns_id": sample.send.apnsID.value])
        #expect(byID.rows.count == 1)
        #expect(byID.value(0, "snapshot_id") == sample.send.snapshotID)
        let byToken = try runner.run(try #require(OnCallQuery.named("by_token_fingerprint")), ["fingerprint": sample.send.tokenFingerprint!])
        #expect(byToken.rows.count == 1)
        let traps = try runner.run(try #require(OnCallQuery.named("trap_hits")), ["since": "24 hours"])
        let trapCounts = Dictionary(uniqueKeysWithValues: traps.rows.map { ("\($0[0]!)/\($0[1]!)", $0[2]!) })
        // Sends 0-3 are dead (MS020); 5, 10, 15 were retried past a 429 (MS015): even indexes are alpha.
        #expect(trapCounts == ["alpha/MS020": "2", "beta/MS020": "2", "alpha/MS015": "1", "beta/MS015": "2"])
        let stale = try runner.run(try #require(OnCallQuery.named("stale_token_ratio")), [:])
        #expect(Set(stale.rows.map { "\($0[0]!) \($0[1]!)/\($0[2]!)" }) == ["alpha 2/10", "beta 2/10"])
        let slowest = try runner.run(try #require(OnCallQuery.named("slowest_sends")), [:])
        #expect(slowest.value(0, "apns_id") == events[19].send.apnsID.value)
        let retries = try runner.run(try #require(OnCallQuery.named("retries_by_reason")), [:])
        #expect(retries.rows.first?[0] == "TooManyRequests")
        #expect(retries.rows.first?[2] == "4")
        let dead = try runner.run(try #require(OnCallQuery.named("dead_tokens_since")), ["app": "alpha", "since": "2000-01-01T00:00:00Z"])
        #expect(dead.rows.count == 2)
    }

    /// What each query promises on a large table. Selective lookups use their
    /// index; range aggregates read only the daily partitions their window
    /// overlaps (within those, a sequential scan is the right plan when the
    /// window covers most of a partition, which depends on the hour).
    enum Promise {
        case index(String)
        case window(seconds: Int64)
        case indexInWindow(String, seconds: Int64)
    }

    static let promises: [String: Promise] = [
        "by_apns_id": .index("_apns_id_idx"),
        "by_token_fingerprint": .indexInWindow("_token_fingerprint_idx", seconds: 7 * 86_400),
        "dead_tokens_since": .index("apns_dead_tokens_recent"),
        "trap_hits": .window(seconds: 86_400),
        "stale_token_ratio": .window(seconds: 86_400),
        "slowest_sends": .window(seconds: 3_600),
        "retries_by_reason": .window(seconds: 86_400),
    ]

    @Test("on a million rows every query keeps its promise: lookups by index, windows pruned to their partitions (EXPLAIN through psql)",
          arguments: referenceInstants)
    func indexesOnAMillionRows(at instant: String) async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        try database.pinClock(at: instant)
        let reference = Int64(try #require(Self.nanoseconds(instant)) / 1_000_000_000)
        // Three days of rows back from the pinned now(), and daily partitions
        // from three days before it to the day after.
        _ = try await psql(database.conninfo, """
            SELECT apns_audit_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 3, 5);
            INSERT INTO apns_audit (id, recorded_at, started_at, finished_at, apns_id, app, environment, operation, token_fingerprint,
                                    outcome, status, reason, trap_ids, attempts, retried, latency_ms, attempt_log, payload_bytes, relay_instance)
            SELECT gen_random_uuid(), now() - (g % 259200) * interval '1 second', now(), now(), md5(g::text), 'app' || (g % 5), 'production',
                   'alert', substr(md5('t' || (g % 200000)), 1, 12), CASE WHEN g % 50 = 0 THEN 'rejected' ELSE 'success' END,
                   CASE WHEN g % 50 = 0 THEN 410 ELSE 200 END, CASE WHEN g % 50 = 0 THEN 'Unregistered' END,
                   CASE WHEN g % 50 = 0 THEN '{MS020}'::text[] WHEN g % 97 = 0 THEN '{MS015}'::text[] ELSE '{}' END,
                   CASE WHEN g % 97 = 0 THEN 2 ELSE 1 END, g % 97 = 0, (g % 1000) / 10.0,
                   '[{"status":200,"reason":null,"duration_ms":2}]'::jsonb, 200, 'load'
            FROM generate_series(1, 1000000) AS g;
            INSERT INTO apns_dead_tokens
            SELECT 'app' || (g % 5), 'production', md5('t' || g), substr(md5('t' || g), 1, 12), 'Unregistered', now(),
                   now() - (g % 1000) * interval '1 minute', now() - (g % 1000) * interval '1 minute'
            FROM generate_series(1, 50000) AS g;
            ANALYZE;
            """)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "1000000")
        #expect(try database.scalar("SELECT to_char(now() AT TIME ZONE 'UTC', 'HH24:MI')") == String(instant.dropFirst(11).prefix(5)),
                "now() must answer the pinned instant")
        let variables = ["apns_id": "827ccb0eea8a706c4c34a16891f84e7b", "fingerprint": "abcdef123456", "app": "app1", "since": "'24 hours'"]
        #expect(Set(OnCallQuery.all.map(\.name)) == Set(Self.promises.keys), "every query needs a stated promise")
        for query in OnCallQuery.all {
            let body = query.sql.split(separator: "\n").filter { !$0.hasPrefix("--") }.joined(separator: "\n")
            var bound = variables
            if query.name == "dead_tokens_since" { bound["since"] = "'2026-01-01 00:00Z'" }
            let plan = try await psql(database.conninfo, "EXPLAIN " + body, variables: bound)
            let promise = try #require(Self.promises[query.name], "no promise for \(query.name)")
            switch promise {
            case .index(let index), .indexInWindow(let index, _):
                #expect(plan.contains(index), "\(query.name) at \(instant) does not use \(index):\n\(plan)")
                // Sequential scans only on empty partitions (the default one, future days).
                for line in plan.split(separator: "\n") where line.contains("Seq Scan") {
                    #expect(!line.contains("Parallel") && (line.contains("apns_audit_default") || line.contains("rows=1 ")),
                            "\(query.name) at \(instant): \(line)")
                }
            case .window: break
            }
            switch promise {
            case .window(let seconds), .indexInWindow(_, let seconds):
                let scanned = Self.partitionDays(in: plan)
                let first = (reference - seconds) / 86_400
                let last = reference / 86_400
                // The partitions made above: three days back to the day after.
                let existing = Set((last - 3)...(last + 1))
                // Every day the window overlaps, and none wholly before it
                // (days after now() hold nothing and cannot be pruned by a lower bound).
                #expect(scanned.isSuperset(of: Set(first...last).intersection(existing)), "\(query.name) at \(instant) misses a partition:\n\(plan)")
                #expect(scanned.allSatisfy { $0 >= first }, "\(query.name) at \(instant) reads a partition outside its window:\n\(plan)")
            case .index: break
            }
        }
    }

    /// `2026-11-22T07:30:00Z` as Unix nanoseconds.
    static func nanoseconds(_ text: String) -> UInt64? {
        ISO8601DateFormatter().date(from: text).map { UInt64($0.timeIntervalSince1970) * 1_000_000_000 }
    }

    /// The days (Unix day numbers) of the `apns_audit_pYYYYMMDD` partitions a plan reads.
    static func partitionDays(in plan: String) -> Set<Int64> {
        var days = Set<Int64>()
        var rest = Substring(plan)
        while let range = rest.range(of: "apns_audit_p") {
            let digits = rest[range.upperBound...].prefix(8)
            if digits.count == 8, digits.allSatisfy(\.isNumber),
               let seconds = Self.nanoseconds("\(digits.prefix(4))-\(digits.dropFirst(4).prefix(2))-\(digits.suffix(2))T00:00:00Z") {
                days.insert(Int64(seconds / 1_000_000_000) / 86_400)
            }
            rest = rest[range.upperBound...]
        }
        return days
    }
}
