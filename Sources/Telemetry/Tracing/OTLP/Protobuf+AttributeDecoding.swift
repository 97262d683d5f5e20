import Tracing

/// Reading attributes back from the `KeyValue` bytes ``Protobuf`` wrote:
/// ``OTLPSpan`` keeps only its attributes' encoding (not their keys and values
/// as well, which every send paid to store and release for a getter it never
/// calls and a search that rarely finds anything), and finds an earlier value
/// of a key, and decodes them for its `attributes` getter, from those bytes.
///
/// What comes back is what the receiver sees: a 32-bit integer reads back as
/// `.int64`, a `.stringConvertible` as the `.string` of its description.
extension Protobuf {
    /// Each `KeyValue` field in `bytes` (fields as ``keyValue(field:key:value:into:)``
    /// appends them, one after another), in order: its range in `bytes` and its key.
    static func keyValueFields(_ bytes: [UInt8]) -> [(range: Range<Int>, key: String)] {
        var fields: [(range: Range<Int>, key: String)] = []
        var reader = Reader(bytes[...])
        while true {
            let start = reader.offset
            guard reader.tag() != nil, let body = reader.lengthDelimited() else { return fields }
            fields.append((start..<body.endIndex, String(decoding: key(ofKeyValue: body) ?? [], as: UTF8.self)))
        }
    }

    /// The range in `bytes` of the `KeyValue` field whose key is `key`, if one is there.
    static func keyValueField(withKey key: String, in bytes: [UInt8]) -> Range<Int>? {
        let length = key.utf8.count
        var reader = Reader(bytes[...])
        while true {
            let start = reader.offset
            guard reader.tag() != nil, let body = reader.lengthDelimited() else { return nil }
            if let found = Self.key(ofKeyValue: body), found.count == length, found.elementsEqual(key.utf8) {
                return start..<body.endIndex
            }
        }
    }

    /// A `KeyValue` message's key bytes.
    private static func key(ofKeyValue body: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        var reader = Reader(body)
        while let (number, type) = reader.tag() {
            if number == 1 && type == WireType.lengthDelimited.rawValue { return reader.lengthDelimited() }
            guard reader.skip(type) else { return nil }
        }
        return nil
    }

    /// The value of one `KeyValue` field (tag, length, message), or nil when the bytes are not one.
    static func attributeValue(ofKeyValueField bytes: ArraySlice<UInt8>) -> SpanAttribute? {
        var field = Reader(bytes)
        guard let (_, type) = field.tag(), type == WireType.lengthDelimited.rawValue,
              var keyValue = field.lengthDelimited().map(Reader.init)
        else { return nil }
        while let (number, type) = keyValue.tag() {
            if number == 2 && type == WireType.lengthDelimited.rawValue {
                return keyValue.lengthDelimited().flatMap(anyValueAttribute)
            }
            guard keyValue.skip(type) else { return nil }
        }
        return nil
    }

    /// An `AnyValue` message as a span attribute (a scalar, or an array of one kind).
    static func anyValueAttribute(_ bytes: ArraySlice<UInt8>) -> SpanAttribute? {
        var reader = Reader(bytes)
        guard let (number, type) = reader.tag() else { return nil }
        switch (number, type) {
        case (5, WireType.lengthDelimited.rawValue):
            guard var array = reader.lengthDelimited().map(Reader.init) else { return nil }
            var values: [SpanAttribute] = []
            while let (number, type) = array.tag() {
                guard number == 1, type == WireType.lengthDelimited.rawValue,
                      let value = array.lengthDelimited().flatMap(anyValueAttribute)
                else { return nil }
                values.append(value)
            }
            return arrayAttribute(values)
        default:
            return scalarAttribute(number: number, type: type, &reader)
        }
    }

    private static func scalarAttribute(number: UInt64, type: UInt64, _ reader: inout Reader) -> SpanAttribute? {
        switch (number, type) {
        case (1, WireType.lengthDelimited.rawValue):
            reader.lengthDelimited().map { .string(String(decoding: $0, as: UTF8.self)) }
        case (2, WireType.varint.rawValue):
            reader.varint().map { .bool($0 != 0) }
        case (3, WireType.varint.rawValue):
            reader.varint().map { .int64(Int64(bitPattern: $0)) }
        case (4, WireType.fixed64.rawValue):
            reader.fixed64().map { .double(Double(bitPattern: $0)) }
        default:
            nil
        }
    }

    /// Array values are all of one kind (a `SpanAttribute` array's elements); an empty one reads as strings.
    private static func arrayAttribute(_ values: [SpanAttribute]) -> SpanAttribute? {
        switch values.first {
        case nil, .string: values.allSatisfy { if case .string = $0 { true } else { false } }
            ? .stringArray(values.compactMap { if case .string(let text) = $0 { text } else { nil } }) : nil
        case .int64: .int64Array(values.compactMap { if case .int64(let number) = $0 { number } else { nil } })
        case .bool: .boolArray(values.compactMap { if case .bool(let flag) = $0 { flag } else { nil } })
        case .double: .doubleArray(values.compactMap { if case .double(let number) = $0 { number } else { nil } })
        default: nil
        }
    }

    /// Protobuf's wire format, read: tags, varints, fixed64s and length-delimited slices.
    struct Reader {
        private let bytes: ArraySlice<UInt8>
        private var position: Int

        init(_ bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            position = bytes.startIndex
        }

        /// The next field's number and wire type; nil at the end.
        mutating func tag() -> (UInt64, UInt64)? {
            guard position < bytes.endIndex, let tag = varint() else { return nil }
            return (tag >> 3, tag & 7)
        }

        /// Where the next read starts, an index of the bytes given.
        var offset: Int { position }

        mutating func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while position < bytes.endIndex, shift < 64 {
                let byte = bytes[position]
                position += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
            return nil
        }

        mutating func fixed64() -> UInt64? {
            guard bytes.endIndex - position >= 8 else { return nil }
            var value: UInt64 = 0
            for index in 0..<8 { value |= UInt64(bytes[position + index]) << (8 * UInt64(index)) }
            position += 8
            return value
        }

        mutating func lengthDelimited() -> ArraySlice<UInt8>? {
            guard let length = varint(), length <= UInt64(bytes.endIndex - position) else { return nil }
            let start = position
            position += Int(length)
            return bytes[start..<position]
        }

        /// Steps over a field's value of wire type `type`; false when it cannot.
        mutating func skip(_ type: UInt64) -> Bool {
            switch type {
            case WireType.varint.rawValue: return varint() != nil
            case WireType.fixed64.rawValue: return fixed64() != nil
            case WireType.lengthDelimited.rawValue: return lengthDelimited() != nil
            case WireType.fixed32.rawValue:
                guard bytes.endIndex - position >= 4 else { return false }
                position += 4
                return true
            default: return false
            }
        }
    }
}
