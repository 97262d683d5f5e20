import Foundation
import HTTPServer
import MockAPNs
import RelayJSON
import Synchronization
import Testing
import TestSupport

/// The page reaches a pager (issue 26): `serve` as a process against the mock
/// APNs, Debian's `prometheus` scraping it with the shipped rules, Debian's
/// `prometheus-alertmanager` routing what fires to a webhook in this test.
@Suite("A fault at APNs pages through Prometheus and Alertmanager, and resolves")
struct AlertDeliveryProcessTests {
    static let root = TraceExportProcessTests.root

    /// The webhook receiver: an HTTP server of the relay's own on a loopback
    /// port 0, each Alertmanager notification handed to the test as it arrives.
    final class Webhook: Sendable {
        let server: HTTPServer
        let notifications: AsyncStream<JSONValue>

        init() throws {
            let (stream, continuation) = AsyncStream.makeStream(of: JSONValue.self)
            notifications = stream
            var router = Router()
            router.add("POST", "/alerts") { request in
                if let body = try? JSONParser.parse(request.body) { continuation.yield(body) }
                return .text(200, "ok")
            }
            server = try HTTPServer(router: router)
        }

        /// The first alert named `alertname` with `status` whose labels include
        /// `labels`, from the notifications as they come; nil when the stream ends.
        func next(_ alertname: String, status: String, labels: [String: String]) async -> JSONValue? {
            for await notification in notifications {
                for alert in notification["alerts"]?.arrayValue ?? [] where alert["status"]?.stringValue == status {
                    guard alert["labels"]?["alertname"]?.stringValue == alertname else { continue }
                    if labels.allSatisfy({ alert["labels"]?[$0.key]?.stringValue == $0.value }) { return alert }
                }
            }
            return nil
        }
    }

    /// A Prometheus or Alertmanager child on a free loopback port (found by
    /// binding port 0 first; should another process take it meanwhile the
    /// child exits and another port is tried), ready when `/-/ready` answers 200.
    static func startDaemon(_ name: String, directory: String, arguments: (UInt16) -> [String]) async throws -> (ChildProcess, UInt16) {
        var lastLog = ""
        for attempt in 1...5 {
            let port = try await Self.freePort()
            let log = directory + "/\(name)-\(attempt).log"
            let child = try ChildProcess(arguments(port), standardOutput: .discard, standardError: .file(log))
            let ready = await eventually(60) {
                if !child.isRunning { return true }
                let answer = try? await ProcessRunner.runOffPool(
                    ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2", "http://127.0.0.1:\(port)/-/ready"])
                return answer?.output == "200"
            }
            if ready, child.isRunning { return (child, port) }
            child.kill()
            _ = await child.exited()
            lastLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? "no log"
        }
        throw TestRelayError("\(name) did not start: \(lastLog.suffix(2000))")
    }

    static func freePort() async throws -> UInt16 {
        let (status, output) = try await ProcessRunner.runOffPool([
            "python3", "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1]); s.close()",
        ])
        guard status == 0, let port = UInt16(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw TestRelayError("no free port: \(output)")
        }
        return port
    }

    /// The shipped rules with every `for:` shortened to 0s, so a test does not
    /// wait out hold times meant for production. Only the `for:` lines change:
    /// the expressions (rate windows included), labels and annotations are the
    /// shipped ones, which this checks line by line.
    static func rulesWithoutHoldTimes() throws -> String {
        let shipped = try String(contentsOf: root.appendingPathComponent("alerts/apns-relay.rules.yml"), encoding: .utf8)
        var changed = 0
        let lines = shipped.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("for: ") else { return String(line) }
            changed += 1
            return String(line.prefix { $0 == " " }) + "for: 0s"
        }
        guard changed > 0 else { throw TestRelayError("no for: line in the shipped rules") }
        let rewritten = lines.joined(separator: "\n")
        let kept = zip(shipped.split(separator: "\n", omittingEmptySubsequences: false), rewritten.split(separator: "\n", omittingEmptySubsequences: false))
            .filter { $0 != $1 }
        guard kept.allSatisfy({ $0.0.trimmingCharacters(in: .whitespaces).hasPrefix("for: ") }) else {
            throw TestRelayError("the rewrite touched more than for: lines")
        }
        return rewritten
    }

