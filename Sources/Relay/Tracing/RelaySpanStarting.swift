public import Instrumentation
public import RelayBasics
public import Tracing

/// A span with what the relay asks of every span it starts answered at the
/// start, by the tracer that knows its type: its `traceparent`, whether and
/// how it takes attributes, and whether it starts its children itself.
///
/// Asked of `any Span`, each of these is a dynamic cast to a protocol
/// (~800 instructions: a conformance lookup); a send started three spans and
/// cast each of them at least once (issue 26).
public struct StartedSpan: Sendable {
    public let span: any Span
    /// The `traceparent` the tracer injects for the span's context; nil when
    /// it injects none (a no-op tracer).
    public let traceParent: TraceParent?
    /// The span's attribute writer, nil when the span records nothing (the
    /// log exporter below `info`, an unsampled trace): set nothing then.
    public let attributes: SpanAttributeWriter?
    /// The span itself when it records and starts its children without its
    /// context (``ChildSpanStarting``).
    public let children: (any ChildSpanStarting)?

    public init(span: any Span, traceParent: TraceParent?, attributes: SpanAttributeWriter?, children: (any ChildSpanStarting)?) {
        self.span = span
        self.traceParent = traceParent
        self.attributes = attributes
        self.children = children
    }
}

/// A tracer that starts ``StartedSpan``s: the relay's own (the log
/// exporter's and OTLP's). The relay asks a tracer for this once, when a
/// client or the ingress is built; another tracer gets the casts.
public protocol RelaySpanStarting: Tracer {
    /// What `startSpan(operationName, context: context, ofKind: kind)` starts, with its answers.
    func startRelaySpan(_ operationName: String, context: InstrumentationContext, ofKind kind: SpanKind) -> StartedSpan
}

/// Starts spans with their answers (``StartedSpan``): through the tracer
/// itself when it is one of the relay's own (asked once, when the starter is
/// made), else by asking the span with the casts. The one place the send
/// path, the request span and the server's own answers start spans.
public struct SpanStarter: Sendable {
    public let tracer: any Tracer
    private let relayTracer: (any RelaySpanStarting)?

    public init(_ tracer: any Tracer) {
        self.tracer = tracer
        relayTracer = tracer as? any RelaySpanStarting
    }

    /// What `tracer.startSpan(operationName, context: context, ofKind: kind)` starts, with its answers.
    public func start(_ operationName: String, context: InstrumentationContext, ofKind kind: SpanKind) -> StartedSpan {
        if let relayTracer { return relayTracer.startRelaySpan(operationName, context: context, ofKind: kind) }
        let span = tracer.startSpan(operationName, context: context, ofKind: kind)
        let traceParent = tracer.traceParent(ofSpan: span, context: span.context)
        // A span nobody will export takes no attributes; one cast for a span
        // that records: to the child starter that also takes attributes, else to the attribute setter.
        guard span.isRecording else { return StartedSpan(span: span, traceParent: traceParent, attributes: nil, children: nil) }
        if let starter = span as? any ChildSpanStarting {
            return StartedSpan(span: span, traceParent: traceParent, attributes: SpanAttributeWriter(setter: starter), children: starter)
        }
        return StartedSpan(span: span, traceParent: traceParent, attributes: SpanAttributeWriter(span), children: nil)
    }
}
