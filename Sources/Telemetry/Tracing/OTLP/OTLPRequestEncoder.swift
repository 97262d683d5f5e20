public import Tracing
import RelayBasics

/// Encodes `ExportTraceServiceRequest` (opentelemetry-proto,
/// `collector/trace/v1/trace_service.proto`) by hand: one resource, one
/// scope, the batch's spans.
///
/// The schema is small and fixed, so a generated protobuf runtime would
/// buy nothing but a dependency. Nested messages need their length before
/// their bytes: a span is encoded when it ends, as its head and its body
/// (``withSpanHead(traceID:spanID:parentSpanID:name:kind:startNanoseconds:endNanoseconds:_:)``),
/// and the exporter's queue holds it whole, tag and length included, so a
/// batch is one run of bytes behind the resource and scope; the small messages inside a span (key/values, any-values,
/// status) have their sizes computed first, so nothing is allocated per field.
/// Resource and scope never change and are encoded once.
///
/// Field numbers (trace.proto, common.proto, resource.proto):
/// ExportTraceServiceRequest{1 resource_spans}; ResourceSpans{1 resource,
/// 2 scope_spans}; Resource{1 attributes}; ScopeSpans{1 scope, 2 spans};
/// InstrumentationScope{1 name, 2 version}; Span{1 trace_id, 2 span_id,
/// 4 parent_span_id, 5 name, 6 kind, 7 start_time_unix_nano (fixed64),
/// 8 end_time_unix_nano (fixed64), 9 attributes, 15 status, 16 flags (fixed32)};
/// Status{2 message, 3 code}; KeyValue{1 key, 2 value}; AnyValue{1 string,
/// 2 bool, 3 int (int64), 4 double, 5 array}; ArrayValue{1 values}.
public struct OTLPRequestEncoder {
    /// Resource field (1) of ResourceSpans, whole (tag, length, bytes).
    private let resourceField: [UInt8]
    /// Scope field (1) of ScopeSpans, whole.
    private let scopeField: [UInt8]
    private var span: [UInt8] = []
    private var spans: [UInt8] = []

    /// - Parameters:
    ///   - resource: the resource's attributes (`service.name`, …), in order.
    ///   - scope: the instrumentation scope's name and version.
    public init(resource: [(String, String)], scopeName: String, scopeVersion: String) {
        var resourceBody: [UInt8] = []
        for (key, value) in resource {
            Protobuf.keyValue(field: 1, key: key, value: .string(value), into: &resourceBody)
        }
        var field: [UInt8] = []
        Protobuf.lengthDelimited(field: 1, resourceBody, into: &field)
        resourceField = field
        var scopeBody: [UInt8] = []
        Protobuf.string(field: 1, scopeName, into: &scopeBody)
        Protobuf.string(field: 2, scopeVersion, into: &scopeBody)
        field = []
        Protobuf.lengthDelimited(field: 1, scopeBody, into: &field)
        scopeField = field
    }

    /// The request for `records`, appended to `output` (cleared first).
    public mutating func encode(_ records: some Collection<OTLPSpanRecord>, into output: inout [UInt8]) {
        spans.removeAll(keepingCapacity: true)
        // By index, the record read in place: `for record in records` copied
        // each one out (its strings retained, its bytes' buffer too) and released it.
        for index in records.indices {
            span.removeAll(keepingCapacity: true)
            Self.encodeSpan(records[index], into: &span)
            Protobuf.lengthDelimited(field: 2, span, into: &spans)
        }
        spans.withUnsafeBufferPointer { encode(spanFields: $0, into: &output) }
    }

    /// The request for spans already encoded as ScopeSpans' `spans` fields
    /// (field 2: tag, length, Span message; one after the other), appended
    /// to `output` (cleared first): the exporter's queue holds its spans so.
    public func encode(spanFields: UnsafeBufferPointer<UInt8>, into output: inout [UInt8]) {
        output.removeAll(keepingCapacity: true)
        let scopeSpansSize = scopeField.count + spanFields.count
        let resourceSpansSize = resourceField.count + Protobuf.tagSize(2) + Protobuf.varintSize(UInt64(scopeSpansSize)) + scopeSpansSize
        Protobuf.tag(1, .lengthDelimited, into: &output)
        Protobuf.varint(UInt64(resourceSpansSize), into: &output)
        output.append(contentsOf: resourceField)
        Protobuf.tag(2, .lengthDelimited, into: &output)
        Protobuf.varint(UInt64(scopeSpansSize), into: &output)
        output.append(contentsOf: scopeField)
        output.append(contentsOf: spanFields)
    }
}
