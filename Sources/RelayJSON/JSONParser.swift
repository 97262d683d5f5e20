/// Why a byte sequence is not a JSON document, and where.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset of the problem in the input.
    public var offset: Int
    /// 1-based line and column of the problem.
    public var line: Int
    public var column: Int
    public var message: String

    public var description: String { "invalid JSON at line \(line), column \(column): \(message)" }
}

/// A strict RFC 8259 parser producing ``JSONValue``.
///
/// Strict means: one value with only whitespace around it, no trailing commas,
/// no comments, no duplicate keys in an object (APNs and the snapshot contract
/// would otherwise see a different value than the producer meant), valid UTF-8,
/// and a nesting limit so hostile input cannot exhaust the stack.
public struct JSONParser {
    /// Deepest nesting of arrays and objects accepted.
    public static let maximumDepth = 256

    /// Members up to which duplicate keys are found by a scan, not a set.
    static let linearKeyCheckLimit = 16

    /// Members an object has room for once it has one (it grows past that as usual).
    static let reservedMembers = 8

    /// Objects of at least this many bytes are remembered for ``repeatedObject(depth:)``.
    static let repeatMinimumBytes = 64

    /// Depths (1: the top level) at which an object is remembered.
    static let repeatDepths = 8

    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: Array(bytes))
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.index == parser.bytes.count else {
            throw parser.error("unexpected content after the JSON value")
        }
        return value
    }

    private let bytes: [UInt8]
    private var index = 0
    /// The last object of at least ``repeatMinimumBytes`` parsed at each
    /// depth below ``repeatDepths``: where its text lies, and its value.
    /// Empty until the first such object ends.
    private var lastObjects: [(start: Int, end: Int, value: JSONValue)?] = []

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private func error(_ message: String, at position: Int? = nil) -> JSONParseError {
        let offset = min(position ?? index, bytes.count)
        var line = 1
        var column = 1
        for byte in bytes[..<offset] {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return JSONParseError(offset: offset, line: line, column: column, message: message)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of input, expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character, expected a value")
        }
    }

    private mutating func expectLiteral(_ literal: String) throws(JSONParseError) {
        let start = index
        for expected in literal.utf8 {
            guard index < bytes.count, bytes[index] == expected else { throw error("invalid literal", at: start) }
            index += 1
        }
    }

    private mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
        if let repeated = repeatedObject(depth: depth) { return repeated }
        let start = index
        index += 1  // {
        var object = JSONObject()
        // Duplicate keys: a scan of the members so far while the object is
        // small (as nearly every object is), a set once it grows; a set per
        // object cost a hasher seeding per object and per key.
        var seen: Set<String>?
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(object)
        }
        // Room for a typical object's members at once: grown one by one (1,
        // 2, 4, 8, 16), a send body's three objects cost thirteen allocations
        // and copies; so, four.
        object.reserveCapacity(Self.reservedMembers)
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw error("expected a string key")
            }
            let keyStart = index
            let key = try parseString()
            let duplicate: Bool
            if seen != nil {
                duplicate = !seen!.insert(key).inserted
            } else if object.count < Self.linearKeyCheckLimit {
                duplicate = object.containsKey(key)
            } else {
                seen = Set(object.keys)
                duplicate = !seen!.insert(key).inserted
            }
            guard !duplicate else { throw error("duplicate key \"\(key)\"", at: keyStart) }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            object.appendNewMember(key, try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                let value = JSONValue.object(object)
                remember(value, from: start, depth: depth)
                return value
            }
            throw error("expected ',' or '}'")
        }
    }

    /// The value of the object starting at `index` when its text is, byte
    /// for byte, that of the last large object parsed at the same depth (a
    /// batch's items repeating one snapshot): that object's value, shared,
    /// with `index` past it; nil otherwise. An object's text ends at its
    /// closing brace, so the same bytes parse to the same value, and at the
    /// same depth under the same limit: they were valid there, they are here.
    /// Comparing bytes is cheaper than parsing them again, and the value's
    /// storage is shared, so comparing the two values later finds them equal at once.
    private mutating func repeatedObject(depth: Int) -> JSONValue? {
        guard depth < lastObjects.count, let last = lastObjects[depth] else { return nil }
        let length = last.end - last.start
        guard bytes.count - index >= length else { return nil }
        let same = bytes.withUnsafeBytes { buffer in
            Self.equalBytes(buffer.baseAddress! + index, buffer.baseAddress! + last.start, count: length)
        }
        guard same else { return nil }
        index += length
        return last.value
    }

    /// Remembers an object just parsed from `start` to `index` for ``repeatedObject(depth:)``.
    private mutating func remember(_ value: JSONValue, from start: Int, depth: Int) {
        guard index - start >= Self.repeatMinimumBytes, depth < Self.repeatDepths else { return }
        if lastObjects.isEmpty { lastObjects = Array(repeating: nil, count: Self.repeatDepths) }
        lastObjects[depth] = (start, index, value)
    }

    /// Whether `count` bytes at `a` and `b` are equal: eight at a time, then the rest.
    private static func equalBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, count: Int) -> Bool {
        var offset = 0
        while count - offset >= 8 {
            guard a.loadUnaligned(fromByteOffset: offset, as: UInt64.self) == b.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            else { return false }
            offset += 8
        }
        while offset < count {
            guard a.load(fromByteOffset: offset, as: UInt8.self) == b.load(fromByteOffset: offset, as: UInt8.self) else { return false }
            offset += 1
        }
        return true
    }

    private mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
        index += 1  // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            throw error("expected ',' or ']'")
        }
    }

    private mutating func parseString() throws(JSONParseError) -> String {
        let start = index
        // The common string has no escape: its bytes become the String
        // directly, without being copied one by one into a buffer first.
        var end = index + 1
        // Every byte ORed together: below 0x80, the string is ASCII and valid UTF-8 as it stands.
        var bits: UInt8 = 0
        while end < bytes.count {
            let byte = bytes[end]
            if byte == UInt8(ascii: "\"") {
                let range = (index + 1)..<end
                // ASCII (nearly every key and value) needs no validation: made
                // from the buffer at once; `String(validating:)` on a slice took
                // its generic path, a third of the parser's time.
                let string = bits < 0x80
                    ? bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[range]), as: UTF8.self) }
                    : String(validating: bytes[range], as: UTF8.self)
                guard let string else { throw error("string is not valid UTF-8", at: start) }
                index = end + 1
                return string
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { break }
            bits |= byte
            end += 1
        }
        return try parseEscapedString()
    }

    /// A string with escapes (or an error): decoded byte by byte.
    private mutating func parseEscapedString() throws(JSONParseError) -> String {
        let start = index
        index += 1  // opening quote
        var utf8: [UInt8] = []
        while true {
            guard index < bytes.count else { throw error("unterminated string", at: start) }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let string = String(validating: utf8, as: UTF8.self) else {
                    throw error("string is not valid UTF-8", at: start)
                }
                return string
            case UInt8(ascii: "\\"):
                index += 1
                try parseEscape(into: &utf8)
            case 0x00..<0x20:
                throw error("control character in string must be escaped")
            default:
                utf8.append(byte)
                index += 1
            }
        }
    }

    private mutating func parseEscape(into utf8: inout [UInt8]) throws(JSONParseError) {
        guard index < bytes.count else { throw error("unterminated escape") }
        let byte = bytes[index]
        index += 1
        switch byte {
        case UInt8(ascii: "\""): utf8.append(0x22)
        case UInt8(ascii: "\\"): utf8.append(0x5C)
        case UInt8(ascii: "/"): utf8.append(0x2F)
        case UInt8(ascii: "b"): utf8.append(0x08)
        case UInt8(ascii: "f"): utf8.append(0x0C)
        case UInt8(ascii: "n"): utf8.append(0x0A)
        case UInt8(ascii: "r"): utf8.append(0x0D)
        case UInt8(ascii: "t"): utf8.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHex4()
            if (0xD800..<0xDC00).contains(scalar) {
                guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                else { throw error("unpaired high surrogate") }
                index += 2
                let low = try parseHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw error("invalid low surrogate") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw error("unpaired low surrogate")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid unicode escape") }
            utf8.append(contentsOf: Array(String(Character(unicode)).utf8))
        default:
            throw error("invalid escape character")
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number", at: start) }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw error("leading zeros are not allowed", at: start) }
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("digit expected after '.'") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("digit expected in exponent") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if isInteger, let integer = Self.integer(bytes[start..<index]) { return .integer(integer) }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let integer = Int64(text) { return .integer(integer) }
        guard let double = Double(text), double.isFinite else {
            throw error("number out of range", at: start)
        }
        return .double(double)
    }

    /// An integer's digits (already checked: an optional `-`, then digits)
    /// as an Int64, without a String in between; nil when it overflows, and
    /// the caller then takes the general path.
    private static func integer(_ digits: ArraySlice<UInt8>) -> Int64? {
        var rest = digits[...]
        let negative = rest.first == UInt8(ascii: "-")
        if negative { rest = rest.dropFirst() }
        var value: Int64 = 0
        for digit in rest {
            // Accumulated negatively, so Int64.min fits.
            let (shifted, overflowShift) = value.multipliedReportingOverflow(by: 10)
            let (next, overflowAdd) = shifted.subtractingReportingOverflow(Int64(digit &- UInt8(ascii: "0")))
            if overflowShift || overflowAdd { return nil }
            value = next
        }
        if negative { return value }
        return value == .min ? nil : -value
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}
