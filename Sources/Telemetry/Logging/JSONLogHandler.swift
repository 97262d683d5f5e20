public import Instrumentation
public import Logging
import RelayJSON
import Synchronization
import RelayBasics

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A swift-log handler that writes one JSON object per line:
/// `{"ts":…,"level":…,"logger":…,"msg":…, …metadata}`.
///
/// Metadata keeps its types where swift-log lets it (numbers and booleans
/// stay JSON numbers and booleans), nested dictionaries become objects, and
/// keys are sorted so lines diff cleanly.
public struct JSONLogHandler: LogHandler {
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
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let eventMetadata = event.metadata { merged.merge(eventMetadata) { _, new in new } }

        var object = JSONObject()
        object["ts"] = .string(RFC3339.format(nanoseconds: UnixTime.nowNanoseconds()))
        object["level"] = .string(event.level.rawValue)
        object["logger"] = .string(label)
        object["msg"] = .string(event.message.description)
        for key in merged.keys.sorted() where object[key] == nil {
            object[key] = Self.json(merged[key]!)
        }
        var line = JSONValue.object(object).encoded()
        line.append(UInt8(ascii: "\n"))
        sink.write(line)
    }

    static func json(_ value: Logger.MetadataValue) -> JSONValue {
        switch value {
        case .string(let text):
            return .string(text)
        case .stringConvertible(let convertible):
            switch convertible {
            case let number as Int: return .integer(Int64(number))
            case let number as Int64: return .integer(number)
            case let number as Int32: return .integer(Int64(number))
            case let number as UInt32: return .integer(Int64(number))
            case let number as Double where number.isFinite: return .double(number)
            case let flag as Bool: return .bool(flag)
            default: return .string(convertible.description)
            }
        case .dictionary(let dictionary):
            return .object(JSONObject(dictionary.keys.sorted().map { ($0, json(dictionary[$0]!)) }))
        case .array(let values):
            return .array(values.map(json))
        }
    }
}

/// Where JSON log lines go: standard error by default, or a closure (tests
/// capture every line to scan it for secrets).
public final class LogSink: Sendable {
    private let lock = Mutex(())
    private let writeLine: @Sendable ([UInt8]) -> Void

    public init(_ writeLine: @escaping @Sendable ([UInt8]) -> Void) {
        self.writeLine = writeLine
    }

    /// Unbuffered writes to file descriptor 2, one line per write(2) so lines
    /// from concurrent tasks never interleave.
    public static let standardError = LogSink { line in
        line.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(2, bytes.baseAddress! + offset, bytes.count - offset)
                if written <= 0 { return }
                offset += written
            }
        }
    }

    func write(_ line: [UInt8]) {
        lock.withLock { _ in writeLine(line) }
    }
}

/// Puts the current span's ids on every log line written inside it.
public enum TraceMetadata {
    public static let provider = Logger.MetadataProvider {
        guard let identity = InstrumentationContext.current?.spanIdentity else { return [:] }
        return ["trace_id": .string(identity.traceID), "span_id": .string(identity.spanID)]
    }
}
