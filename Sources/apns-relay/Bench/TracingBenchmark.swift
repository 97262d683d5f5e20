import ArgumentParser
import Foundation
import RelayServer

/// `apns-relay bench tracing`: what OTLP export costs a send, with the collector up and down.
struct TracingBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tracing",
        abstract: "Sends/s through the ingress with spans exported over OTLP against none, and with the collector down.",
        discussion: """
            Three closed loops through POST /v1/send on the same machine (as bench ingress runs them, audit to \
            the spool): tracing.exporter none; otlp to --endpoint (an OTLP/HTTP collector or \
            scripts/lib/otlp_receiver.py); otlp to a port nothing listens on (the collector down: every export \
            fails, spans are dropped and counted). Prints sends/s of each and its ratio against none \
            (target ≥ 0.9).
            """)

    @Option(help: "Sends per closed-loop run.") var requests = 30_000
    @Option(help: "Keep-alive client connections (one thread each).") var connections = 8
    @Option(help: "The OTLP/HTTP collector's base URL (http://127.0.0.1:4318).") var endpoint: String

    func run() async throws {
        let logger = makeLogger(level: "error")
        var results: [(String, Double, Int)] = []
        var down = ServerConfiguration.TracingSettings()
        down.exporter = .otlp
        // Port 1 on loopback: connections are refused at once, as when a collector is down.
        down.endpoint = "http://127.0.0.1:1"
        var up = down
        up.endpoint = endpoint
        var off = ServerConfiguration.TracingSettings()
        off.exporter = .none
        for (label, settings) in [("exporter none", off), ("otlp, collector up", up), ("otlp, collector down", down)] {
            let environment = try await DemoEnvironment.start(databaseURL: nil, logger: logger, scriptedFaults: false, tracing: settings)
            _ = try await IngressBenchmark.closedLoop(environment: environment, requests: min(2000, requests), connections: connections)
            let run = try await IngressBenchmark.closedLoop(environment: environment, requests: requests, connections: connections)
            await environment.stop()
            results.append((label, run.rate, run.failures))
        }
        let base = results[0].1
        for (label, rate, failures) in results {
            print(String(format: "%@: %.0f sends/s (%d failed), %.2f of none%@", label, rate, failures, rate / base,
                         label == "exporter none" ? "" : (rate / base >= 0.9 ? " (target ≥ 0.9: met)" : " (target ≥ 0.9: NOT met)")))
        }
    }
}
