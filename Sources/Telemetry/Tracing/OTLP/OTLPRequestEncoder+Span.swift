import Tracing

/// One span's message (Span, trace.proto), from its record.
extension OTLPRequestEncoder {
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
