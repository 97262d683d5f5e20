import Audit
import Foundation
import RelayJSON

extension DemoCommand {
    /// The on-call questions of sql/queries, asked of the rows this run just
    /// wrote: what happened to one push (a send that was retried past two
    /// 429s), which traps fired, which tokens APNs called dead. The same
    /// answers as `apns-relay audit show|traps|dead-tokens`.
    static func printOnCallAnswers(databaseURL: String, outcomes: [DemoWorkload.Outcome]) async throws {
        let retried = outcomes.first { $0.label == "too-many-requests" && $0.status == 200 }?.body?["apnsId"]?.stringValue
        let questions: [(command: String, query: String, values: [String: String], columns: [String])] = [
            retried.map {
                ("apns-relay audit show \($0)", "by_apns_id", ["apns_id": $0],
                 ["operation", "outcome", "status", "reason", "trap_ids", "attempts", "retried", "latency_ms", "attempt_log"])
            },
            ("apns-relay audit traps --since 1h", "trap_hits", ["since": "1 hour"], ["app", "trap_id", "hits"]),
            ("apns-relay audit dead-tokens --app \(DemoEnvironment.app) --since 1h", "dead_tokens_since",
             ["app": DemoEnvironment.app, "since": ISO8601DateFormatter().string(from: Date().addingTimeInterval(-3600))],
             ["token_fingerprint", "environment", "reason", "apns_timestamp", "last_seen"]),
        ].compactMap { $0 }
        let runner = AuditQueryRunner(conninfo: databaseURL)
        print("\non-call queries (sql/queries) against what this run wrote:")
        for question in questions {
            guard let query = OnCallQuery.named(question.query) else { continue }
            let rows = try await offPool { try runner.run(query, question.values) }
            let indexes = question.columns.compactMap { rows.columns.firstIndex(of: $0) }
            let shown = rows.rows.prefix(5).map { row in indexes.map { row[$0] ?? "∅" } }
            print("\n$ \(question.command)")
            print("-- \(query.question)")
            print(Table(columns: indexes.map { rows.columns[$0] }, rows: Array(shown)).rendered)
            let more = rows.rows.count > shown.count ? ", first \(shown.count) shown" : ""
            print("(\(rows.rows.count) row\(rows.rows.count == 1 ? "" : "s")\(more))")
        }
    }
}
