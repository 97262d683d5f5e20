import Instrumentation
public import Logging
public import Relay
import RelayBasics

/// A swift-log handler that writes one JSON object per line:
/// `{"ts":…,"level":…,"logger":…,"msg":…, …metadata}`.
///
/// Metadata keeps its types where swift-log lets it (numbers and booleans
/// stay JSON numbers and booleans), nested dictionaries become objects, and
/// keys are sorted so lines diff cleanly. The line is written straight into
/// bytes (``LogLineEncoder``) and handed to the sink, which never blocks the
/// caller (``LogSink``).
public struct JSONLogHandler: LogHandler, SortedFieldsLogging {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level
    private let label: String
    private let sink: LogSink

    public init(label: String, sink: LogSink = .standardError, level: Logger.Level = .info,
                metadataProvider: Logger.MetadataProvider? = TraceMetadata.provider) {
        self.label = label
        self.sink = sink
        self.logLevel = level
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line: [UInt8] = []
        line.reserveCapacity(512)
        LogLineEncoder.encode(
            timestampNanoseconds: UnixTime.nowNanoseconds(), level: event.level, label: label,
            message: event.message.description, handler: metadata, provided: metadataProvider?.get(), event: event.metadata,
            into: &line)
        sink.write(line)
    }

    /// The line ``log(event:)`` writes for `fields` as `.string` metadata,
    /// without that dictionary: a send's `send finished` line.
    public func log(level: Logger.Level, message: StaticString, sortedFields fields: UnsafeBufferPointer<LogField>) {
        guard level >= logLevel else { return }
        let line = LogLineEncoder.line(
            timestampNanoseconds: UnixTime.nowNanoseconds(), level: level, label: label, message: message.description,
            handler: metadata, provided: metadataProvider?.get(), sortedFields: fields)
        sink.write(line)
    }
}

/// Puts the current span's ids on every log line written inside it.
public enum TraceMetadata {
    public static let provider = Logger.MetadataProvider {
        guard let identity = InstrumentationContext.current?.spanIdentity else { return [:] }
        return ["trace_id": .string(identity.traceID), "span_id": .string(identity.spanID)]
    }
}
