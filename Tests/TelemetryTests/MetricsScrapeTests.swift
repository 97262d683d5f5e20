import APNs
import Foundation
import HTTPServer
import Logging
import MockAPNs
import Relay
import Telemetry
import TestSupport
import Testing

/// Runs a command-line tool and returns its status and output.
/// Runs a command-line tool off the cooperative pool and returns its status and output.
func runTool(_ arguments: [String], input: String? = nil) async throws -> (Int32, String) {
    try await ProcessRunner.runOffPool(arguments, input: input.map { Data($0.utf8) })
}

/// The value of the sample `name{labels}` in an exposition text, 0 when absent.
func sample(_ text: String, _ series: String) -> Double {
    for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
        return Double(line.split(separator: " ").last!) ?? .nan
    }
    return 0
}

@Suite("Prometheus metrics")
struct MetricsScrapeTests {
    @Test("after a mixed run, a live scrape passes promtool check metrics and the counters equal the sends made")
    func scrapeAfterMixedRun() async throws {
        let fixture = try MetricsFixture(keyID: "METRICKEY1", teamID: "METRICTEAM", rules: [
            MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1)),
            MockRule(.tokenPrefix("f1a7"), [.reject(reason: "ServiceUnavailable"), .succeed]),
            MockRule(.tokenPrefix("7007"), [.tooManyRequests(retryAfterSeconds: 0), .succeed]),
        ])
        defer { fixture.keys.remove() }
        let (metrics, killSwitch) = (fixture.metrics, fixture.killSwitch)
        let prefixes = ["dead", "f1a7", "7007", "0000"]
        for index in 0..<200 {
            await fixture.sendAlert(token: prefixes[index % 4] + String(format: "%060d", index))
        }
        killSwitch.setRuntime(engaged: true)

        var router = Router()
        MetricsEndpoint(
            metrics: metrics, sources: MetricSources(retryDisabled: { killSwitch.isEngaged }),
            buildInfo: [("version", "test"), ("openssl", "3")]
        ).install(on: &router)
        let server = try HTTPServer(router: router)
        let (status, scrape) = try await runTool(["curl", "-sf", "--compressed", "http://127.0.0.1:\(server.port)/metrics"])
        #expect(status == 0)

        let (checkStatus, lint) = try await runTool(["promtool", "check", "metrics"], input: scrape)
        #expect(checkStatus == 0, "promtool check metrics: \(lint)")
        #expect(sample(scrape, #"apns_relay_sends_total{app="shop",operation="alert",outcome="success",reason="none"}"#) == 150)
        #expect(sample(scrape, #"apns_relay_sends_total{app="shop",operation="alert",outcome="rejected",reason="Unregistered"}"#) == 50)
        #expect(sample(scrape, #"apns_relay_attempts_total{app="shop",operation="alert",status_class="5xx"}"#) == 50)
        #expect(sample(scrape, #"apns_relay_attempts_total{app="shop",operation="alert",status_class="4xx"}"#) == 100)
        #expect(sample(scrape, #"apns_relay_attempts_total{app="shop",operation="alert",status_class="2xx"}"#) == 150)
        #expect(sample(scrape, #"apns_relay_retries_total{operation="alert",reason="ServiceUnavailable"}"#) == 50)
        #expect(sample(scrape, #"apns_relay_retries_total{operation="alert",reason="TooManyRequests"}"#) == 50)
        #expect(sample(scrape, #"apns_relay_trap_hits_total{trap="MS020",operation="alert"}"#) == 50)
        #expect(sample(scrape, #"apns_relay_send_duration_seconds_count{operation="alert"}"#) == 200)
        #expect(sample(scrape, #"apns_relay_jwt_mints_total{app="shop"}"#) == 1)
        #expect(sample(scrape, "apns_relay_retry_disabled") == 1)
        #expect(sample(scrape, "process_resident_memory_bytes") > 1_000_000)
        #expect(sample(scrape, "process_open_fds") > 3)
        #expect(scrape.contains(#"apns_relay_build_info{version="test",openssl="3"} 1"#))

        let (_, health) = try await runTool(["curl", "-s", "http://127.0.0.1:\(server.port)/healthz"])
        #expect(health == "ok\n")
        await server.stop()
    }
}
