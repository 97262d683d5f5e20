/// A JSON document as a value: objects keep their key order, integers stay
/// integers, and encoding is byte-for-byte deterministic.
///
/// The relay needs all three. APNs payloads are compared byte for byte in tests
/// and counted against the 4 KB limit, so the encoder must not reorder keys or
/// change number spelling; the snapshot contract distinguishes integers
/// (`estimatedSeconds`) from numbers (`progress`); and validation errors name
/// the exact path of the offending value.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// A number written without a fraction or exponent that fits in 64 bits.
    case integer(Int64)
    /// Any other finite number.
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

extension JSONValue {
    /// The JSON type name used in error messages ("string", "integer", …).
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .integer: "integer"
        case .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The value as a Double for `.integer` and `.double`.
    public var numberValue: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .double(let value): value
        default: nil
        }
    }

    /// The value as an integer: `.integer`, or a `.double` with no fractional
    /// part that fits (JSON Schema counts `3.0` as an integer).
    public var integerValue: Int64? {
        switch self {
        case .integer(let value):
            return value
        case .double(let value):
            guard value.rounded(.towardZero) == value,
                  value >= -9_223_372_036_854_775_808.0, value < 9_223_372_036_854_775_808.0
            else { return nil }
            return Int64(value)
        default:
            return nil
        }
    }

    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The member named `key` when this is an object.
    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements))
    }
}
