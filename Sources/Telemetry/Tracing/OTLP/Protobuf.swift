import RelayBasics
import Tracing

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
}
