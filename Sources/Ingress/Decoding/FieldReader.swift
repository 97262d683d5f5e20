import RelayJSON

/// Reads the members of one JSON object by name and type, naming the full
/// path of any field that is missing, mistyped or unknown.
struct FieldReader {
    let object: JSONObject
    /// The object's own path: "" for the body, "items[3]" for a batch item.
    let path: String
    /// The members read so far. An array: an object has a handful of
    /// members, and a set hashed every name on every read.
    private(set) var read: [String] = []

    init(_ value: JSONValue, path: String) throws(IngressError) {
        guard case .object(let object) = value else {
            throw .invalid(path.isEmpty ? "body" : path, "must be a JSON object, not \(value.typeName)")
        }
        self.object = object
        self.path = path
    }

    func name(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func has(_ key: String) -> Bool {
        if case .some(.null) = object[key] { return false }
        return object[key] != nil
    }

    mutating func value(_ key: String) -> JSONValue? {
        if !read.contains(key) { read.append(key) }
        guard let value = object[key], value != .null else { return nil }
        return value
    }

    mutating func string(_ key: String) throws(IngressError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else { throw .invalid(name(key), "must be a string, not \(value.typeName)") }
        return text
    }

    /// `rule` is worded only when the field is missing.
    mutating func requiredString(_ key: String, rule: @autoclosure () -> String = "is required") throws(IngressError) -> String {
        guard let text = try string(key) else { throw .invalid(name(key), rule()) }
        guard !text.isEmpty else { throw .invalid(name(key), "must not be empty") }
        return text
    }

    mutating func integer(_ key: String) throws(IngressError) -> Int64? {
        guard let value = value(key) else { return nil }
        guard case .integer(let number) = value else { throw .invalid(name(key), "must be an integer, not \(value.typeName)") }
        return number
    }

    mutating func number(_ key: String) throws(IngressError) -> Double? {
        guard let value = value(key) else { return nil }
        guard let number = value.numberValue else { throw .invalid(name(key), "must be a number, not \(value.typeName)") }
        return number
    }

    mutating func bool(_ key: String) throws(IngressError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let flag) = value else { throw .invalid(name(key), "must be true or false, not \(value.typeName)") }
        return flag
    }

    mutating func object(_ key: String) throws(IngressError) -> JSONValue? {
        guard let value = value(key) else { return nil }
        guard case .object = value else { throw .invalid(name(key), "must be a JSON object, not \(value.typeName)") }
        return value
    }

    mutating func array(_ key: String) throws(IngressError) -> [JSONValue]? {
        guard let value = value(key) else { return nil }
        guard case .array(let items) = value else { throw .invalid(name(key), "must be an array, not \(value.typeName)") }
        return items
    }

    /// Fails on the first member that was never read: a typo must not be ignored.
    func rejectUnknown(allowed: String) throws(IngressError) {
        for key in object.keys where !read.contains(key) {
            throw .invalid(name(key), "unknown field (allowed here: \(allowed))")
        }
    }

    /// Fails when `key` is present although the operation does not use it.
    func reject(_ key: String, because rule: String) throws(IngressError) {
        if has(key) { throw .invalid(name(key), rule) }
    }
}
