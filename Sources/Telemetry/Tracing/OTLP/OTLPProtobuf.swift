public import Tracing
import RelayBasics

/// Encodes `ExportTraceServiceRequest` (opentelemetry-proto,
/// `collector/trace/v1/trace_service.proto`) by hand: one resource, one
/// scope, the batch's spans.
///
/// The schema is small and fixed, so a generated protobuf runtime would
/// buy nothing but a dependency. Nested messages need their length before
/// their bytes: a span is encoded into a scratch buffer (reused) and copied
/// with its length; the small messages inside a span (key/values, any-values,
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
        output.removeAll(keepingCapacity: true)
        spans.removeAll(keepingCapacity: true)
        // By index, the record read in place: `for record in records` copied
        // each one out (its strings retained, its bytes' buffer too) and released it.
        for index in records.indices {
            span.removeAll(keepingCapacity: true)
            Self.encodeSpan(records[index], into: &span)
            Protobuf.lengthDelimited(field: 2, span, into: &spans)
        }
        let scopeSpansSize = scopeField.count + spans.count
        let resourceSpansSize = resourceField.count + Protobuf.tagSize(2) + Protobuf.varintSize(UInt64(scopeSpansSize)) + scopeSpansSize
        Protobuf.tag(1, .lengthDelimited, into: &output)
        Protobuf.varint(UInt64(resourceSpansSize), into: &output)
        output.append(contentsOf: resourceField)
        Protobuf.tag(2, .lengthDelimited, into: &output)
        Protobuf.varint(UInt64(scopeSpansSize), into: &output)
        output.append(contentsOf: scopeField)
        output.append(contentsOf: spans)
    }

    static func encodeSpan(_ record: OTLPSpanRecord, into out: inout [UInt8]) {
        // The ids and the fixed fields are written into a stack buffer and
        // appended as one copy each, not byte by byte (issue 26).
        if !Protobuf.appendIDs(record, into: &out) {
            Protobuf.hexBytes(field: 1, record.traceID, into: &out)
            Protobuf.hexBytes(field: 2, record.spanID, into: &out)
            if let parent = record.parentSpanID { Protobuf.hexBytes(field: 4, parent, into: &out) }
        }
        Protobuf.string(field: 5, record.name, into: &out)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { buffer in
            let bytes = buffer.baseAddress!
            bytes[0] = 6 << 3  // kind, a varint (1 to 5: one byte)
            bytes[1] = UInt8(kindNumber(record.kind))
            bytes[2] = 7 << 3 | 1  // start_time_unix_nano, fixed64
            UnsafeMutableRawPointer(bytes + 3).storeBytes(of: record.startNanoseconds.littleEndian, as: UInt64.self)
            bytes[11] = 8 << 3 | 1  // end_time_unix_nano, fixed64
            UnsafeMutableRawPointer(bytes + 12).storeBytes(of: record.endNanoseconds.littleEndian, as: UInt64.self)
            out.append(contentsOf: UnsafeBufferPointer(start: bytes, count: 20))
        }
        out.append(contentsOf: record.encodedAttributes)
        if let code = record.status {
            let number: UInt64 = code == .ok ? 1 : 2
            let message = record.statusMessage ?? ""
            let size = (message.isEmpty ? 0 : Protobuf.stringFieldSize(message)) + 1 + Protobuf.varintSize(number)
            Protobuf.tag(15, .lengthDelimited, into: &out)
            Protobuf.varint(UInt64(size), into: &out)
            if !message.isEmpty { Protobuf.string(field: 2, message, into: &out) }
            Protobuf.tag(3, .varint, into: &out)
            Protobuf.varint(number, into: &out)
        }
    }

    /// OTLP's SpanKind numbers.
    static func kindNumber(_ kind: SpanKind) -> UInt64 {
        switch kind {
        case .internal: 1
        case .server: 2
        case .client: 3
        case .producer: 4
        case .consumer: 5
        }
    }
}

/// Protobuf's wire format, the parts OTLP uses.
enum Protobuf {
    enum WireType: UInt64 {
        case varint = 0, fixed64 = 1, lengthDelimited = 2, fixed32 = 5
    }

    /// An attribute value as OTLP's AnyValue carries it.
    enum Scalar {
        case string(String), bool(Bool), int(Int64), double(Double)
    }

    static func tag(_ field: UInt64, _ type: WireType, into out: inout [UInt8]) {
        varint(field << 3 | type.rawValue, into: &out)
    }

    static func tagSize(_ field: UInt64) -> Int { varintSize(field << 3) }

    static func varint(_ value: UInt64, into out: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
    }

