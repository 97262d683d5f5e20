import Logging
@testable import RelayServer
import Synchronization
import Testing

/// The `tracing:` block, and how swift-otel's diagnostic records become the drop counter.
@Suite("Tracing configuration and swift-otel diagnostics")
struct TracingConfigurationTests {
    /// The least a configuration file must hold (one app, one API key).
    static let apps = ConfigurationTests.apps

    @Test("tracing: read, range-checked, shown; log is the default")
    func tracingBlock() throws {
        #expect(ServerConfiguration(instance: "x").tracing.exporter == .log)
        let yaml = Self.apps + """
            tracing:
              exporter: otlp
              endpoint: http://collector:4318
              sampling: {ratio: 0.25, parent_based: false}
              max_queue_size: 4096
              schedule_delay_ms: 200
            """
        let configuration = try ServerConfiguration.parse(yaml: yaml, file: "/tmp/relay.yaml", environment: [:])
        #expect(configuration.tracing.exporter == .otlp)
        #expect(configuration.tracing.endpoint == "http://collector:4318")
        #expect(configuration.tracing.samplingRatio == 0.25)
        #expect(configuration.tracing.parentBased == false)
        #expect(configuration.tracing.maximumQueueSize == 4096)
        #expect(configuration.tracing.scheduleDelayMilliseconds == 200)
        #expect(configuration.maskedDescription.contains("exporter: otlp"))
        // A base URL, like OTEL_EXPORTER_OTLP_ENDPOINT: the traces path is appended.
        let otel = RelayTracing.otelConfiguration(
            configuration.tracing, instance: "relay-1", version: "1.2.3", diagnostics: Logger(label: "x"))
        #expect(otel.traces.otlpExporter.endpoint == "http://collector:4318/v1/traces")
        #expect(RelayTracing.tracesURL(base: "https://c.example/otlp/") == "https://c.example/otlp/v1/traces")
        #expect(otel.resourceAttributes == ["service.version": "1.2.3", "service.instance.id": "relay-1"])
        #expect(otel.serviceName == "apns-relay")
        #expect(otel.traces.batchSpanProcessor.maxQueueSize == 4096)

        for (bad, field) in [
            ("tracing:\n  exporter: jaeger\n", "tracing.exporter"),
            ("tracing:\n  endpoint: collector:4317\n", "tracing.endpoint"),
            ("tracing:\n  sampling: {ratio: 1.5}\n", "tracing.sampling.ratio"),
            ("tracing:\n  max_queue_size: 10\n  max_export_batch_size: 20\n", "tracing.max_export_batch_size"),
            ("tracing:\n  sample_rate: 1\n", "tracing.sample_rate"),
        ] {
            #expect {
                try ServerConfiguration.parse(yaml: Self.apps + bad, file: "/tmp/relay.yaml", environment: [:])
            } throws: { error in
                (error as? ConfigurationError)?.field == field
            }
        }
    }

    @Test("swift-otel's drop records count spans; other records count nothing")
    func dropRecords() {
        let counted = Box<[String: Int]>([:])
        var logger = Logger(label: "swift-otel") { _ in
            OTelDiagnostics(relayLogger: Logger(label: "x") { _ in SwiftLogNoOpLogHandler() }) { drop, count in
                counted.value.withLock { $0[drop.rawValue, default: 0] += count }
            }
        }
        // OTEL_LOG_LEVEL=error must not silence the counter.
        logger.logLevel = .error
        logger.warning("Spans were dropped this iteration because queue was full", metadata: ["queue_size": "2048", "dropped_count": "17"])
        var batchLogger = logger
        batchLogger[metadataKey: "batch_id"] = "3"
        batchLogger[metadataKey: "batch_size"] = "512"
        batchLogger.warning("Failed to export batch.", metadata: ["error": "connection refused"])
        batchLogger.warning("Force flush failed.")
        logger.info("Configuration updated from environment")
        #expect(counted.value.withLock { $0 } == ["queue_full": 17, "export_failed": 512])
    }

    @Test("the value of an OTEL_*_HEADERS variable never reaches the log")
    func headersRedacted() {
        let lines = Box<[String]>([])
        let relayLogger = Logger(label: "relay") { _ in RecordingHandler(lines: lines) }
        var logger = Logger(label: "swift-otel") { _ in OTelDiagnostics(relayLogger: relayLogger) { _, _ in } }
        logger[metadataKey: "environment_key"] = "OTEL_EXPORTER_OTLP_HEADERS"
        logger[metadataKey: "environment_value"] = "api-key=s3cret"
        logger[metadataKey: "new_value"] = "[(\"api-key\", \"s3cret\")]"
        logger.warning("Failed to update configuration from environment")
        let written = lines.value.withLock { $0 }
        #expect(written.count == 1)
        #expect(!written.joined().contains("s3cret"), "\(written)")
    }

    private final class Box<Value: Sendable>: Sendable {
        let value: Mutex<Value>
        init(_ value: Value) { self.value = Mutex(value) }
    }

    private struct RecordingHandler: LogHandler {
        let lines: Box<[String]>
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { _, new in new }
            lines.value.withLock { $0.append("\(event.message) \(all)") }
        }
    }
}
