public import Instrumentation
public import Relay
import Synchronization
public import Tracing
public import RelayBasics

/// A span from ``OTLPTracer``: its name, attributes and status under a
/// lock while it runs; when it ends, its protobuf message to the exporter.
///
/// Attributes are encoded as they are set: each one's OTLP `KeyValue` bytes
/// are appended to a buffer that becomes the body of the span's message, so
/// nothing walks a dictionary (``SpanAttributeSetting``, the
/// relay's way to set them; `attributes`, the tracing API's, reads and
/// rewrites them all and is meant for the rare caller).
///
/// Events and links are not kept: the relay adds none (an error is its
/// status and `error.type`). `recordError` sets the status to error when
/// none was set.
public final class OTLPSpan: Span, TraceParentCarrying, SpanAttributeSetting, ChildSpanStarting {
    /// Where the span's context comes from: the context it was started in,
    /// or, for a child started by ``startChild(_:ofKind:)``, its parent's
    /// context (built only if the child's context is read).
    enum StartContext: Sendable {
        case context(InstrumentationContext)
        case parent(OTLPSpan)
    }

    private let startContext: StartContext
    /// The tracer that started the span: its children are sampled and exported as its own spans are.
    private let tracer: OTLPTracer
    public let identity: SpanIdentity
    public let kind: SpanKind
    private let startNanoseconds: UInt64
    /// nil for a span that is not sampled: it records nothing.
    private let exporter: OTLPExporter?

    private struct State {
        var operationName: String
        /// The `KeyValue` fields (Span field 9) of the attributes set, in
        /// order: all the span keeps of them. An earlier value of a key, and
        /// the `attributes` getter, are read back from these bytes.
        var encoded: [UInt8] = []
        /// A bit per key set (``keyBit(_:)``): a key whose bit is clear was
        /// never set, and `encoded` is not searched for it. Most keys are set
        /// once; a search for each compared it with every earlier key.
        var keyBits: UInt64 = 0
        var status: SpanStatus?
        var ended = false
        var context: InstrumentationContext?
    }

    private let state: Mutex<State>

    init(
        operationName: String, kind: SpanKind, context: StartContext, identity: SpanIdentity,
        startNanoseconds: UInt64, tracer: OTLPTracer
    ) {
        self.startContext = context
        self.tracer = tracer
        self.identity = identity
        self.kind = kind
        self.startNanoseconds = startNanoseconds
        self.exporter = identity.sampled ? tracer.exporter : nil
        self.state = Mutex(State(operationName: operationName))
    }

    /// The context the span was started in, with the span's identity (made when first read).
    public var context: InstrumentationContext {
        state.withLock { state in
            if let context = state.context { return context }
            var context: InstrumentationContext
            switch startContext {
            case .context(let started): context = started
            // The parent's lock, under this span's: a parent never takes its child's.
            case .parent(let parent): context = parent.context
            }
            context.spanIdentity = identity
            state.context = context
            return context
        }
    }

    public var traceParent: TraceParent { identity.traceParent }

    /// A child of this span, as ``OTLPTracer`` would start it in this span's
    /// context (the trace, this span as parent, the sampler asked with this
    /// span's flag), without building that context.
    public func startChild(_ operationName: String, ofKind kind: SpanKind) -> any Span & ChildSpanStarting {
        tracer.startSpan(operationName, parent: .parent(self), parentIdentity: identity, remoteParent: nil, ofKind: kind,
                         startNanoseconds: DefaultTracerClock.now.nanosecondsSinceEpoch)
    }

    public var operationName: String {
        get { state.withLock { $0.operationName } }
        set { state.withLock { $0.operationName = newValue } }
    }

    /// The attributes set so far, decoded from their bytes (as the receiver
    /// reads them: an `.int32` comes back `.int64`, a `.stringConvertible` a
    /// `.string`). Setting them replaces all of them (each re-encoded):
    /// ``setAttribute(_:_:)`` sets one.
    public var attributes: SpanAttributes {
        get {
            state.withLock { state in
                var attributes = SpanAttributes()
                for (range, key) in Protobuf.keyValueFields(state.encoded) {
                    attributes[key] = Protobuf.attributeValue(ofKeyValueField: state.encoded[range])
                }
                return attributes
            }
        }
        set {
            guard exporter != nil else { return }
            state.withLock { state in
                state.encoded.removeAll(keepingCapacity: true)
                state.keyBits = 0
                newValue.forEach { key, value in
                    state.keyBits |= Self.keyBit(key)
                    Self.append(key, value, to: &state)
                }
            }
        }
    }

