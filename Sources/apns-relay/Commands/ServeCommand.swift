import ArgumentParser
import CProcess
import Foundation
import Logging
import RelayServer
import Telemetry

/// Where a command finds its configuration file.
struct ConfigurationOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: "The YAML configuration file (default: $APNS_RELAY_CONFIG). See deploy/apns-relay.example.yaml.")
    var file: String?

    func load() throws -> ServerConfiguration {
        let environment = ProcessInfo.processInfo.environment
        guard let path = file ?? environment[ServerConfiguration.Variable.configFile], !path.isEmpty else {
            throw ValidationError("give --config FILE or set \(ServerConfiguration.Variable.configFile)")
        }
        do {
            return try ServerConfiguration.load(file: path, environment: environment)
        } catch {
            throw ConfigurationFailure(message: "\(error)")
        }
    }
}

/// A configuration the relay would refuse: printed as `configuration error: …`, exit status 1.
struct ConfigurationFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { "configuration error: \(message)" }
}

/// Writes a line to standard output at once (`print` is block-buffered
/// when stdout is a pipe, and scripts wait for these lines), never blocking
/// and never failing the process (``StandardOutput``); false when standard
/// output did not take it.
@discardableResult
func printUnbuffered(_ line: String) -> Bool {
    StandardOutput.writeLine(line)
}

/// A logger writing JSON lines to standard error at `level`.
func makeLogger(level: String) -> Logger {
    Logger(label: "apns-relay") { label in
        JSONLogHandler(label: label, level: Logger.Level(rawValue: level) ?? .info)
    }
}

/// `apns-relay serve`: the relay itself.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the relay: the ingress API, the APNs connections, the audit writer and /metrics.",
        discussion: """
            Reads one YAML file (--config or APNS_RELAY_CONFIG) and environment variables, which win \
            (APNS_RELAY_DATABASE_URL, APNS_RELAY_INGRESS_LISTEN, APNS_RELAY_METRICS_LISTEN, \
            APNS_RELAY_APP_<NAME>_KEY_PATH, APNS_RELAY_DISABLE_RETRY, …; see deploy/apns-relay.example.yaml). \
            OpenTelemetry's OTEL_TRACES_EXPORTER (otlp, console, none) and OTEL_SDK_DISABLED win over \
            tracing.exporter; OTEL_EXPORTER_OTLP_* name the collector. \
            Logs are JSON lines on standard error. Standard output gets one line per listener once the \
            listeners are bound, and nothing else: 'apns-relay ingress on http://HOST:PORT', \
            'apns-relay metrics on http://HOST:PORT/metrics' and, when apns_ingress.listen is set, \
            'apns-relay apns_ingress on https://HOST:PORT' (http:// with apns_ingress.tls false) \
            (the bound port; a stable format for scripts, docs/operations.md).

            SIGTERM or SIGINT: intake stops (new connections are refused, new requests on open ones get 503 Draining, /readyz fails), in-flight \
            sends finish within shutdown.drain_timeout_seconds, every audit row is written to Postgres or \
            the spool, queued spans are exported, and the process exits 0. The whole drain is bounded by \
            shutdown.drain_timeout_seconds + 10 s; a part that fails, or does not stop within that, is named \
            in the log and the process exits 1. Log lines wait in a bounded buffer (1 MiB) that a thread writes \
            to standard error: when the log reader stalls, lines are dropped whole and counted \
            (apns_relay_log_lines_dropped_total), never a send; at exit what is buffered is written within 5 s more. \
            SIGHUP, SIGUSR1 and SIGUSR2 are logged and ignored (there is no reload: restart to apply a change).
            """)

    @OptionGroup var config: ConfigurationOptions
    /// The audit-off reference of scripts/bench (audit on vs off, measured
    /// from outside the process). Never for a real deployment: answered sends
    /// would have no audit row.
    @Flag(help: .hidden) var benchmarkWithoutAudit = false

    func run() async throws {
        let configuration = try config.load()
        let logger = makeLogger(level: configuration.logLevel)
        // Before anything starts: a SIGHUP from here on is logged, not the end.
        let ignoredSignals = IgnoredSignals.install(logger: logger)
        defer { withExtendedLifetime(ignoredSignals) {} }
        let server: RelayServer
        do {
            // Built without side effects, then started part by part: a part
            // that cannot start (a port in use) leaves nothing running.
            let components = try RelayComponents(configuration: configuration, logger: logger, recordsAudit: !benchmarkWithoutAudit)
            server = try await RelayServer.start(components, drainingOnSignals: true)
        } catch {
            logger.critical("apns-relay could not start", metadata: ["error": "\(error)"])
            throw ExitCode(1)
        }
        if benchmarkWithoutAudit { logger.warning("--benchmark-without-audit: sends are not audited (a benchmark reference only)") }
        // Said once, where it can be read: standard output's lines went nowhere.
        let reopened = apns_relay_standard_descriptors_reopened()
        if reopened & 0b110 != 0 {
            logger.warning(
                "standard output or standard error was closed when serve started; it was reopened on /dev/null",
                metadata: ["stdout_closed": "\(reopened & 0b010 != 0)", "stderr_closed": "\(reopened & 0b100 != 0)"])
        }
        // Plain lines on stdout for people and scripts waiting for the ports:
        // a stable interface, documented in docs/operations.md ("What `serve`
        // writes") and held to it by ServeProcessTests.banners.
        var banners = [
            "apns-relay ingress on http://\(server.ingressAddress)", "apns-relay metrics on http://\(server.metricsAddress)/metrics",
        ]
        // The HTTP/2 APNs ingress, only when apns_ingress.listen is set: https with TLS (ALPN h2), http for cleartext h2.
        if let address = server.apnsIngressAddress {
            banners.append("apns-relay apns_ingress on \(configuration.apnsIngress.tls ? "https" : "http")://\(address)")
        }
        // A reader gone (`serve | head -1`) or not reading costs the lines, never the relay.
        let untaken = banners.filter { !printUnbuffered($0) }.count
        if untaken > 0 {
            logger.warning(
                "standard output did not take the port lines (its reader is gone or not reading); the addresses are in the 'apns-relay serving' line",
                metadata: ["lines_not_written": "\(untaken)"])
        }
        // Until SIGTERM or SIGINT has drained every part (the relay's
        // ServiceGroup), or a part failed: logged by the server, naming it.
        // Then the log lines still buffered, and a closing line with the
        // log's totals, within LogSink.closeBound: a log collector that takes
        // nothing does not keep the process alive.
        do {
            try await server.run()
        } catch {
            LogSink.standardError.flush(within: LogSink.closeBound)
            throw ExitCode(1)
        }
        LogSink.standardError.flush(within: LogSink.closeBound)
    }
}

/// `apns-relay check-config`: validate a configuration and print what it resolves to.
struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a configuration file (and the environment) and print the resolved settings, secrets masked.",
        discussion: "Exits 0 when the relay would start with it, 1 with the setting and the rule when not. Key files are opened and checked too.")

    @OptionGroup var config: ConfigurationOptions
    @Flag(help: "Do not open the key files (a CI machine without the production keys).") var skipKeys = false

    func run() throws {
        let configuration = try config.load()
        do {
            if !skipKeys { try configuration.checkCredentials() }
        } catch {
            throw ConfigurationFailure(message: "\(error)")
        }
        print(configuration.maskedDescription, terminator: "")
    }
}
