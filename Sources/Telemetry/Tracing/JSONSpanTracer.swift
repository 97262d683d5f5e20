public import Relay
public import Instrumentation
public import Logging
public import Tracing
public import RelayBasics

/// A tracer that writes every finished span as one JSON log line.
///
/// No collector is needed to see a trace: each span becomes a log record
/// (`trace_id`, `span_id`, `parent_span_id`, `name`, `start`, `duration_ms`,
/// `status`, `attributes`) that any log pipeline can index, and log lines
/// written inside a span carry the same `trace_id` (see
/// ``TraceMetadataProvider``). W3C `traceparent` is extracted and injected
/// (the value is RelayBasics' `TraceParent`; any carrier works, the relay's
/// own is `HTTPHeaderPropagation`).
public struct JSONSpanTracer: SpanIdentityTracer {
    public typealias Span = JSONSpan

    let logger: Logger

    /// - Parameter logger: where finished spans are written: a span whose
    ///   status is error (or that recorded an error) at `info`, the others at
    ///   `debug`, so at the default level a send that went well writes only
    ///   its `send finished` line.
    public init(logger: Logger) {
        self.logger = logger
    }

    public func startSpan<Instant: TracerInstant>(
        _ operationName: String,
        context: @autoclosure () -> InstrumentationContext,
        ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant,
        function: String,
        file fileID: String,
        line: UInt
    ) -> JSONSpan {
        // The span sets its identity in the context only when the context is read.
        let spanContext = context()
        let identity: SpanIdentity
        if let parent = spanContext.spanIdentity {
            identity = SpanIdentity(
                traceID: parent.traceID, spanID: TraceParent.randomSpanID(), parentSpanID: parent.spanID,
                sampled: parent.sampled)
        } else if let remote = spanContext.remoteParent {
            identity = SpanIdentity(
                traceID: remote.traceID, spanID: TraceParent.randomSpanID(), parentSpanID: remote.spanID,
                sampled: remote.isSampled)
        } else {
            identity = SpanIdentity(
                traceID: TraceParent.randomTraceID(), spanID: TraceParent.randomSpanID(), parentSpanID: nil,
                sampled: true)
        }
        return JSONSpan(
            operationName: operationName, kind: kind, context: spanContext, identity: identity,
            startNanoseconds: instant().nanosecondsSinceEpoch, logger: logger)
    }
}

extension JSONSpanTracer: RelaySpanStarting {
    /// A log-line span takes its attributes through the tracing API (at
    /// `debug`, the only level its spans record at), and starts no children itself.
    public func startRelaySpan(_ operationName: String, context: InstrumentationContext, ofKind kind: SpanKind) -> StartedSpan {
        let span = startSpan(operationName, context: context, ofKind: kind)
        return StartedSpan(
            span: span, traceParent: span.traceParent, attributes: span.isRecording ? SpanAttributeWriter(span) : nil, children: nil)
    }
}