    /// Encodes the attribute into the span's bytes at once (an earlier value
    /// of the key is taken out first: OTLP keys are unique in a span).
    public func setAttribute(_ key: String, _ value: SpanAttribute) {
        guard exporter != nil else { return }
        state.withLock { state in
            Self.replace(key, in: &state)
            Self.append(key, value, to: &state)
        }
    }

    /// ``setAttribute(_:_:)`` for an integer: the same bytes, with no `SpanAttribute` made or copied.
    public func setAttribute(_ key: String, int value: Int) {
        guard exporter != nil else { return }
        state.withLock { state in
            Self.replace(key, in: &state)
            Self.reserveRoom(in: &state)
            Protobuf.keyValue(field: 9, key: key, int: Int64(value), into: &state.encoded)
        }
    }

    /// ``setAttribute(_:_:)`` for a string: the same bytes, with no `SpanAttribute` made or copied.
    public func setAttribute(_ key: String, string value: String) {
        guard exporter != nil else { return }
        state.withLock { state in
            Self.replace(key, in: &state)
            Self.reserveRoom(in: &state)
            Protobuf.keyValue(field: 9, key: key, string: value, into: &state.encoded)
        }
    }

    /// Takes out an earlier value of `key` (OTLP keys are unique in a span)
    /// and marks the key set: what every setter does before it appends.
    private static func replace(_ key: String, in state: inout State) {
        let bit = keyBit(key)
        if state.keyBits & bit != 0, let earlier = Protobuf.keyValueField(withKey: key, in: state.encoded) {
            state.encoded.removeSubrange(earlier)
        }
        state.keyBits |= bit
    }

    /// The send span's starting attributes under one lock, each encoded as
    /// ``setAttribute(_:_:)`` would (the same bytes, in the same order).
    /// On a span none of whose keys may have been set yet (the send path
    /// sets them right after the start), all of them are written at once
    /// (``Protobuf/sendSpanAttributes(_:field:into:)``); otherwise each
    /// replaces its earlier value one by one.
    public func setAttributes(_ attributes: SendSpanAttributes) {
        guard exporter != nil else { return }
        state.withLock { state in
            if state.keyBits & Self.sendKeyBits == 0 {
                Self.reserveRoom(in: &state)
                if Protobuf.sendSpanAttributes(attributes, field: 9, into: &state.encoded) {
                    // Every key's bit, set or not: a bit only says a key may have been set.
                    state.keyBits |= Self.sendKeyBits
                    return
                }
            }
            attributes.forEach { key, value in
                Self.replace(key, in: &state)
                Self.append(key, value, to: &state)
            }
        }
    }

    /// The bits of every key ``SendSpanAttributes`` may set.
    private static let sendKeyBits: UInt64 = SendSpanAttributes.keys.reduce(0) { $0 | keyBit($1) }

    /// One of 64 bits, from the key's length and last byte.
    private static func keyBit(_ key: String) -> UInt64 {
        let last = key.utf8.withContiguousStorageIfAvailable { $0.last ?? 0 } ?? 0
        return 1 << (UInt64(truncatingIfNeeded: key.utf8.count &+ Int(last) &* 7) & 63)
    }

    /// Room for a send's attributes at once, rather than growing four times.
    private static func reserveRoom(in state: inout State) {
        if state.encoded.capacity == 0 { state.encoded.reserveCapacity(768) }
    }

    private static func append(_ key: String, _ value: SpanAttribute, to state: inout State) {
        reserveRoom(in: &state)
        Protobuf.keyValue(field: 9, key: key, value: value, into: &state.encoded)
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
        // The encoded attributes are moved out, not copied: the span records nothing more.
        guard let finished = state.withLock({ state -> (String, [UInt8], SpanStatus?)? in
            guard !state.ended else { return nil }
            state.ended = true
            let encoded = state.encoded
            state.encoded = []
            return (state.operationName, encoded, state.status)
        }) else { return }
        let (name, attributes, status) = finished
        // The message is finished on this thread, the one that made the
        // span: the exporter copies its bytes, and this thread frees what it made.
        exporter.record(
            traceID: identity.traceID, spanID: identity.spanID, parentSpanID: identity.parentSpanID, name: name, kind: kind,
            startNanoseconds: startNanoseconds, endNanoseconds: endNanoseconds, encodedAttributes: attributes,
            status: status?.code, statusMessage: status?.message)
    }
}
