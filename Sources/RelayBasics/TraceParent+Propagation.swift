public import Instrumentation

/// Carries trace context in a header list: the one `Extractor` and
/// `Injector` the relay has, whichever tracer is installed.
///
/// The ingress extracts a caller's `traceparent` with it and stamps its
/// answers, the send pipeline reads its span's trace id for the audit row,
/// and the tracer's tests use it as their carrier.
public struct HTTPHeaderPropagation: Extractor, Injector {
    public init() {}

    /// The first header called `key` (any case).
    public func extract(key: String, from carrier: [HTTPHeader]) -> String? {
        carrier.value(of: key)
    }

    /// Sets `key` to `value`, replacing any header of that name.
    public func inject(_ value: String, forKey key: String, into carrier: inout [HTTPHeader]) {
        let header = HTTPHeader(key, value)
        carrier.removeAll { $0.name == header.name }
        carrier.append(header)
    }
}

extension Instrument {
    /// The `traceparent` this instrument would send for `context`, or nil
    /// when it injects none (a no-op tracer, a context without a span).
    public func traceParentHeader(for context: InstrumentationContext) -> String? {
        var value: String?
        inject(context, into: &value, using: TraceParentSlot())
        return value
    }

    /// ``traceParentHeader(for:)`` parsed: the trace and span ids this
    /// instrument would send for `context` (for audit rows and log lines).
    /// An instrument that keeps them (``TraceParentReading``) hands them
    /// over as they are, without the header's formatting and parsing every send paid for.
    public func traceParent(for context: InstrumentationContext) -> TraceParent? {
        if let reader = self as? any TraceParentReading { return reader.storedTraceParent(for: context) }
        return traceParentHeader(for: context).flatMap { TraceParent(header: $0) }
    }

    /// ``traceParent(for:)`` of a span's context (`context`, read only when
    /// needed), taken from the span itself when it carries it
    /// (``TraceParentCarrying``): no context to build and search.
    public func traceParent(ofSpan span: Any, context: @autoclosure () -> InstrumentationContext) -> TraceParent? {
        if let span = span as? any TraceParentCarrying { return span.traceParent }
        return traceParent(for: context())
    }
}

/// A span that knows the `traceparent` its own tracer injects for its
/// context (its trace id, its own span id and the sampling flag), so a
/// caller asking for it need not read the span's context at all.
public protocol TraceParentCarrying: AnyObject {
    var traceParent: TraceParent { get }
}

/// An instrument that keeps the `traceparent` of the contexts it makes as a
/// value: ``Instrument/traceParent(for:)`` asks it instead of injecting the
/// header and parsing it back.
public protocol TraceParentReading {
    /// Exactly what the instrument's `inject` would write for `context`, parsed; nil when it writes none.
    func storedTraceParent(for context: InstrumentationContext) -> TraceParent?
}

/// A carrier of one value: the `traceparent` an instrument injects, and
/// nothing else (no header list to build and search on every send).
private struct TraceParentSlot: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout String?) {
        if key.lowercasedHeaderName == TraceParent.headerName { carrier = value }
    }
}
