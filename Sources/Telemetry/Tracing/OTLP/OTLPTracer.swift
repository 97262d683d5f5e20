public import Relay
public import Instrumentation
public import Tracing
public import RelayBasics

/// The tracer for `tracing.exporter: otlp`: spans that record into an
/// ``OTLPExporter`` when they end.
///
/// Identity and propagation are ``JSONSpanTracer``'s (``SpanIdentity`` in the
/// context, W3C `traceparent` extracted and injected, the trace id on log
/// lines through ``TraceMetadata``); the sampler decides once per span. A
/// span that is not sampled keeps its identity (the trace id still reaches
/// the audit row and the answer's `traceparent`, with the flag 00) but stores
/// nothing and records nothing.
public struct OTLPTracer: SpanIdentityTracer {
    public typealias Span = OTLPSpan

    let exporter: OTLPExporter
    let sampler: OTLPSampler

    public init(exporter: OTLPExporter, sampler: OTLPSampler) {
        self.exporter = exporter
        self.sampler = sampler
    }

    public func startSpan<Instant: TracerInstant>(
        _ operationName: String,
        context: @autoclosure () -> InstrumentationContext,
        ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant,
        function: String,
        file fileID: String,
        line: UInt
    ) -> OTLPSpan {
        let spanContext = context()
        let parentIdentity = spanContext.spanIdentity
        return startSpan(
            operationName, parent: .context(spanContext), parentIdentity: parentIdentity,
            remoteParent: parentIdentity == nil ? spanContext.remoteParent : nil, ofKind: kind,
            startNanoseconds: instant().nanosecondsSinceEpoch)
    }

    /// A span under `parentIdentity` (a local span), else `remoteParent`
    /// (an incoming `traceparent`), else a new trace.
    func startSpan(
        _ operationName: String, parent: OTLPSpan.StartContext, parentIdentity: SpanIdentity?, remoteParent: TraceParent?,
        ofKind kind: SpanKind, startNanoseconds: UInt64
    ) -> OTLPSpan {
        let traceID: String
        let parentSpanID: String?
        let parentSampled: Bool?
        if let parent = parentIdentity {
            (traceID, parentSpanID, parentSampled) = (parent.traceID, parent.spanID, parent.sampled)
        } else if let remote = remoteParent {
            (traceID, parentSpanID, parentSampled) = (remote.traceID, remote.spanID, remote.isSampled)
        } else {
            (traceID, parentSpanID, parentSampled) = (TraceParent.randomTraceID(), nil, nil)
        }
        let identity = SpanIdentity(
            traceID: traceID, spanID: TraceParent.randomSpanID(), parentSpanID: parentSpanID,
            sampled: sampler.isSampled(traceID: traceID, parentSampled: parentSampled))
        return OTLPSpan(
            operationName: operationName, kind: kind, context: parent, identity: identity,
            startNanoseconds: startNanoseconds, tracer: self)
    }
}

extension OTLPTracer: RelaySpanStarting {
    public func startRelaySpan(_ operationName: String, context: InstrumentationContext, ofKind kind: SpanKind) -> StartedSpan {
        let span = startSpan(operationName, context: context, ofKind: kind)
        guard span.isRecording else { return StartedSpan(span: span, traceParent: span.traceParent, attributes: nil, children: nil) }
        return StartedSpan(span: span, traceParent: span.traceParent, attributes: SpanAttributeWriter(setter: span), children: span)
    }
}
