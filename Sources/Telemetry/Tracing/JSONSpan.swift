public import Instrumentation
public import Logging
import Synchronization
public import Tracing
public import RelayBasics

/// A span from ``JSONSpanTracer``; logs itself as one JSON record at debug
/// when it ends.
///
/// Why debug: at info a send writes one line, `send finished` (apns-id,
/// trace and span ids, token fingerprint, outcome, status, reason, attempts,
/// latency), and its audit row keeps every attempt's status and reason
/// (`attempt_log`). Span lines at info added little to those and cost more
/// than the rest of the send: recording three spans' attributes, then
/// encoding them.
public final class JSONSpan: Span, TraceParentCarrying {
    /// The context the span was started in; ``context`` is it with the
    /// span's identity, made when first read. Most spans' contexts are never
    /// read (a send's span that does not record: its trace id is read from
    /// ``traceParent``), and setting the identity copied the context's
    /// storage and boxed the identity for every span, then freed both.
    private let startContext: InstrumentationContext
    public let identity: SpanIdentity
    public let kind: SpanKind
    private let startNanoseconds: UInt64
    private let logger: Logger
    /// Whether the span will be written when it ends: its logger takes
    /// `debug`. A span that will not be written keeps its identity (the trace
    /// id still reaches the audit row, the answer's `traceparent` and the log
    /// lines) but stores nothing else, and says so through `isRecording`, so
    /// callers need not build attributes nobody reads.
    private let records: Bool

    private struct State {
        var operationName: String
        var attributes = SpanAttributes()
        var status: SpanStatus?
        var events: [SpanEvent] = []
        var errors: [String] = []
        var ended = false
        /// ``context``, once read.
        var context: InstrumentationContext?
    }

    private let state: Mutex<State>

    init(
        operationName: String, kind: SpanKind, context: InstrumentationContext, identity: SpanIdentity,
        startNanoseconds: UInt64, logger: Logger
    ) {
        self.startContext = context
        self.identity = identity
        self.kind = kind
        self.startNanoseconds = startNanoseconds
        self.logger = logger
        self.records = logger.logLevel <= .debug
        self.state = Mutex(State(operationName: operationName))
    }

    /// The context the span was started in, with the span's identity: its
    /// children's parent, what ``JSONSpanTracer`` injects.
    public var context: InstrumentationContext {
        state.withLock { .spanContext(cachedIn: &$0.context, startedIn: startContext, identity: identity) }
    }

    /// What ``JSONSpanTracer`` injects for ``context``: this span's identity.
    public var traceParent: TraceParent { identity.traceParent }

    public var operationName: String {
        get { state.withLock { $0.operationName } }
        set { state.withLock { $0.operationName = newValue } }
    }

    public var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set {
            guard records else { return }
            state.withLock { $0.attributes = newValue }
        }
    }

    public var isRecording: Bool { records && state.withLock { !$0.ended } }

    public func setStatus(_ status: SpanStatus) {
        guard records else { return }
        state.withLock { $0.status = status }
    }

    public func addEvent(_ event: SpanEvent) {
        guard records else { return }
        state.withLock { $0.events.append(event) }
    }

    /// Records the error's type and description. Callers must only pass
    /// errors whose description is safe to log (the relay's errors never
    /// contain tokens or keys).
    public func recordError<Instant: TracerInstant>(
        _ error: Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant
    ) {
        guard records else { return }
        state.withLock { $0.errors.append("\(type(of: error)): \(error)") }
    }

    public func addLink(_ link: SpanLink) {}

    public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        guard records else { return }
        let endNanoseconds = instant().nanosecondsSinceEpoch
        guard let finished = state.withLock({ state -> State? in
            guard !state.ended else { return nil }
            state.ended = true
            return state
        }) else { return }

        var attributes: [String: Logger.MetadataValue] = [:]
        finished.attributes.forEach { name, value in attributes[name] = Self.metadata(value) }
        var metadata: Logger.Metadata = [
            "record": "span",
            "trace_id": .string(identity.traceID),
            "span_id": .string(identity.spanID),
            "name": .string(finished.operationName),
            "kind": .string("\(kind)"),
            "start": .string(RFC3339.format(nanoseconds: startNanoseconds)),
            "duration_ms": .stringConvertible(Double(endNanoseconds &- startNanoseconds) / 1_000_000),
            "status": .string(finished.status?.code == .error ? "error" : finished.status?.code == .ok ? "ok" : "unset"),
            "attributes": .dictionary(attributes),
        ]
        if let parent = identity.parentSpanID { metadata["parent_span_id"] = .string(parent) }
        if let message = finished.status?.message { metadata["status_message"] = .string(message) }
        if !finished.errors.isEmpty { metadata["errors"] = .array(finished.errors.map { .string($0) }) }
        if !finished.events.isEmpty { metadata["events"] = .array(finished.events.map { .string($0.name) }) }
        logger.debug("span", metadata: metadata)
    }

    static func metadata(_ attribute: SpanAttribute) -> Logger.MetadataValue {
        switch attribute {
        case .int32(let value): .stringConvertible(value)
        case .int64(let value): .stringConvertible(value)
        case .double(let value): .stringConvertible(value)
        case .bool(let value): .stringConvertible(value)
        case .string(let value): .string(value)
        case .int32Array(let values): .array(values.map { .stringConvertible($0) })
        case .int64Array(let values): .array(values.map { .stringConvertible($0) })
        case .doubleArray(let values): .array(values.map { .stringConvertible($0) })
        case .boolArray(let values): .array(values.map { .stringConvertible($0) })
        case .stringArray(let values): .array(values.map { .string($0) })
        case .stringConvertible(let value): .string(value.description)
        case .stringConvertibleArray(let values): .array(values.map { .string($0.description) })
        default: .string("\(attribute)")
        }
    }
}
