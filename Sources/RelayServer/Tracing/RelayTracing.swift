import Foundation
public import Logging
import RelayBasics
import Telemetry
public import Tracing

/// The tracer the relay's spans (`ingress.request`, `apns.send`,
/// `apns.attempt`) go through, chosen by `tracing.exporter`, and the
/// background export it needs.
///
/// - `otlp`: ``OTLPTracer`` into the relay's own ``OTLPExporter``: spans
///   wait in a bounded buffer and a thread of the exporter's own posts them
///   to the collector (OTLP/HTTP, protobuf). A full buffer or a failed
///   export drops spans, counted in `apns_relay_spans_dropped_total` when
///   they are dropped, never a send.
/// - `log`: ``JSONSpanTracer``, one JSON log line per span at debug.
/// - `none`: ``JSONSpanTracer`` writing nowhere, so a caller's trace id still
///   reaches the audit row and the log lines.
public final class RelayTracing: Sendable {
    public let tracer: any Tracer
    /// Puts the current trace and span ids on log lines, whichever tracer made the span.
    public let metadataProvider: Logger.MetadataProvider
    /// The OTLP exporter (`otlp` only), its thread not started: the relay's
    /// first part starts it, and its last part shuts it down,
    /// so it exports the buffer after everything else has stopped
    /// (`RelayServer+Lifecycle.swift`).
    let exporter: OTLPExporter?
    /// What the `OTEL_*` variables said that the relay ignored (logged at start).
    let warnings: [String]

    /// The service name when OTEL_SERVICE_NAME does not give one.
    public static let defaultServiceName = "apns-relay"

    /// - Parameters:
    ///   - environment: the process environment: the `OTEL_*` variables the
    ///     exporter reads (``OTLPExportSettings``).
    ///   - dropped: called with each loss, when it happens.
    init(
        settings: ServerConfiguration.TracingSettings, instance: String, version: String, logger: Logger,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        dropped: @escaping @Sendable (OTLPExporter.Drop, Int) -> Void
    ) throws(ConfigurationError) {
        switch settings.exporter {
        case .log:
            tracer = JSONSpanTracer(logger: logger)
            exporter = nil
            warnings = []
        case .none:
            tracer = JSONSpanTracer(logger: Logger(label: "apns-relay.spans") { _ in SwiftLogNoOpLogHandler() })
            exporter = nil
            warnings = []
        case .otlp:
            let resolved = try OTLPExportSettings.resolve(settings, instance: instance, version: version, environment: environment)
            let opener: any OTLPStreamOpener
            switch resolved.endpoint.scheme {
            case .http:
                opener = OTLPPlainOpener()
            case .https:
                do {
                    opener = try OTLPTLSOpener(caFile: resolved.certificateFile)
                } catch {
                    throw ConfigurationError(field: "OTEL_EXPORTER_OTLP_CERTIFICATE", "the OTLP exporter cannot set up TLS: \(error)")
                }
            }
            let configuration = OTLPExporter.Configuration(
                endpoint: resolved.endpoint, headers: resolved.headers, resource: resolved.resource,
                maximumQueueSize: resolved.maximumQueueSize, maximumExportBatchSize: resolved.maximumExportBatchSize,
                scheduleDelayMilliseconds: resolved.scheduleDelayMilliseconds,
                exportTimeoutMilliseconds: resolved.exportTimeoutMilliseconds)
            var exportLogger = logger
            exportLogger[metadataKey: "source"] = "otlp-exporter"
            let exporter = OTLPExporter(
                configuration: configuration, opener: opener, scopeVersion: version, logger: exportLogger, dropped: dropped)
            tracer = OTLPTracer(exporter: exporter, sampler: resolved.sampler)
            self.exporter = exporter
            warnings = resolved.warnings
        }
        metadataProvider = TraceMetadata.provider
    }

    /// Starts the exporter's thread (`otlp`); nothing for the other exporters.
    func start() throws {
        try exporter?.start()
    }

    /// Exports what is buffered within `seconds` (on a thread of its own:
    /// the export blocks), then stops the exporter. Nothing to do without one.
    func shutdown(within seconds: Double) async {
        guard let exporter else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let stop: @Sendable () -> Void = {
                exporter.shutdown(within: seconds)
                continuation.resume()
            }
            // Out of threads: the export is bounded by `seconds`, and the
            // drain is the relay's last work, so a pool thread waits it out
            // rather than the drain waiting forever.
            if (try? DetachedThread.start(name: "relay-otlp-stop", stop)) == nil { stop() }
        }
    }
}
