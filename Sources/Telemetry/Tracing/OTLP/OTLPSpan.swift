public import Instrumentation
import Synchronization
public import Tracing
public import RelayBasics

/// A span from ``OTLPTracer``: its name, attributes and status under a
/// lock while it runs; when it ends, one ``OTLPSpanRecord`` to the exporter.
///
/// Events and links are not kept: the relay adds none (an error is its
/// status and `error.type`). `recordError` sets the status to error when
/// none was set.
public final class OTLPSpan: Span, TraceParentCarrying {
    private let startContext: InstrumentationContext
    public let identity: SpanIdentity
    public let kind: SpanKind
    private let startNanoseconds: UInt64
    /// nil for a span that is not sampled: it records nothing.
    private let exporter: OTLPExporter?

    private struct State {
        var operationName: String
        var attributes: SpanAttributes
        var status: SpanStatus?
        var ended = false
        var context: InstrumentationContext?
    }

    private let state: Mutex<State>

    init(
        operationName: String, kind: SpanKind, context: InstrumentationContext, identity: SpanIdentity,
        startNanoseconds: UInt64, exporter: OTLPExporter?
    ) {
        self.startContext = context
        self.identity = identity
        self.kind = kind
        self.startNanoseconds = startNanoseconds
        self.exporter = exporter
        // A recorded span has room for a send's attributes from the start
        // (growing a dictionary rehashes it); one that records nothing, none.
        let attributes = exporter == nil ? SpanAttributes() : SpanAttributes(Dictionary(minimumCapacity: 16))
        self.state = Mutex(State(operationName: operationName, attributes: attributes))
    }

    /// The context the span was started in, with the span's identity (made when first read).
    public var context: InstrumentationContext {
        state.withLock { state in
            if let context = state.context { return context }
            var context = startContext
            context.spanIdentity = identity
            state.context = context
            return context
        }
    }

    public var traceParent: TraceParent { identity.traceParent }

    public var operationName: String {
        get { state.withLock { $0.operationName } }
        set { state.withLock { $0.operationName = newValue } }
    }

    public var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set {
            guard exporter != nil else { return }
            state.withLock { $0.attributes = newValue }
        }
        // `span.attributes["x"] = y`: a get and a set would copy the whole
        // dictionary for every attribute (the copy the getter returns shares
        // the stored one). The dictionary is taken out while the caller
        // changes it in place, then put back. A span is changed by one task
        // at a time; a reader meanwhile would see it empty, none does.
        _modify {
            var taken = state.withLock { state in
                let attributes = state.attributes
                state.attributes = SpanAttributes()
                return attributes
            }
            defer {
                if exporter != nil { state.withLock { $0.attributes = taken } }
            }
            yield &taken
        }
    }

    public var isRecording: Bool { exporter != nil && state.withLock { !$0.ended } }

    public func setStatus(_ status: SpanStatus) {
        guard exporter != nil else { return }
        state.withLock { $0.status = status }
    }

    public func addEvent(_ event: SpanEvent) {}

    public func recordError<Instant: TracerInstant>(
        _ error: Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant
    ) {
        guard exporter != nil else { return }
        state.withLock { state in
            if state.status == nil { state.status = SpanStatus(code: .error) }
        }
    }

    public func addLink(_ link: SpanLink) {}

    public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        guard let exporter else { return }
        let endNanoseconds = instant().nanosecondsSinceEpoch
        // The attributes are moved out, not copied: the span records nothing more.
        guard let finished = state.withLock({ state -> (String, SpanAttributes, SpanStatus?)? in
            guard !state.ended else { return nil }
            state.ended = true
            let attributes = state.attributes
            state.attributes = SpanAttributes()
            return (state.operationName, attributes, state.status)
        }) else { return }
        let (name, attributes, status) = finished
        exporter.record(
            OTLPSpanRecord(
                traceID: identity.traceID, spanID: identity.spanID, parentSpanID: identity.parentSpanID,
                name: name, kind: kind, startNanoseconds: startNanoseconds, endNanoseconds: endNanoseconds,
                attributes: attributes, status: status?.code, statusMessage: status?.message))
    }
}
