extension JSONValue {
    /// Compact UTF-8 encoding: members in stored order, no insignificant
    /// whitespace, `/` not escaped, non-ASCII written as UTF-8.
    public func encoded() -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        encode(into: &output)
        return output
    }

    /// ``encoded()`` as a String.
    public func encodedString() -> String {
        String(decoding: encoded(), as: UTF8.self)
    }

    /// Appends this value's encoding to `output`.
    public func encode(into output: inout [UInt8]) {
        switch self {
        case .null:
            output.append(contentsOf: "null".utf8)
        case .bool(let value):
            output.append(contentsOf: (value ? "true" : "false").utf8)
        case .integer(let value):
            output.append(contentsOf: String(value).utf8)
        case .double(let value):
            Self.appendNumber(value, to: &output)
        case .string(let value):
            Self.encodeString(value, into: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                element.encode(into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let object):
            output.append(UInt8(ascii: "{"))
            for (position, member) in object.members.enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                Self.encodeString(member.key, into: &output)
                output.append(UInt8(ascii: ":"))
                member.value.encode(into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// Shortest text that reads back as the same Double; integral values
    /// are written without a fraction (`1`, not `1.0`), as JavaScript would.
    static func numberText(_ value: Double) -> String {
        precondition(value.isFinite, "JSON cannot encode \(value)")
        if value.rounded(.towardZero) == value, abs(value) < 1e15 {
            return String(Int64(value))
        }
        return value.description
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func encodeString(_ string: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // Nearly every string needs no escape: then its bytes go in with one
        // copy, from the same view of its storage that was checked (appending
        // the UTF8View went through its generic path a second time).
        let plain: (UInt8) -> Bool = { $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
        let copied = string.utf8.withContiguousStorageIfAvailable { bytes in
            guard bytes.allSatisfy(plain) else { return false }
            output.append(contentsOf: bytes)
            return true
        }
        if copied == nil, string.utf8.allSatisfy(plain) {
            output.append(contentsOf: string.utf8)  // a string without contiguous storage
        } else if copied != true {
            return encodeEscaped(string, into: &output)
        }
        output.append(UInt8(ascii: "\""))
    }

    /// The rest of ``encodeString(_:into:)`` for a string that needs escapes.
    private static func encodeEscaped(_ string: String, into output: inout [UInt8]) {
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): output.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: output.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: output.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0x08: output.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: output.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            case 0x00..<0x20:
                output.append(contentsOf: Array("\\u00".utf8))
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0x0F)])
            default:
                output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}