    @Test("provider tokens rejected at APNs: APNsRelayTrapErrors{trap=MS030} reaches the webhook with its labels and runbook; with the fault gone it resolves")
    func pageAndResolve() async throws {
        for tool in ["prometheus", "prometheus-alertmanager", "promtool"] {
            let found = try await ProcessRunner.runOffPool(["sh", "-c", "command -v \(tool)"])
            try #require(found.status == 0, "\(tool) is not installed (scripts/test installs Debian's prometheus and prometheus-alertmanager)")
        }
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let directory = relay.directory

        // The relay as a process, its audit spool-only: this test is about the page.
        let config = try ServeProcessTests.writeConfiguration(
            directory: directory, mock: relay.mock, keyPath: relay.keyPath, instance: "pager-e2e", databaseURL: "",
            spool: directory + "/spool-serve")  // not the in-process relay's own spool
        let serve = try RelayProcess(arguments: ["serve", "--config", config], standardError: directory + "/serve.log")
        defer { serve.signal(SIGKILL) }
        let ingressPort = try await serve.port(after: "apns-relay ingress on")
        let metricsPort = try await serve.port(after: "apns-relay metrics on")

        let webhook = try Webhook()
        defer { Task { await webhook.server.stop() } }

        // Alertmanager: every alert to the webhook at once, resolved ones too.
        try """
            global:
              resolve_timeout: 5s
            route:
              receiver: pager
              group_by: [alertname, trap]
              group_wait: 0s
              group_interval: 1s
              repeat_interval: 1h
            receivers:
              - name: pager
                webhook_configs:
                  - url: http://127.0.0.1:\(webhook.server.port)/alerts
                    send_resolved: true
            """.write(toFile: directory + "/alertmanager.yml", atomically: true, encoding: .utf8)
        let (alertmanager, alertmanagerPort) = try await Self.startDaemon("alertmanager", directory: directory) { port in
            [
                "prometheus-alertmanager", "--config.file=\(directory)/alertmanager.yml", "--storage.path=\(directory)/alertmanager-\(port)",
                "--web.listen-address=127.0.0.1:\(port)", "--cluster.listen-address=", "--log.level=warn",
            ]
        }
        defer {
            alertmanager.terminate()
            _ = alertmanager.waitUntilExit()
        }

        // Prometheus: the shipped rules (hold times shortened, see above), scraping and evaluating every second.
        try Self.rulesWithoutHoldTimes().write(toFile: directory + "/rules.yml", atomically: true, encoding: .utf8)
        try """
            global: {scrape_interval: 1s, evaluation_interval: 1s}
            rule_files: ['\(directory)/rules.yml']
            alerting:
              alertmanagers:
                - static_configs: [{targets: ['127.0.0.1:\(alertmanagerPort)']}]
            scrape_configs:
              - job_name: apns-relay
                static_configs: [{targets: ['127.0.0.1:\(metricsPort)']}]
            """.write(toFile: directory + "/prometheus.yml", atomically: true, encoding: .utf8)
        let checked = try await ProcessRunner.runOffPool(["promtool", "check", "config", directory + "/prometheus.yml"])
        #expect(checked.status == 0, "\(checked.output)")
        let (prometheus, _) = try await Self.startDaemon("prometheus", directory: directory) { port in
            [
                "prometheus", "--config.file=\(directory)/prometheus.yml", "--storage.tsdb.path=\(directory)/tsdb-\(port)",
                "--web.listen-address=127.0.0.1:\(port)", "--rules.alert.resend-delay=1s", "--log.level=warn",
            ]
        }
        defer {
            prometheus.terminate()
            _ = prometheus.waitUntilExit()
        }

        // A steady trickle of sends, all through the relay process.
        let base = "http://127.0.0.1:\(ingressPort)"
        let statuses = Mutex<[Int]>([])
        let traffic = Task {
            var index = 0
            while !Task.isCancelled {
                if let answer = try? await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(index)), base: base) {
                    statuses.withLock { $0.append(answer.status) }
                }
                index += 1
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        defer { traffic.cancel() }

        // The fault: APNs rejects every provider token of the app (trap MS030).
        relay.mock.engine.replaceRules([MockRule(.any, always: .reject(reason: "InvalidProviderToken", status: 403))])
        let labels = ["trap": "MS030", "severity": "error"]
        // The verdict is the webhook's notification; the timeout only bounds a failure.
        let firing = await Self.within(seconds: 180) { await webhook.next("APNsRelayTrapErrors", status: "firing", labels: labels) }
        let alert = try #require(firing, "no firing APNsRelayTrapErrors{trap=MS030} reached the webhook within 180 s; sends answered \(Set(statuses.withLock { $0 }))")
        #expect(statuses.withLock { $0 }.contains { $0 != 200 }, "the relay answered the rejected sends with an error")
        #expect(alert["labels"]?["severity"] == "error")
        #expect(alert["annotations"]?["runbook_url"] == "docs/runbooks.md#apnsrelaytraperrors")
        #expect(alert["annotations"]?["summary"] == "Trap MS030 is firing")
        let runbooks = try String(contentsOf: Self.root.appendingPathComponent("docs/runbooks.md"), encoding: .utf8)
        #expect(runbooks.contains("## APNsRelayTrapErrors"), "the runbook link's anchor exists")

        // The fault removed: sends succeed again, and once the rule's 5-minute
        // rate window holds no rejection any more, the alert resolves.
        relay.mock.engine.replaceRules([])
        let resolved = await Self.within(seconds: 480) { await webhook.next("APNsRelayTrapErrors", status: "resolved", labels: labels) }
        #expect(resolved != nil, "no resolved notification within 480 s (the shipped rate window is 5 minutes)")
        #expect(statuses.withLock { $0.suffix(3) } == [200, 200, 200], "sends succeed once the fault is gone")
    }

    /// `body`'s value, or nil when `seconds` pass first (a failure bound, never a verdict).
    static func within<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () async -> T?) async -> T? {
        await withTaskGroup(of: T?.self) { group in
            group.addTask { await body() }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}
