import RelayJSON

/// Reads fields out of a JSON object while collecting every contract
/// violation, so one pass reports all of them with their paths.
struct SnapshotReader {
    var issues: [SnapshotValidationError.Issue] = []

    mutating func fail(_ path: JSONPath, _ rule: String, _ message: String) {
        issues.append(.init(path: path, rule: rule, message: "\(path) \(message)"))
    }

    /// The value at `key` as an object, or nil (with an issue) when it is not one.
    mutating func object(_ parent: JSONObject, _ key: String, at path: JSONPath, required: Bool = true) -> JSONObject? {
        field(parent, key, at: path, required: required, kind: "an object") { $0.objectValue }?.value
    }

    /// The value at `key` as `extract` reads it, with the field's path and the
    /// raw value for the caller's further checks; nil, with an issue, when the
    /// key is required and absent or the value is not `kind` (absent and
    /// optional: nil without one). Every typed reader below starts here.
    private mutating func field<Value>(
        _ object: JSONObject, _ key: String, at path: JSONPath, required: Bool, kind: String, _ extract: (JSONValue) -> Value?
    ) -> (path: FieldPath, raw: JSONValue, value: Value)? {
        let path = FieldPath(parent: path, key: key)
        guard let raw = object[key] else {
            if required { fail(path.path, "required", "is required") }
            return nil
        }
        guard let value = extract(raw) else {
            fail(path.path, "type", "must be \(kind) (got \(raw.typeName))")
            return nil
        }
        return (path, raw, value)
    }

    /// A field's path, spelled out only for an issue: most fields are fine,
    /// and appending to a path copies its components.
    struct FieldPath {
        let parent: JSONPath
        let key: String
        var path: JSONPath { parent.appending(key) }
    }

    mutating func fail(_ path: FieldPath, _ rule: String, _ message: String) {
        fail(path.path, rule, message)
    }

    /// Reports every key of `object` not in `allowed` (sorted, as the
    /// message lists them), in member order.
    ///
    /// A scan of at most 13 short names: a small string compares
    /// without hashing, which a `Set` lookup per member did (with the
    /// per-field scans, about 1% of the relay's CPU per snapshot send).
    mutating func rejectUnknownKeys(_ object: JSONObject, allowed: [String], at path: JSONPath) {
        for (key, _) in object.members where !allowed.contains(key) {
            fail(path.appending(key), "additionalProperties", "is not a field of this object (allowed: \(allowed.joined(separator: ", ")))")
        }
    }

    mutating func string(
        _ object: JSONObject, _ key: String, at path: JSONPath, required: Bool, minLength: Int? = nil,
        maxLength: Int? = nil, allowed: [String]? = nil
    ) -> String? {
        guard case let (path, _, text)? = field(object, key, at: path, required: required, kind: "a string", { $0.stringValue }) else {
            return nil
        }
        if minLength != nil || maxLength != nil {
            // JSON Schema counts characters as Unicode code points, counted
            // only for a field with a bound: most fields have none, and a
            // minimum of one is "not empty", which needs no count.
            let length = minLength == 1 && maxLength == nil ? (text.isEmpty ? 0 : 1) : text.unicodeScalars.count
            if let minLength, length < minLength {
                fail(path, "minLength", minLength == 1 ? "must not be empty" : "must be at least \(minLength) characters")
                return nil
            }
            if let maxLength, length > maxLength {
                fail(path, "maxLength", "must be at most \(maxLength) characters (is \(length))")
                return nil
            }
        }
        if let allowed, !allowed.contains(text) {
            fail(path, "enum", Self.enumRule(allowed, got: text))
            return nil
        }
        return text
    }

