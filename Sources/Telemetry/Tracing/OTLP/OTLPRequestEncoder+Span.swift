import Tracing

/// One span's message (Span, trace.proto) in its two parts: the head (the
/// fields before the attributes: ids, name, kind, times) and the body (the
/// attributes' bytes as the span encoded them, then the status), so that a
/// span's message is its head and body copied one after the other.
extension OTLPRequestEncoder {
    /// The whole message of a record: head, attributes, status.
    static func encodeSpan(_ record: OTLPSpanRecord, into out: inout [UInt8]) {
        withSpanHead(
            traceID: record.traceID, spanID: record.spanID, parentSpanID: record.parentSpanID, name: record.name,
            kind: record.kind, startNanoseconds: record.startNanoseconds, endNanoseconds: record.endNanoseconds
        ) { out.append(contentsOf: $0) }
        out.append(contentsOf: record.encodedAttributes)
        appendStatus(record.status, message: record.statusMessage, into: &out)
    }

    /// Calls `body` with the span's head (fields 1, 2, 4, 5, 6, 7 and 8),
    /// written into a stack buffer: a finished span's head is copied once,
    /// into the exporter's queue, and never allocated.
    static func withSpanHead<Result>(
        traceID: String, spanID: String, parentSpanID: String?, name: String, kind: SpanKind, startNanoseconds: UInt64,
        endNanoseconds: UInt64, _ body: (UnsafeBufferPointer<UInt8>) -> Result
    ) -> Result {
        let nameCount = name.utf8.count
        // Ids 3 x 34, the name's tag and length 1 + 5, the fixed fields 20.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 3 * 34 + 6 + nameCount + 20) { buffer in
            let bytes = buffer.baseAddress!
            var count = 0
            let written = Protobuf.putIDs(traceID: traceID, spanID: spanID, parentSpanID: parentSpanID, bytes, &count)
                && name.utf8.withContiguousStorageIfAvailable { name -> Void in
                    bytes[count] = 5 << 3 | 2
                    count += 1
                    Protobuf.putVarint(UInt64(name.count), bytes, &count)
                    Protobuf.put(name, bytes, &count)
                } != nil
            guard written else {
                // Ids that are not hex, or a name not in contiguous UTF-8: never the relay's own.
                var head: [UInt8] = []
                Protobuf.hexBytes(field: 1, traceID, into: &head)
                Protobuf.hexBytes(field: 2, spanID, into: &head)
                if let parentSpanID { Protobuf.hexBytes(field: 4, parentSpanID, into: &head) }
                Protobuf.string(field: 5, name, into: &head)
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { fixed in
                    putFixedFields(kind: kind, startNanoseconds, endNanoseconds, fixed.baseAddress!)
                    head.append(contentsOf: fixed)
                }
                return head.withUnsafeBufferPointer(body)
            }
            putFixedFields(kind: kind, startNanoseconds, endNanoseconds, bytes + count)
            return body(UnsafeBufferPointer(start: bytes, count: count + 20))
        }
    }

    /// Kind (6), start (7) and end (8): 20 bytes at `bytes`.
    private static func putFixedFields(kind: SpanKind, _ start: UInt64, _ end: UInt64, _ bytes: UnsafeMutablePointer<UInt8>) {
        bytes[0] = 6 << 3  // kind, a varint (1 to 5: one byte)
        bytes[1] = UInt8(kindNumber(kind))
        bytes[2] = 7 << 3 | 1  // start_time_unix_nano, fixed64
        UnsafeMutableRawPointer(bytes + 3).storeBytes(of: start.littleEndian, as: UInt64.self)
        bytes[11] = 8 << 3 | 1  // end_time_unix_nano, fixed64
        UnsafeMutableRawPointer(bytes + 12).storeBytes(of: end.littleEndian, as: UInt64.self)
    }

    /// The status field (15), when the span has a status: the body's last field.
    static func appendStatus(_ code: SpanStatus.Code?, message: String?, into out: inout [UInt8]) {
        guard let code else { return }
        let number: UInt64 = code == .ok ? 1 : 2
        let message = message ?? ""
        let size = (message.isEmpty ? 0 : Protobuf.stringFieldSize(message)) + 1 + Protobuf.varintSize(number)
        Protobuf.tag(15, .lengthDelimited, into: &out)
        Protobuf.varint(UInt64(size), into: &out)
        if !message.isEmpty { Protobuf.string(field: 2, message, into: &out) }
        Protobuf.tag(3, .varint, into: &out)
        Protobuf.varint(number, into: &out)
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
