import RelayJSON

/// Reads the members of one JSON object by name and type, naming the full
/// path of any field that is missing, mistyped or unknown.
struct FieldReader {
    let object: JSONObject
    /// The object's own path: "" for the body, "items[3]" for a batch item.
    let path: String
    /// Which members were read so far, by position in the object: bit `i`
    /// of `readMask` for member `i` below 64, `readBeyond` past that. A
    /// list of names read cost an allocation per reader, more as it grew,
    /// and a scan of the names on every read (a send reads a dozen fields).
    private var readMask: UInt64 = 0
    private var readBeyond: Set<Int> = []

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
        // Keys are unique (the parser refuses duplicates): the first match is the member.
        guard let index = object.members.firstIndex(where: { $0.key == key }) else { return nil }
        markRead(index)
        let value = object.members[index].value
        if case .null = value { return nil }
        return value
    }

    private mutating func markRead(_ index: Int) {
        if index < UInt64.bitWidth { readMask |= 1 << UInt64(index) } else { readBeyond.insert(index) }
    }

    private func wasRead(_ index: Int) -> Bool {
        index < UInt64.bitWidth ? readMask & (1 << UInt64(index)) != 0 : readBeyond.contains(index)
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
        for (index, member) in object.members.enumerated() where !wasRead(index) {
            throw .invalid(name(member.key), "unknown field (allowed here: \(allowed))")
        }
    }

    /// Fails when `key` is present although the operation does not use it.
    func reject(_ key: String, because rule: String) throws(IngressError) {
        if has(key) { throw .invalid(name(key), rule) }
    }
}