    /// A string field holding one of `E`'s raw values, read as `E`; the
    /// spellings are listed only for an issue (a list made per field read
    /// cost an array and a string per case on every snapshot).
    mutating func enumValue<E: RawRepresentable & CaseIterable>(
        _ type: E.Type, _ object: JSONObject, _ key: String, at path: JSONPath, required: Bool
    ) -> E? where E.RawValue == String {
        guard let text = string(object, key, at: path, required: required) else { return nil }
        if let value = E(rawValue: text) { return value }
        fail(FieldPath(parent: path, key: key), "enum", Self.enumRule(E.allCases.map(\.rawValue), got: text))
        return nil
    }

    static func enumRule(_ allowed: [String], got text: String) -> String {
        "must be one of \(allowed.map { "\"\($0)\"" }.joined(separator: ", ")) (got \"\(text)\")"
    }

    mutating func deepLink(_ object: JSONObject, at path: JSONPath) -> String? {
        guard let link = string(object, "deepLink", at: path, required: true) else { return nil }
        guard Self.hasURLScheme(link) else {
            fail(path.appending("deepLink"), "pattern", "must start with a lowercase URL scheme and \"://\" (like myapp://surface/1)")
            return nil
        }
        return link
    }

    /// `^[a-z][a-z0-9+\-.]*:\/\/`, matched at the start of the string.
    static func hasURLScheme(_ text: String) -> Bool {
        // Over UTF-8 bytes: the pattern is ASCII, and any non-ASCII byte ends the scheme without a match.
        let bytes = text.utf8
        var index = bytes.startIndex
        guard index < bytes.endIndex, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(bytes[index]) else { return false }
        bytes.formIndex(after: &index)
        while index < bytes.endIndex {
            switch bytes[index] {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
                bytes.formIndex(after: &index)
            default:
                return bytes[index...].starts(with: "://".utf8)
            }
        }
        return false
    }

    mutating func number(_ object: JSONObject, _ key: String, at path: JSONPath, required: Bool, range: ClosedRange<Double>) -> Double? {
        guard case let (path, _, number)? = field(object, key, at: path, required: required, kind: "a number", { $0.numberValue }) else {
            return nil
        }
        if number < range.lowerBound {
            fail(path, "minimum", "must be at least \(Self.text(range.lowerBound)) (got \(Self.text(number)))")
            return nil
        }
        if number > range.upperBound {
            fail(path, "maximum", "must be at most \(Self.text(range.upperBound)) (got \(Self.text(number)))")
            return nil
        }
        return number
    }

    /// Integers as JSON Schema sees them: `3` and `3.0` both count, and so
    /// does `1e20`, which is then out of range rather than of the wrong type.
    mutating func integer(_ object: JSONObject, _ key: String, at path: JSONPath, required: Bool) -> Int64? {
        guard case let (path, value, number)? = field(object, key, at: path, required: required, kind: "an integer", { $0.numberValue }) else {
            return nil
        }
        guard number.rounded(.towardZero) == number else {
            fail(path, "type", "must be an integer (got \(Self.text(number)))")
            return nil
        }
        // Compared as integers when they are, so 2^53 and 2^53 + 1 differ.
        let integer = value.integerValue
        if integer.map({ $0 < 0 }) ?? (number < 0) {
            fail(path, "minimum", "must be at least 0 (got \(integer.map(String.init) ?? Self.text(number)))")
            return nil
        }
        if integer.map({ $0 > Self.maxSafeInteger }) ?? true {
            fail(path, "maximum", "must be at most \(Self.maxSafeInteger) (got \(integer.map(String.init) ?? Self.text(number)))")
            return nil
        }
        return integer
    }

    /// The schema's bound for integer fields: the largest integer a double
    /// (and so a JavaScript producer) holds exactly.
    static let maxSafeInteger: Int64 = 9_007_199_254_740_991

    mutating func bool(_ object: JSONObject, _ key: String, at path: JSONPath, required: Bool) -> Bool? {
        field(object, key, at: path, required: required, kind: "a boolean") { $0.boolValue }?.value
    }

    static func text(_ number: Double) -> String {
        number.rounded(.towardZero) == number && abs(number) < 1e15 ? String(Int64(number)) : String(number)
    }
}
