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
}
