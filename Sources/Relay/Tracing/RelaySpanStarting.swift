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
    /// The `traceparent` the tracer injects for the span's context.
    public let traceParent: TraceParent
    /// The span's attribute writer, nil when the span records nothing (the
    /// log exporter below `info`, an unsampled trace): set nothing then.
    public let attributes: SpanAttributeWriter?
    /// The span itself when it records and starts its children without its
    /// context (``ChildSpanStarting``).
    public let children: (any ChildSpanStarting)?

    public init(span: any Span, traceParent: TraceParent, attributes: SpanAttributeWriter?, children: (any ChildSpanStarting)?) {
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
