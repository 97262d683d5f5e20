public import Tracing

/// One finished span as a value, for ``OTLPExporter/record(_:)`` and
/// ``OTLPRequestEncoder/encode(_:into:)``: the way to hand the exporter a
/// span that ``OTLPSpan`` did not make (tests, tools). ``OTLPSpan`` skips it
/// and hands over its message's bytes directly.
///
/// Ids are hex strings, as ``SpanIdentity`` holds them; the attributes are
/// already OTLP bytes.
public struct OTLPSpanRecord: Sendable {
    public var traceID: String
    public var spanID: String
    public var parentSpanID: String?
    public var name: String
    public var kind: SpanKind
    public var startNanoseconds: UInt64
    public var endNanoseconds: UInt64
    /// The attributes as OTLP `KeyValue` fields of the Span message (field 9),
    /// encoded when they were set (``OTLPSpan``) or by ``init(traceID:spanID:parentSpanID:name:kind:startNanoseconds:endNanoseconds:attributes:status:statusMessage:)``.
    public var encodedAttributes: [UInt8]
    public var status: SpanStatus.Code?
    public var statusMessage: String?

    public init(
        traceID: String, spanID: String, parentSpanID: String?, name: String, kind: SpanKind, startNanoseconds: UInt64,
        endNanoseconds: UInt64, attributes: SpanAttributes = [:], status: SpanStatus.Code? = nil, statusMessage: String? = nil
    ) {
        var encoded: [UInt8] = []
        attributes.forEach { key, value in Protobuf.keyValue(field: 9, key: key, value: value, into: &encoded) }
        self.init(
            traceID: traceID, spanID: spanID, parentSpanID: parentSpanID, name: name, kind: kind, startNanoseconds: startNanoseconds,
            endNanoseconds: endNanoseconds, encodedAttributes: encoded, status: status, statusMessage: statusMessage)
    }

    /// A record whose attributes are already encoded (``OTLPSpan/end(at:)``).
    init(
        traceID: String, spanID: String, parentSpanID: String?, name: String, kind: SpanKind, startNanoseconds: UInt64,
        endNanoseconds: UInt64, encodedAttributes: [UInt8], status: SpanStatus.Code?, statusMessage: String?
    ) {
        self.traceID = traceID
        self.spanID = spanID
        self.parentSpanID = parentSpanID
        self.name = name
        self.kind = kind
        self.startNanoseconds = startNanoseconds
        self.endNanoseconds = endNanoseconds
        self.encodedAttributes = encodedAttributes
        self.status = status
        self.statusMessage = statusMessage
    }
}
