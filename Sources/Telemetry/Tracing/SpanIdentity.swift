public import Instrumentation
public import Tracing
public import RelayBasics

/// Where a span sits in its trace, stored in the instrumentation context.
public struct SpanIdentity: Sendable, Hashable {
    public var traceID: String
    public var spanID: String
    /// The parent span, local or remote (from an incoming `traceparent`).
    public var parentSpanID: String?
    public var sampled: Bool

    /// This span as a `traceparent` for outgoing responses and requests.
    public var traceParent: TraceParent {
        TraceParent(traceID: traceID, spanID: spanID, flags: sampled ? 1 : 0)
    }
}

enum SpanIdentityKey: InstrumentationContextKey {
    typealias Value = SpanIdentity
}

enum RemoteParentKey: InstrumentationContextKey {
    typealias Value = TraceParent
}

extension InstrumentationContext {
    /// The span this context belongs to, when a ``JSONSpanTracer`` started it.
    public var spanIdentity: SpanIdentity? {
        get { self[SpanIdentityKey.self] }
        set { self[SpanIdentityKey.self] = newValue }
    }

    /// A parent extracted from an incoming `traceparent` header.
    public var remoteParent: TraceParent? {
        get { self[RemoteParentKey.self] }
        set { self[RemoteParentKey.self] = newValue }
    }

    /// The context of a span started in `start` with `identity`: what its
    /// children take as their parent and its tracer injects. Made the first
    /// time it is read and kept in `cache` (the span's own state). The `log`
    /// exporter's spans; an `otlp` span may start from its parent span
    /// instead of a context (``OTLPSpan``), and builds its own.
    static func spanContext(cachedIn cache: inout InstrumentationContext?, startedIn start: InstrumentationContext, identity: SpanIdentity) -> InstrumentationContext {
        if let context = cache { return context }
        var context = start
        context.spanIdentity = identity
        cache = context
        return context
    }
}

/// A tracer that keeps ``SpanIdentity`` in the context (the `log` and `otlp`
/// exporters' tracers): W3C `traceparent` extracted into
/// ``InstrumentationContext/remoteParent`` and injected from the context's
/// span (else its remote parent), written once here for both.
public protocol SpanIdentityTracer: Tracer, TraceParentReading {}

extension SpanIdentityTracer {
    public func forceFlush() {}

    public func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier, into context: inout InstrumentationContext, using extractor: Extract
    ) where Extract.Carrier == Carrier {
        guard let header = extractor.extract(key: TraceParent.headerName, from: carrier),
              let parent = TraceParent(header: header)
        else { return }
        context.remoteParent = parent
    }

    /// What ``inject(_:into:using:)`` writes, as a value: the context's span, else its remote parent.
    public func storedTraceParent(for context: InstrumentationContext) -> TraceParent? {
        context.spanIdentity?.traceParent ?? context.remoteParent
    }

    public func inject<Carrier, Inject: Injector>(
        _ context: InstrumentationContext, into carrier: inout Carrier, using injector: Inject
    ) where Inject.Carrier == Carrier {
        if let parent = storedTraceParent(for: context) {
            injector.inject(parent.description, forKey: TraceParent.headerName, into: &carrier)
        }
    }
}
