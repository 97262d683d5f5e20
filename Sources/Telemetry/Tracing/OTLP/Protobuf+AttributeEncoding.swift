import Relay
import Tracing

/// Attributes as OTLP `KeyValue`/`AnyValue` messages.
extension Protobuf {
    /// A KeyValue field.
    static func keyValue(field: UInt64, key: String, value: SpanAttribute, into out: inout [UInt8]) {
        // A string or an integer (a send's attributes but one): written
        // straight from the attribute, without the Scalar in between.
        switch value {
        case .string(let text): return keyValue(field: field, key: key, string: text, into: &out)
        case .int64(let number): return keyValue(field: field, key: key, int: number, into: &out)
        default: break
        }
        // A scalar (nearly every other attribute) is converted once, for its size and its bytes.
        let scalarValue = single(value)
        let valueSize = scalarValue.map(scalarSize) ?? anyValueSize(value)
        keyValueHead(field: field, key: key, valueSize: valueSize, into: &out)
        if let scalarValue { scalar(scalarValue, into: &out) } else { anyValue(value, into: &out) }
    }

    /// A KeyValue field holding a string: what `keyValue(field:key:value:)` writes for `.string(text)`.
    static func keyValue(field: UInt64, key: String, string text: String, into out: inout [UInt8]) {
        let written: Bool? = key.utf8.withContiguousStorageIfAvailable { keyBytes in
            text.utf8.withContiguousStorageIfAvailable { textBytes in
                contiguousKeyValue(field: field, key: keyBytes, text: textBytes, number: 0, into: &out)
            } != nil
        }
        if written == true { return }
        let valueSize = stringFieldSize(text, field: 1)
        keyValueHead(field: field, key: key, valueSize: valueSize, into: &out)
        string(field: 1, text, into: &out)
    }

    /// A KeyValue field holding an integer: what `keyValue(field:key:value:)` writes for `.int64(number)`.
    static func keyValue(field: UInt64, key: String, int number: Int64, into out: inout [UInt8]) {
        if key.utf8.withContiguousStorageIfAvailable({ keyBytes in
            contiguousKeyValue(field: field, key: keyBytes, text: nil, number: number, into: &out)
        }) != nil { return }
        let valueSize = 1 + varintSize(UInt64(bitPattern: number))
        keyValueHead(field: field, key: key, valueSize: valueSize, into: &out)
        tag(3, .varint, into: &out)
        varint(UInt64(bitPattern: number), into: &out)
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
            putKeyValue(
                field: field, size: size, valueSize: valueSize, keyCount: key.count, textCount: text?.count, number: number, bytes, &count,
                key: { put(key, bytes, &$0) }, text: { if let text { put(text, bytes, &$0) } })
            out.append(contentsOf: UnsafeBufferPointer(start: bytes, count: count))
        }
    }

    /// The send span's starting attributes as `KeyValue` fields: the bytes
    /// ``keyValue(field:key:value:into:)`` writes for each, in
    /// ``SendSpanAttributes/forEach(_:)``'s order, written into one stack
    /// buffer from the struct's strings and numbers and appended once (no
    /// `SpanAttribute` made and copied, one append instead of ten: issue 26).
    /// False, with nothing written, when they do not fit in 1 KiB.
    static func sendSpanAttributes(_ attributes: SendSpanAttributes, field: UInt64, into out: inout [UInt8]) -> Bool {
        let capacity = 1024
        var total = 0
        attributes.forEachValue { key, text, number in
            let size = keyValueSizes(key: key.utf8CodeUnitCount, text: text?.utf8.count, number: number).size
            total += varintSize(field << 3) + varintSize(UInt64(size)) + size
        }
        guard total <= capacity else { return false }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer in
            let bytes = buffer.baseAddress!
            var count = 0
            attributes.forEachValue { key, text, number in
                let (size, valueSize) = keyValueSizes(key: key.utf8CodeUnitCount, text: text?.utf8.count, number: number)
                putKeyValue(
                    field: field, size: size, valueSize: valueSize, keyCount: key.utf8CodeUnitCount, textCount: text?.utf8.count,
                    number: Int64(number), bytes, &count,
                    key: { count in key.withUTF8Buffer { put($0, bytes, &count) } },
                    text: { count in
                        guard let text else { return }
                        if text.utf8.withContiguousStorageIfAvailable({ put($0, bytes, &count) }) == nil {
                            for byte in text.utf8 {
                                bytes[count] = byte
                                count += 1
                            }
                        }
                    })
            }
            out.append(contentsOf: UnsafeBufferPointer(start: bytes, count: count))
        }
        return true
    }

    /// A string (`text`, its byte count) or else integer KeyValue's size and its AnyValue's size.
    @inline(__always)
    private static func keyValueSizes(key: Int, text: Int?, number: Int) -> (size: Int, valueSize: Int) {
        let valueSize = text.map { 1 + varintSize(UInt64($0)) + $0 } ?? 1 + varintSize(UInt64(bitPattern: Int64(number)))
        return (1 + varintSize(UInt64(key)) + key + 1 + varintSize(UInt64(valueSize)) + valueSize, valueSize)
    }

    /// One KeyValue (field `field`, `size` bytes) at `bytes[count...]`: its
    /// tag and length, the key (`putKey` writes its `keyCount` bytes), the
    /// value's tag and length, then a string (`putText` writes its
    /// `textCount` bytes) or else the integer `number`. The caller sized the
    /// buffer; the one writer of a KeyValue in place, for a single attribute
    /// and for the send span's starting ones.
    @inline(__always)
    private static func putKeyValue(
        field: UInt64, size: Int, valueSize: Int, keyCount: Int, textCount: Int?, number: Int64,
        _ bytes: UnsafeMutablePointer<UInt8>, _ count: inout Int,
        key putKey: (inout Int) -> Void, text putText: (inout Int) -> Void
    ) {
        putVarint(field << 3 | WireType.lengthDelimited.rawValue, bytes, &count)
        putVarint(UInt64(size), bytes, &count)
        bytes[count] = 1 << 3 | 2  // KeyValue.key
        count += 1
        putVarint(UInt64(keyCount), bytes, &count)
        putKey(&count)
        bytes[count] = 2 << 3 | 2  // KeyValue.value
        count += 1
        putVarint(UInt64(valueSize), bytes, &count)
        if let textCount {
            bytes[count] = 1 << 3 | 2  // AnyValue.string_value
            count += 1
            putVarint(UInt64(textCount), bytes, &count)
            putText(&count)
        } else {
            bytes[count] = 3 << 3  // AnyValue.int_value, a varint
            count += 1
            putVarint(UInt64(bitPattern: number), bytes, &count)
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
    static func put(_ source: UnsafeBufferPointer<UInt8>, _ bytes: UnsafeMutablePointer<UInt8>, _ count: inout Int) {
        if let base = source.baseAddress, source.count > 0 {
            (bytes + count).update(from: base, count: source.count)
            count += source.count
        }
    }

    @inline(__always)
    static func putVarint(_ value: UInt64, _ bytes: UnsafeMutablePointer<UInt8>, _ count: inout Int) {
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
