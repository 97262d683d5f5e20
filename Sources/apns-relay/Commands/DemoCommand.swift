import ArgumentParser
import Audit
import Foundation
import Logging
import RelayJSON
import RelayServer
import Telemetry

/// `apns-relay demo`: the relay against its built-in mock APNs, end to end.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the relay against a built-in mock APNs and push a realistic mixed workload through its API.",
        discussion: """
            Starts a mock APNs (TLS HTTP/2) and the relay on loopback with a generated key, sends successes, \
            Unregistered tokens, TooManyRequests (retried), a payload over 4 KB, an invalid snapshot, a Live \
            Activity start/update/end, a batch and a broadcast with channel create/list/delete through the \
            ingress, then prints a summary, the /metrics URL, the audit rows and the answers of three on-call \
            queries (one apns-id, trap hits, dead tokens). The audit goes to APNS_RELAY_DATABASE_URL when set \
            (migrated first; scripts/demo starts a throwaway Postgres when it is not), otherwise, or with \
            --spool-only, to a spool directory it names. No Apple account is needed.
            """)

    @Flag(help: "Keep the relay and the mock running after the workload (Ctrl-C stops them).") var serve = false
    @Option(help: "Ingress port (0 picks a free one).") var ingressPort: UInt16 = 0
    @Option(help: "Metrics port (0 picks a free one).") var metricsPort: UInt16 = 0
    @Option(help: "Plain alert sends in the workload.") var sends = 200
    @Flag(help: "Write the audit to the spool directory only, even when APNS_RELAY_DATABASE_URL is set.") var spoolOnly = false

    func run() async throws {
        let databaseURL = spoolOnly ? nil : ProcessInfo.processInfo.environment["APNS_RELAY_DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
        let logger = makeLogger(level: "warning")
        let started = Date()
        let environment = try await DemoEnvironment.start(
            databaseURL: databaseURL, ingressPort: ingressPort, metricsPort: metricsPort, logger: logger)
        let ingress = "http://127.0.0.1:\(environment.ingressPort)"
        let metricsURL = "http://\(environment.server.metricsAddress)/metrics"
        print("mock APNs      https://127.0.0.1:\(environment.mock.port) (certificate \(environment.mock.certificateFile))")
        print("relay ingress  \(ingress)")
        print("relay metrics  \(metricsURL)")
        print("audit          \(databaseURL.map { "Postgres " + ServerConfiguration.maskPassword($0) } ?? "spool only: \(environment.server.configuration.audit.spoolDirectory)")")
        print("")

        let workload = DemoWorkload(port: environment.ingressPort, apiKey: environment.apiKey)
        let outcomes = try await Self.offPool { try workload.run(plainSends: sends) }
        Self.printSummary(outcomes)

        let scrape = try await Self.offPool {
            try BlockingHTTPClient(host: "127.0.0.1", port: environment.server.metricsAddress.port).request("GET", "/metrics")
        }
        let metricLines = String(decoding: scrape.body, as: UTF8.self).split(separator: "\n")
            .filter { $0.hasPrefix("apns_relay_sends_total") || $0.hasPrefix("apns_relay_trap_hits_total") || $0.hasPrefix("apns_relay_retries_total") }
        print("\n/metrics (\(metricLines.count) of the send, trap and retry series; full scrape at \(metricsURL)):")
        for line in metricLines.prefix(12) { print("  \(line)") }

        if serve {
            print("\nserving; try:")
            print("  curl -s -H 'authorization: Bearer \(environment.apiKey)' -H 'content-type: application/json' \\")
            print("    -d '{\"app\":\"\(DemoEnvironment.app)\",\"environment\":\"development\",\"operation\":\"alert\",\"token\":\"\(DemoWorkload.token("", 1))\",\"snapshot\":\(DemoWorkload.liveSnapshot.replacingOccurrences(of: "\n", with: ""))}' \\")
            print("    \(ingress)/v1/send")
            print("admin key (for /v1/admin/retry): \(environment.adminKey)")
            printUnbuffered("Ctrl-C to stop.")
            _ = await SignalWaiter.waitForTermination()
        }
        await environment.stop()
        let statistics = environment.server.audit.statistics
        print("\naudit: \(statistics.written) rows written to Postgres, \(statistics.spooled) spooled, \(statistics.dropped) dropped")
        if let databaseURL {
            try await Self.printAuditRows(databaseURL: databaseURL, since: started)
            try await Self.printOnCallAnswers(databaseURL: databaseURL, outcomes: outcomes)
        } else {
            print("spool: \(environment.server.configuration.audit.spoolDirectory) (a relay with a database replays it at start-up)")
            if !spoolOnly {
                print("no APNS_RELAY_DATABASE_URL: scripts/demo starts a throwaway Postgres and writes the audit there")
            }
        }
    }

    /// Runs blocking work on a Dispatch thread, never on the cooperative pool.
    static func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }

    static func printSummary(_ outcomes: [DemoWorkload.Outcome]) {
        var byLabel: [String: [Int: Int]] = [:]
        var retries = 0
        var traps: [String: Int] = [:]
        var latencies: [Double] = []
        func account(_ result: JSONValue?) {
            guard let result else { return }
            let error = result["error"]
            if let attempts = (result["attempts"] ?? error?["attempts"])?.integerValue, attempts > 1 { retries += Int(attempts) - 1 }
            // A trap hit is a send that hit the trap on preflight or on any attempt,
            // once per send: the answer's trapHits (the error's, for a failed send),
            // the audit's trap_ids and apns_relay_trap_hits_total all count it so.
            for trap in (result["trapHits"] ?? error?["trapHits"])?.arrayValue ?? [] {
                if let id = trap.stringValue { traps[id, default: 0] += 1 }
            }
            if let latency = result["latencyMs"]?.numberValue { latencies.append(latency) }
        }
        for outcome in outcomes {
            byLabel[outcome.label, default: [:]][outcome.status, default: 0] += 1
            if let results = outcome.body?["results"]?.arrayValue {
                for result in results { account(result) }
            } else {
                account(outcome.body)
            }
        }
        print("requests by kind and HTTP status:")
        for (label, statuses) in byLabel.sorted(by: { $0.key < $1.key }) {
            let text = statuses.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " ")
            print("  \(label.padding(toLength: 20, withPad: " ", startingAt: 0)) \(text)")
        }
        if let batch = outcomes.first(where: { $0.label == "batch" })?.body?["summary"] {
            print("  batch summary: \(batch.encodedString())")
        }
        print("retries: \(retries)")
        print("trap hits: \(traps.isEmpty ? "none" : traps.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " "))")
        latencies.sort()
        if !latencies.isEmpty {
            func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
            print(String(format: "send latency as the relay measured it: p50 %.2f ms, p99 %.2f ms (%d sends)", percentile(0.5), percentile(0.99), latencies.count))
        }
    }

    static func printAuditRows(databaseURL: String, since: Date) async throws {
        let runner = AuditQueryRunner(conninfo: databaseURL)
        let sinceText = ISO8601DateFormatter().string(from: since.addingTimeInterval(-1))
        let (summary, recent) = try await offPool {
            let summary = try runner.execute(
                "SELECT outcome, coalesce(reason, error_type, '-'), count(*)::text, sum(CASE WHEN retried THEN 1 ELSE 0 END)::text FROM apns_audit WHERE relay_instance = 'demo' AND recorded_at >= $1::timestamptz GROUP BY 1, 2 ORDER BY 3 DESC",
                [sinceText])
            let recent = try runner.execute(
                "SELECT apns_id::text, operation, outcome, coalesce(status::text, '-'), coalesce(reason, error_type, '-'), attempts::text, coalesce(array_to_string(trap_ids, ','), ''), round(latency_ms::numeric, 2)::text FROM apns_audit WHERE relay_instance = 'demo' AND recorded_at >= $1::timestamptz ORDER BY finished_at DESC LIMIT 8",
                [sinceText])
            return (summary, recent)
        }
        print("audit rows written by this run (apns_audit, relay_instance = 'demo'):")
        for row in summary.rows { print("  \(row[0] ?? "") \(row[1] ?? ""): \(row[2] ?? "") rows, \(row[3] ?? "") retried") }
        print("latest rows:")
        print("  apns_id                              operation  outcome   status reason          attempts traps  latency_ms")
        for row in recent.rows {
            let cells = row.map { $0 ?? "" }
            print("  \(cells[0]) \(cells[1].padding(toLength: 10, withPad: " ", startingAt: 0)) \(cells[2].padding(toLength: 9, withPad: " ", startingAt: 0)) \(cells[3].padding(toLength: 6, withPad: " ", startingAt: 0)) \(cells[4].padding(toLength: 15, withPad: " ", startingAt: 0)) \(cells[5].padding(toLength: 8, withPad: " ", startingAt: 0)) \(cells[6].padding(toLength: 6, withPad: " ", startingAt: 0)) \(cells[7])")
        }
    }
}