    static func varintSize(_ value: UInt64) -> Int {
        var size = 1
        var value = value >> 7
        while value != 0 {
            size += 1
            value >>= 7
        }
        return size
    }

    static func fixed64(_ value: UInt64, into out: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) }
    }

    static func string(field: UInt64, _ text: String, into out: inout [UInt8]) {
        tag(field, .lengthDelimited, into: &out)
        varint(UInt64(text.utf8.count), into: &out)
        // The bytes in place (one copy), not the UTF-8 view's generic iteration.
        if text.utf8.withContiguousStorageIfAvailable({ out.append(contentsOf: $0) }) == nil {
            out.append(contentsOf: text.utf8)
        }
    }

    static func stringFieldSize(_ text: String, field: UInt64 = 1) -> Int {
        let count = text.utf8.count
        return tagSize(field) + varintSize(UInt64(count)) + count
    }

    static func lengthDelimited(field: UInt64, _ bytes: [UInt8], into out: inout [UInt8]) {
        tag(field, .lengthDelimited, into: &out)
        varint(UInt64(bytes.count), into: &out)
        out.append(contentsOf: bytes)
    }

    /// A bytes field from a hex id (trace or span id); a malformed id (never
    /// made by the relay's tracer) is written as its UTF-8 bytes.
    static func hexBytes(field: UInt64, _ hex: String, into out: inout [UInt8]) {
        var hex = hex
        // Read once: a global's every read checks its lazy initialization.
        let values = hexValues
        let written: Bool = hex.withUTF8 { digits in
            guard digits.count % 2 == 0, digits.count <= 64 else { return false }
            var bytes: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            return withUnsafeMutableBytes(of: &bytes) { raw in
                var index = 0
                while index < digits.count {
                    let high = values[Int(digits[index])], low = values[Int(digits[index + 1])]
                    guard high < 16, low < 16 else { return false }
                    raw[index / 2] = high << 4 | low
                    index += 2
                }
                tag(field, .lengthDelimited, into: &out)
                varint(UInt64(digits.count / 2), into: &out)
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[0..<(digits.count / 2)]))
                return true
            }
        }
        if !written { string(field: field, hex, into: &out) }
    }

    /// A span record's trace, span and parent span ids (fields 1, 2 and 4)
    /// as bytes fields, appended as one copy; false (nothing appended) when
    /// one is not an even number of hex digits, 64 at most, in contiguous
    /// UTF-8 (never so for the relay's own ids): ``hexBytes(field:_:into:)`` then writes them.
    static func appendIDs(_ record: OTLPSpanRecord, into out: inout [UInt8]) -> Bool {
        // Read once: a global's every read checks its lazy initialization.
        let values = hexValues
        return values.withUnsafeBufferPointer { values -> Bool in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 3 * 34) { buffer -> Bool in
                let bytes = buffer.baseAddress!
                var count = 0
                guard putHexID(field: 1, record.traceID, values, bytes, &count),
                      putHexID(field: 2, record.spanID, values, bytes, &count)
                else { return false }
                if let parent = record.parentSpanID {
                    guard putHexID(field: 4, parent, values, bytes, &count) else { return false }
                }
                out.append(contentsOf: UnsafeBufferPointer(start: bytes, count: count))
                return true
            }
        }
    }

    /// One id's tag, length and bytes at `bytes + count` (34 bytes at most).
    private static func putHexID(
        field: UInt8, _ hex: String, _ values: UnsafeBufferPointer<UInt8>, _ bytes: UnsafeMutablePointer<UInt8>,
        _ count: inout Int
    ) -> Bool {
        let start = count
        let written = hex.utf8.withContiguousStorageIfAvailable { digits -> Bool in
            guard digits.count % 2 == 0, digits.count <= 64 else { return false }
            bytes[count] = field << 3 | 2
            bytes[count + 1] = UInt8(digits.count / 2)
            count += 2
            var index = 0
            while index < digits.count {
                let high = values[Int(digits[index])], low = values[Int(digits[index + 1])]
                guard high < 16, low < 16 else { return false }
                bytes[count] = high << 4 | low
                count += 1
                index += 2
            }
            return true
        }
        if written == true { return true }
        count = start
        return false
    }

    /// Each byte's value as a hex digit, 0xFF for a byte that is not one.
    static let hexValues: [UInt8] = (0...255).map { byte in Hex.value(of: UInt8(byte)) ?? 0xFF }

    // MARK: Attributes

    /// A KeyValue field.
    static func keyValue(field: UInt64, key: String, value: SpanAttribute, into out: inout [UInt8]) {
        // A string or an integer (a send's attributes but one): written
        // straight from the attribute, without the Scalar in between.
        switch value {
        case .string(let text):
            let written: Bool? = key.utf8.withContiguousStorageIfAvailable { keyBytes in
                text.utf8.withContiguousStorageIfAvailable { textBytes in
                    contiguousKeyValue(field: field, key: keyBytes, text: textBytes, number: 0, into: &out)
                } != nil
            }
            if written == true { return }
            let valueSize = stringFieldSize(text, field: 1)
            keyValueHead(field: field, key: key, valueSize: valueSize, into: &out)
            string(field: 1, text, into: &out)
            return
        case .int64(let number):
            if key.utf8.withContiguousStorageIfAvailable({ keyBytes in
                contiguousKeyValue(field: field, key: keyBytes, text: nil, number: number, into: &out)
            }) != nil { return }
            let valueSize = 1 + varintSize(UInt64(bitPattern: number))
            keyValueHead(field: field, key: key, valueSize: valueSize, into: &out)
            tag(3, .varint, into: &out)
            varint(UInt64(bitPattern: number), into: &out)
            return
        default:
            break
        }
        // A scalar (nearly every other attribute) is converted once, for its size and its bytes.
        let scalarValue = single(value)
        let valueSize = scalarValue.map(scalarSize) ?? anyValueSize(value)
        keyValueHead(field: field, key: key, valueSize: valueSize, into: &out)
        if let scalarValue { scalar(scalarValue, into: &out) } else { anyValue(value, into: &out) }
    }

    /// A KeyValue holding a string (`text`) or else an integer (`number`), from
    /// bytes in place: written whole into a stack buffer (tags, lengths, the
    /// key's and the text's bytes) and appended as one copy. Appending byte by
    /// byte (`tag`, `varint`) checked the array's capacity and uniqueness for
    /// every byte, and each append of a piece costs ~90 instructions: ~800 per
    /// attribute, and a send sets about twenty as it runs (issue 26).
    private static func contiguousKeyValue(
        field: UInt64, key: UnsafeBufferPointer<UInt8>, text: UnsafeBufferPointer<UInt8>?, number: Int64,
        into out: inout [UInt8]
    ) {
        let valueSize = text.map { 1 + varintSize(UInt64($0.count)) + $0.count } ?? 1 + varintSize(UInt64(bitPattern: number))
        let size = 1 + varintSize(UInt64(key.count)) + key.count + 1 + varintSize(UInt64(valueSize)) + valueSize
        let total = varintSize(field << 3) + varintSize(UInt64(size)) + size
        // A send's attributes are short; a longer one is written by pieces.
        guard total <= 256 else {
            keyValueHead(field: field, key: key, size: size, valueSize: valueSize, into: &out)
            if let text {
                tag(1, .lengthDelimited, into: &out)
                varint(UInt64(text.count), into: &out)
                out.append(contentsOf: text)
            } else {
                tag(3, .varint, into: &out)
                varint(UInt64(bitPattern: number), into: &out)
            }
            return
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 256) { buffer in
            let bytes = buffer.baseAddress!
            var count = 0
            putVarint(field << 3 | WireType.lengthDelimited.rawValue, bytes, &count)
            putVarint(UInt64(size), bytes, &count)
            bytes[count] = 1 << 3 | 2  // KeyValue.key
            count += 1
            putVarint(UInt64(key.count), bytes, &count)
            put(key, bytes, &count)
            bytes[count] = 2 << 3 | 2  // KeyValue.value
            count += 1
            putVarint(UInt64(valueSize), bytes, &count)
            if let text {
                bytes[count] = 1 << 3 | 2  // AnyValue.string_value
                count += 1
                putVarint(UInt64(text.count), bytes, &count)
                put(text, bytes, &count)
            } else {
                bytes[count] = 3 << 3  // AnyValue.int_value, a varint
                count += 1
                putVarint(UInt64(bitPattern: number), bytes, &count)
            }
            out.append(contentsOf: UnsafeBufferPointer(start: bytes, count: count))
        }
    }

    /// A long KeyValue's tag and length, its key, and its value's tag and length, by pieces.
    private static func keyValueHead(
        field: UInt64, key: UnsafeBufferPointer<UInt8>, size: Int, valueSize: Int, into out: inout [UInt8]
    ) {
        tag(field, .lengthDelimited, into: &out)
        varint(UInt64(size), into: &out)
        tag(1, .lengthDelimited, into: &out)
        varint(UInt64(key.count), into: &out)
        out.append(contentsOf: key)
        tag(2, .lengthDelimited, into: &out)
        varint(UInt64(valueSize), into: &out)
    }

    @inline(__always)
    private static func put(_ source: UnsafeBufferPointer<UInt8>, _ bytes: UnsafeMutablePointer<UInt8>, _ count: inout Int) {
        if let base = source.baseAddress, source.count > 0 {
            (bytes + count).update(from: base, count: source.count)
            count += source.count
        }
    }

    @inline(__always)
    private static func putVarint(_ value: UInt64, _ bytes: UnsafeMutablePointer<UInt8>, _ count: inout Int) {
        var value = value
        while value >= 0x80 {
            bytes[count] = UInt8(truncatingIfNeeded: value) | 0x80
            value >>= 7
            count += 1
        }
        bytes[count] = UInt8(value)
        count += 1
    }

    /// A KeyValue's tag and length, its key, and its value's tag and length.
    @inline(__always)
    private static func keyValueHead(field: UInt64, key: String, valueSize: Int, into out: inout [UInt8]) {
        let size = stringFieldSize(key) + tagSize(2) + varintSize(UInt64(valueSize)) + valueSize
        tag(field, .lengthDelimited, into: &out)
        varint(UInt64(size), into: &out)
        string(field: 1, key, into: &out)
        tag(2, .lengthDelimited, into: &out)
        varint(UInt64(valueSize), into: &out)
    }

    static func scalars(_ attribute: SpanAttribute) -> (single: Scalar?, array: [Scalar]?) {
        switch attribute {
        case .int32(let value): (.int(Int64(value)), nil)
        case .int64(let value): (.int(value), nil)
        case .double(let value): (.double(value), nil)
        case .bool(let value): (.bool(value), nil)
        case .string(let value): (.string(value), nil)
        case .stringConvertible(let value): (.string(value.description), nil)
        case .int32Array(let values): (nil, values.map { .int(Int64($0)) })
        case .int64Array(let values): (nil, values.map { .int($0) })
        case .doubleArray(let values): (nil, values.map { .double($0) })
        case .boolArray(let values): (nil, values.map { .bool($0) })
        case .stringArray(let values): (nil, values.map { .string($0) })
        case .stringConvertibleArray(let values): (nil, values.map { .string($0.description) })
        default: (.string("\(attribute)"), nil)
        }
    }

    /// The attribute as one scalar, without building the array `scalars` would (the usual case).
    static func single(_ attribute: SpanAttribute) -> Scalar? {
        switch attribute {
        case .int32(let value): .int(Int64(value))
        case .int64(let value): .int(value)
        case .double(let value): .double(value)
        case .bool(let value): .bool(value)
        case .string(let value): .string(value)
        case .stringConvertible(let value): .string(value.description)
        default: nil
        }
    }

    /// The AnyValue message's body size.
    static func anyValueSize(_ attribute: SpanAttribute) -> Int {
        if let single = single(attribute) { return scalarSize(single) }
        let body = arrayBodySize(scalars(attribute).array ?? [])
        return tagSize(5) + varintSize(UInt64(body)) + body
    }

    static func anyValue(_ attribute: SpanAttribute, into out: inout [UInt8]) {
        if let single = single(attribute) { return scalar(single, into: &out) }
        let (_, array) = scalars(attribute)
        let values = array ?? []
        tag(5, .lengthDelimited, into: &out)
        varint(UInt64(arrayBodySize(values)), into: &out)
        for value in values {
            tag(1, .lengthDelimited, into: &out)
            varint(UInt64(scalarSize(value)), into: &out)
            scalar(value, into: &out)
        }
    }

    static func arrayBodySize(_ values: [Scalar]) -> Int {
        values.reduce(0) { total, value in
            let size = scalarSize(value)
            return total + tagSize(1) + varintSize(UInt64(size)) + size
        }
    }

    /// An AnyValue holding one scalar: its one field.
    static func scalarSize(_ value: Scalar) -> Int {
        switch value {
        case .string(let text): stringFieldSize(text, field: 1)
        case .bool: 2
        case .int(let number): 1 + varintSize(UInt64(bitPattern: number))
        case .double: 9
        }
    }

    static func scalar(_ value: Scalar, into out: inout [UInt8]) {
        switch value {
        case .string(let text):
            string(field: 1, text, into: &out)
        case .bool(let flag):
            tag(2, .varint, into: &out)
            out.append(flag ? 1 : 0)
        case .int(let number):
            tag(3, .varint, into: &out)
            varint(UInt64(bitPattern: number), into: &out)
        case .double(let number):
            tag(4, .fixed64, into: &out)
            fixed64(number.bitPattern, into: &out)
        }
    }
}
