import Foundation
import MockAPNs
import RelayJSON
import Testing
import TestSupport

/// `serve` configured only by the OpenTelemetry specification's variables
/// (`OTEL_TRACES_EXPORTER`, `OTEL_SDK_DISABLED`, `OTEL_EXPORTER_OTLP_ENDPOINT`),
/// exporting, or not, to the independent OTLP receiver (otlp_receiver.py).
/// Issue 26: `OTEL_TRACES_EXPORTER=otlp` with the endpoint set exported nothing.
@Suite("OpenTelemetry variables on a running relay")
struct OTelEnvironmentProcessTests {
    /// A mock APNs, the receiver, and `serve` with `tracing.exporter: <file>` (or no
    /// tracing block) and `environment`; the audit spool-only (no Postgres needed).
    static func start(
        _ name: String, file exporter: String?, environment: (UInt16) -> [String: String]
    ) async throws -> (relay: TestRelay, receiver: TraceExportProcessTests.Receiver, serve: RelayProcess, port: UInt16, log: String) {
        let relay = try await TestRelay.start()
        let receiver = try await TraceExportProcessTests.Receiver(file: relay.directory + "/spans-\(name).jsonl")
        let path = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: "otel-env-\(name)", databaseURL: "",
            spool: relay.directory + "/spool-\(name)")
        if let exporter {
            let yaml = try String(contentsOfFile: path, encoding: .utf8) + "\ntracing:\n  exporter: \(exporter)\n  endpoint: http://127.0.0.1:\(receiver.port)\n"
            try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        }
        let log = relay.directory + "/serve-\(name).log"
        let serve = try RelayProcess(arguments: ["serve", "--config", path], environment: environment(receiver.port), standardError: log)
        let port = try await serve.port(after: "apns-relay ingress on")
        return (relay, receiver, serve, port, log)
    }

    @Test("OTEL_TRACES_EXPORTER=otlp and OTEL_EXPORTER_OTLP_ENDPOINT over a file without tracing: the send's three spans reach the receiver")
    func exporterVariableExports() async throws {
        let setup = try await Self.start("otlp", file: nil) { port in
            [
                "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(port)",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "50",
            ]
        }
        defer { Task { _ = await setup.receiver.stop(); await setup.relay.stop() } }
        let traceID = "5bf92f3577b34da6a3ce929d0e0e4736"
        let answer = try await setup.relay.curl(
            "POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(3)),
            headers: ["traceparent: 00-\(traceID)-00f067aa0ba902b7-01"], base: "http://127.0.0.1:\(setup.port)")
        #expect(answer.status == 200, "\(answer)")
        // The verdict is the receiver's file: it waits for the three spans, bounded only as a failure.
        let arrived = await eventually(30) { setup.receiver.spans.filter { $0["trace_id"]?.stringValue == traceID }.count >= 3 }
        #expect(arrived, "the spans reached the receiver: \(setup.receiver.spans.count) spans")
        let names = Set(setup.receiver.spans.filter { $0["trace_id"]?.stringValue == traceID }.compactMap { $0["name"]?.stringValue })
        #expect(names == ["ingress.request", "apns.send", "apns.attempt"])
        setup.serve.signal(SIGTERM)
        #expect(await setup.serve.waitForExit() == 0)
        // Spans went to the collector, not the log.
        let log = try String(contentsOfFile: setup.log, encoding: .utf8)
        #expect(!log.contains(#""record":"span""#), "spans were written as log lines too")
    }

    @Test("OTEL_SDK_DISABLED=true over tracing.exporter: otlp: the relay starts, sends, drains (which exports what is queued), and the receiver got nothing")
    func sdkDisabledExportsNothing() async throws {
        let setup = try await Self.start("disabled", file: "otlp") { _ in ["OTEL_SDK_DISABLED": "TRUE", "OTEL_BSP_SCHEDULE_DELAY": "50"] }
        defer { Task { _ = await setup.receiver.stop(); await setup.relay.stop() } }
        let metricsPort = try await setup.serve.port(after: "apns-relay metrics on")
        let answer = try await setup.relay.curl(
            "POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(4)), base: "http://127.0.0.1:\(setup.port)")
        #expect(answer.status == 200, "\(answer)")
        // No OTLP export runs: its drop counter, made at start for otlp, is absent.
        let scrape = try await setup.relay.curl("GET", "/metrics", key: nil, base: "http://127.0.0.1:\(metricsPort)")
        #expect(!scrape.body.contains("apns_relay_spans_dropped_total{"), "an OTLP exporter was set up")
        // The drain exports every queued span before the process exits (see
        // TraceExportProcessTests): after exit, an exporter would have delivered.
        setup.serve.signal(SIGTERM)
        #expect(await setup.serve.waitForExit() == 0)
        #expect(setup.receiver.lineCount == 0, "spans reached the receiver with OTEL_SDK_DISABLED=true")
        let log = try String(contentsOfFile: setup.log, encoding: .utf8)
        #expect(!log.contains(#""record":"span""#), "spans were written as log lines")
    }

    @Test("an exporter the relay lacks is a warning on start-up and ignored, zipkin over an otlp file too")
    func unsupportedValues() async throws {
        let setup = try await Self.start("bogus", file: "none") { _ in ["OTEL_TRACES_EXPORTER": "prometheus"] }
        defer { Task { _ = await setup.receiver.stop(); await setup.relay.stop() } }
        setup.serve.signal(SIGTERM)
        #expect(await setup.serve.waitForExit() == 0)
        let log = try String(contentsOfFile: setup.log, encoding: .utf8)
        let warning = log.split(separator: "\n").first { $0.contains("OTEL_TRACES_EXPORTER: prometheus is not an exporter apns-relay has") }
        #expect(warning?.contains(#""level":"warning""#) == true, "no start-up warning: \(log.prefix(2000))")

        // check-config shows the same; zipkin over an otlp file is one more such warning.
        let relay = setup.relay
        let path = relay.directory + "/relay.yaml"
        let yaml = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(of: "exporter: none", with: "exporter: otlp")
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        let ignored = try await ProcessRunner.runOffPool(
            ["/usr/bin/env", "OTEL_TRACES_EXPORTER=zipkin", RelayProcess.binary, "check-config", "--config", path, "--skip-keys"])
        #expect(ignored.status == 0, "\(ignored.output)")
        #expect(ignored.output.contains("OTEL_TRACES_EXPORTER: zipkin is not an exporter apns-relay has"), "\(ignored.output)")
        #expect(ignored.output.contains("exporter: otlp"), "\(ignored.output)")
        let shown = try await ProcessRunner.runOffPool(
            ["/usr/bin/env", "OTEL_TRACES_EXPORTER=console", RelayProcess.binary, "check-config", "--config", path, "--skip-keys"])
        #expect(shown.status == 0, "\(shown.output)")
        #expect(shown.output.contains("exporter: log  # from OTEL_TRACES_EXPORTER"), "\(shown.output)")
    }
}
