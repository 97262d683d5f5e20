import Logging

/// Where swift-otel's own log records go: counted when they report lost
/// spans, stripped of secrets, and written through the relay's logger.
///
/// swift-otel 1.6 keeps its span processor and exporter internal: the only
/// place it reports a lost span is its diagnostic log. Its batch processor
/// logs "Spans were dropped this iteration because queue was full" with
/// `dropped_count` (spans refused while the queue was full since the last
/// export), and "Failed to export batch." with `batch_size` (a batch the
/// collector did not take: down, slow past the export timeout, or an error
/// status). Both land here and become `apns_relay_spans_dropped_total`.
/// `SpanExportAccountingTests` and the end-to-end receiver test hold these
/// records to the spans a receiver actually got.
struct OTelDiagnostics: LogHandler {
    /// A span loss, by the metric's `reason` label.
    enum Drop: String, CaseIterable {
        case queueFull = "queue_full"
        case exportFailed = "export_failed"
    }

    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    /// The level swift-otel asks for (its `diagnosticLogLevel`, or `OTEL_LOG_LEVEL`):
    /// what is written. The drop records are warnings, so they always reach
    /// the handler, whatever was asked: the counter must not depend on it.
    var logLevel: Logger.Level {
        get { min(requestedLevel, .warning) }
        set { requestedLevel = newValue }
    }
    private var requestedLevel: Logger.Level = .warning
    let relayLogger: Logger
    let dropped: @Sendable (Drop, Int) -> Void

    init(relayLogger: Logger, dropped: @escaping @Sendable (Drop, Int) -> Void) {
        self.relayLogger = relayLogger
        self.dropped = dropped
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let eventMetadata = event.metadata { merged.merge(eventMetadata) { _, new in new } }
        if let drop = Self.drop(message: event.message.description, metadata: merged) {
            dropped(drop.reason, drop.count)
        }
        guard event.level >= requestedLevel else { return }
        Self.redact(&merged)
        merged["source"] = "swift-otel"
        relayLogger.log(level: event.level, "\(event.message)", metadata: merged)
    }

    /// The spans a diagnostic record says were lost, if it says so.
    static func drop(message: String, metadata: Logger.Metadata) -> (reason: Drop, count: Int)? {
        switch message {
        case "Spans were dropped this iteration because queue was full":
            guard let count = metadata["dropped_count"].flatMap({ Int("\($0)") }) else { return nil }
            return (.queueFull, count)
        case "Failed to export batch.":
            guard let count = metadata["batch_size"].flatMap({ Int("\($0)") }) else { return nil }
            return (.exportFailed, count)
        default:
            return nil
        }
    }

    /// swift-otel logs every environment override with its value (and a
    /// malformed one at warning): `OTEL_EXPORTER_OTLP_HEADERS` carries the
    /// collector's credentials, so no value of a headers variable is written.
    static func redact(_ metadata: inout Logger.Metadata) {
        guard let key = metadata["environment_key"], "\(key)".uppercased().contains("HEADERS") else { return }
        for name in ["environment_value", "previous_value", "new_value"] where metadata[name] != nil {
            metadata[name] = "<redacted>"
        }
    }
}
