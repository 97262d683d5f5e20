public import Tracing

/// One finished span as the OTLP exporter keeps it until export: a value,
/// made once when the span ends and handed to ``OTLPExporter/record(_:)``.
///
/// Ids stay the hex strings the span already holds (``SpanIdentity``); they
/// become bytes only when the exporter's thread encodes the batch, so the
/// send path does no encoding at all.
public struct OTLPSpanRecord: Sendable {
    public var traceID: String
    public var spanID: String
    public var parentSpanID: String?
    public var name: String
    public var kind: SpanKind
    public var startNanoseconds: UInt64
    public var endNanoseconds: UInt64
    public var attributes: SpanAttributes
    public var status: SpanStatus.Code?
    public var statusMessage: String?

    public init(
        traceID: String, spanID: String, parentSpanID: String?, name: String, kind: SpanKind, startNanoseconds: UInt64,
        endNanoseconds: UInt64, attributes: SpanAttributes = [:], status: SpanStatus.Code? = nil, statusMessage: String? = nil
    ) {
        self.traceID = traceID
        self.spanID = spanID
        self.parentSpanID = parentSpanID
        self.name = name
        self.kind = kind
        self.startNanoseconds = startNanoseconds
        self.endNanoseconds = endNanoseconds
        self.attributes = attributes
        self.status = status
        self.statusMessage = statusMessage
    }
}
