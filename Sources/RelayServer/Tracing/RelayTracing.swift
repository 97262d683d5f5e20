import Foundation
public import Logging
import OTel
import ServiceLifecycle
import Telemetry
public import Tracing

/// The tracer the relay's spans (`ingress.request`, `apns.send`,
/// `apns.attempt`) go through, chosen by `tracing.exporter`, and the
/// background export it needs.
///
/// - `otlp`: swift-otel's tracer with its batch span processor and OTLP/HTTP
///   (protobuf) exporter. Spans wait in a bounded queue and are exported in
///   the background; a full queue or a failed export drops them (counted in
///   `apns_relay_spans_dropped_total`), never a send.
/// - `log`: ``JSONSpanTracer``, one JSON log line per span at debug.
/// - `none`: ``JSONSpanTracer`` writing nowhere, so a caller's trace id still
///   reaches the audit row and the log lines.
public final class RelayTracing: Sendable {
    public let tracer: any Tracer
    /// Puts the current trace and span ids on log lines, whichever tracer made the span.
    public let metadataProvider: Logger.MetadataProvider
    /// swift-otel's batch processor and exporter (`otlp` only): a lifecycle
    /// service that runs as the relay's last part, so its graceful shutdown
    /// exports the queue after everything else has stopped
    /// (`RelayServer+Lifecycle.swift`).
    let exportService: (any Service)?

    /// The service name when OTEL_SERVICE_NAME does not give one.
    public static let defaultServiceName = "apns-relay"

    /// - Parameters:
    ///   - environment: the process environment; swift-otel reads the standard
    ///     `OTEL_*` variables from the process itself, this only decides the defaults.
    ///   - dropped: called with each loss swift-otel reports.
    init(
        settings: ServerConfiguration.TracingSettings, instance: String, version: String, logger: Logger,
        dropped: @escaping @Sendable (OTelDiagnostics.Drop, Int) -> Void
    ) throws {
        switch settings.exporter {
        case .log:
            tracer = JSONSpanTracer(logger: logger)
            metadataProvider = TraceMetadata.provider
            exportService = nil
        case .none:
            tracer = JSONSpanTracer(logger: Logger(label: "apns-relay.spans") { _ in SwiftLogNoOpLogHandler() })
            metadataProvider = TraceMetadata.provider
            exportService = nil
        case .otlp:
            let diagnostics = Logger(label: "swift-otel") { _ in OTelDiagnostics(relayLogger: logger, dropped: dropped) }
            let configuration = Self.otelConfiguration(settings, instance: instance, version: version, diagnostics: diagnostics)
            let backend: (factory: any Tracer, service: any Service)
            do {
                let made = try OTel.makeTracingBackend(configuration: configuration)
                backend = (made.factory, made.service)
            } catch {
                throw ConfigurationError(field: "tracing", "the OTLP exporter cannot start: \(error)")
            }
            tracer = backend.factory
            metadataProvider = Logger.MetadataProvider.multiplex([TraceMetadata.provider, OTel.makeLoggingMetadataProvider()]) ?? TraceMetadata.provider
            exportService = backend.service
        }
    }

    /// swift-otel's configuration from the `tracing:` block; the `OTEL_*`
    /// variables are applied on top of it by swift-otel and win.
    static func otelConfiguration(
        _ settings: ServerConfiguration.TracingSettings, instance: String, version: String, diagnostics: Logger
    ) -> OTel.Configuration {
        var configuration = OTel.Configuration.default
        configuration.serviceName = defaultServiceName
        configuration.resourceAttributes = ["service.version": version, "service.instance.id": instance]
        configuration.diagnosticLogger = .custom(diagnostics)
        // Drops are reported at warning; below it swift-otel's records are per-batch chatter.
        configuration.diagnosticLogLevel = .warning
        configuration.propagators = [.traceContext]
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        configuration.traces.enabled = true
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        // swift-otel takes an endpoint set in code as the traces URL itself (as it would
        // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); `tracing.endpoint` is a base URL like
        // OTEL_EXPORTER_OTLP_ENDPOINT, which still wins and gets /v1/traces appended by swift-otel.
        if let endpoint = settings.endpoint { configuration.traces.otlpExporter.endpoint = tracesURL(base: endpoint) }
        configuration.traces.otlpExporter.timeout = .milliseconds(settings.exportTimeoutMilliseconds)
        let ratio = settings.samplingRatio
        configuration.traces.sampler =
            (settings.parentBased ? .parentBasedTraceIDRatio(ratio: ratio) : .traceIDRatio(ratio: ratio)) ?? .parentBasedAlwaysOn
        configuration.traces.batchSpanProcessor.maxQueueSize = settings.maximumQueueSize
        configuration.traces.batchSpanProcessor.maxExportBatchSize = settings.maximumExportBatchSize
        configuration.traces.batchSpanProcessor.scheduleDelay = .milliseconds(settings.scheduleDelayMilliseconds)
        configuration.traces.batchSpanProcessor.exportTimeout = .milliseconds(settings.exportTimeoutMilliseconds)
        return configuration
    }

    /// The OTLP/HTTP traces URL under a base URL, as the OpenTelemetry specification builds it.
    static func tracesURL(base: String) -> String {
        base.hasSuffix("/") ? base + "v1/traces" : base + "/v1/traces"
    }
}
