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

    let bytes: [UInt8]
    var index = 0
    /// The last object of at least ``repeatMinimumBytes`` parsed at each
    /// depth below ``repeatDepths``: where its text lies, and its value.
    /// Empty until the first such object ends.
    var lastObjects: [(start: Int, end: Int, value: JSONValue)?] = []

    private init(bytes: [UInt8]) { self.bytes = bytes }

    func error(_ message: String, at position: Int? = nil) -> JSONParseError {
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

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
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

    mutating func expectLiteral(_ literal: String) throws(JSONParseError) {
        let start = index
        for expected in literal.utf8 {
            guard index < bytes.count, bytes[index] == expected else { throw error("invalid literal", at: start) }
            index += 1
        }
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
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

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
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

}
