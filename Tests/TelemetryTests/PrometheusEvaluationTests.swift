import APNs
import Foundation
import HTTPServer
import Logging
import MockAPNs
import Relay
import RelayJSON
import Telemetry
import TestSupport
import Testing

/// A free loopback port.
func freePort() async throws -> Int {
    let (status, output) = try await runTool(["python3", "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"])
    try #require(status == 0)
    return Int(output.trimmingCharacters(in: .whitespacesAndNewlines))!
}

/// The `expr:` of every rule in a rules file (folded `>` blocks joined).
func ruleExpressions(_ text: String) -> [String] {
    var expressions: [String] = []
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    var index = 0
    while index < lines.count {
        let trimmed = lines[index].trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("expr:") {
            let rest = trimmed.dropFirst(5).trimmingCharacters(in: .whitespaces)
            if rest == ">" {
                let indent = lines[index].prefix { $0 == " " }.count
                var parts: [String] = []
                index += 1
                while index < lines.count, lines[index].prefix(while: { $0 == " " }).count > indent {
                    parts.append(lines[index].trimmingCharacters(in: .whitespaces))
                    index += 1
                }
                expressions.append(parts.joined(separator: " "))
                continue
            }
            expressions.append(rest)
        }
        index += 1
    }
    return expressions
}

@Suite("Dashboards and alerts against a real Prometheus")
struct PrometheusEvaluationTests {
    @Test("Prometheus scrapes the relay under load; every panel and alert expression parses, the main panels have data")
    func evaluate() async throws {
        let root = AlertRulesTests.root
        // The relay side: metrics fed by a client sending through the mock engine.
        let fixture = try MetricsFixture(keyID: "PROMKEY001", teamID: "PROMTEAM01", rules: [
            MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1)),
            MockRule(.tokenPrefix("f1a7"), [.reject(reason: "ServiceUnavailable"), .succeed]),
        ])
        let keys = fixture.keys
        defer { keys.remove() }
        let (metrics, killSwitch) = (fixture.metrics, fixture.killSwitch)
        var router = Router()
        MetricsEndpoint(metrics: metrics, sources: MetricSources(retryDisabled: { killSwitch.isEngaged }), buildInfo: [("version", "test")]).install(on: &router)
        let relay = try HTTPServer(router: router)
        let load = Task {
            var index = 0
            while !Task.isCancelled {
                await fixture.sendAlert(token: ["dead", "f1a7", "0000", "1111"][index % 4] + String(format: "%060d", index))
                index += 1
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        defer { load.cancel() }

        // Prometheus, scraping every second and loading the alert rules.
        let directory = keys.directory
        let port = try await freePort()
        let config = """
            global: {scrape_interval: 1s, evaluation_interval: 1s}
            rule_files: ['\(root.appendingPathComponent("alerts/apns-relay.rules.yml").path)']
            scrape_configs:
              - job_name: apns-relay
                static_configs: [{targets: ['127.0.0.1:\(relay.port)']}]
            """
        try config.write(toFile: directory + "/prometheus.yml", atomically: true, encoding: .utf8)
        let (checkStatus, checkOutput) = try await runTool(["promtool", "check", "config", directory + "/prometheus.yml"])
        #expect(checkStatus == 0, "\(checkOutput)")
        let prometheus = try ChildProcess([
            "prometheus", "--config.file=\(directory)/prometheus.yml", "--storage.tsdb.path=\(directory)/tsdb",
            "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn",
        ])
        defer {
            prometheus.terminate()
            _ = prometheus.waitUntilExit()
        }

        func query(_ expression: String) async throws -> JSONValue {
            let (status, body) = try await runTool([
                "curl", "-s", "--max-time", "5", "http://127.0.0.1:\(port)/api/v1/query", "--data-urlencode", "query=\(expression)",
            ])
            guard status == 0 else { return ["status": "unreachable"] }
            return (try? JSONParser.parse(body)) ?? ["status": "unparsable"]
        }
        let dashboard = try JSONParser.parse(Array(Data(contentsOf: root.appendingPathComponent("dashboards/apns-relay.json"))))
        let panels = try #require(dashboard["panels"]?.arrayValue)
        func expressions(_ panel: JSONValue) -> [String] {
            (panel["targets"]?.arrayValue ?? []).map {
                ($0["expr"]?.stringValue ?? "").replacing("$app", with: ".*").replacing("$instance", with: ".*")
            }
        }
        let mainExpressions = panels.filter { $0["description"]?.stringValue == "main panel" }.flatMap(expressions)
        // Wait (bounded) until Prometheus has scraped enough for every main
        // panel to have data: rates need two scrapes with sends between them.
        let deadline = Date().addingTimeInterval(90)
        var missing = mainExpressions
        while !missing.isEmpty, Date() < deadline {
            var stillMissing: [String] = []
                for expression in missing where (try await query(expression)["data"]?["result"]?.arrayValue ?? []).isEmpty {
                    stillMissing.append(expression)
                }
                missing = stillMissing
            if !missing.isEmpty { try await Task.sleep(for: .milliseconds(250)) }
        }
        #expect(missing.isEmpty, "main panels without data after 90 s: \(missing)")

        #expect(panels.count >= 13)
        for panel in panels {
            let title = panel["title"]?.stringValue ?? "?"
            for expression in expressions(panel) {
                let answer = try await query(expression)
                #expect(answer["status"] == "success", "\(title): \(expression) → \(answer.encodedString())")
            }
        }
        let rules = try String(contentsOf: root.appendingPathComponent("alerts/apns-relay.rules.yml"), encoding: .utf8)
        let expressions = ruleExpressions(rules)
        #expect(expressions.count == 33, "every rule (5 recording, 28 alerts) is evaluated")
        for expression in expressions {
            #expect(try await query(expression)["status"] == "success", "rule expression failed: \(expression)")
        }
        await relay.stop()
    }
}
