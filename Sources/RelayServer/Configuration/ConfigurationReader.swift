import RelayJSON
import Yams

/// Reads one YAML mapping with path-named errors and no tolerance for
/// unknown keys: a misspelt setting must stop the relay, not be ignored.
struct ConfigurationReader {
    let members: JSONObject
    let path: String
    private var read: Set<String> = []

    init(_ value: JSONValue, path: String) throws(ConfigurationError) {
        guard case .object(let members) = value else {
            throw ConfigurationError(field: path.isEmpty ? "(file)" : path, "must be a mapping, not \(value.typeName)")
        }
        self.members = members
        self.path = path
    }

    func name(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    mutating func value(_ key: String) -> JSONValue? {
        read.insert(key)
        guard let value = members[key], value != .null else { return nil }
        return value
    }

    mutating func string(_ key: String) throws(ConfigurationError) -> String? {
        guard let value = value(key) else { return nil }
        switch value {
        case .string(let text): return text
        case .integer(let number): return String(number)
        default: throw ConfigurationError(field: name(key), "must be a string, not \(value.typeName)")
        }
    }

    mutating func integer(_ key: String, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
        guard let value = value(key) else { return nil }
        guard case .integer(let number) = value, range.contains(Int(number)) else {
            throw ConfigurationError(field: name(key), "must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return Int(number)
    }

    mutating func number(_ key: String, in range: ClosedRange<Double>) throws(ConfigurationError) -> Double? {
        guard let value = value(key) else { return nil }
        guard let number = value.numberValue, range.contains(number) else {
            throw ConfigurationError(field: name(key), "must be a number from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    mutating func bool(_ key: String) throws(ConfigurationError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let flag) = value else { throw ConfigurationError(field: name(key), "must be true or false") }
        return flag
    }

    mutating func child(_ key: String) throws(ConfigurationError) -> ConfigurationReader? {
        guard let value = value(key) else { return nil }
        return try ConfigurationReader(value, path: name(key))
    }

    mutating func list(_ key: String) throws(ConfigurationError) -> [JSONValue]? {
        guard let value = value(key) else { return nil }
        guard case .array(let items) = value else { throw ConfigurationError(field: name(key), "must be a list") }
        return items
    }

    mutating func strings(_ key: String) throws(ConfigurationError) -> [String]? {
        guard let items = try list(key) else { return nil }
        return try items.enumerated().map { (index, item) throws(ConfigurationError) -> String in
            guard case .string(let text) = item else { throw ConfigurationError(field: "\(name(key))[\(index)]", "must be a string") }
            return text
        }
    }

    func rejectUnknown() throws(ConfigurationError) {
        for key in members.keys where !read.contains(key) {
            let known = read.sorted().joined(separator: ", ")
            throw ConfigurationError(field: name(key), "unknown setting (known here: \(known))")
        }
    }

    /// YAML text to a JSON-like tree, scalars typed by YAML's core schema.
    static func parse(yaml: String, file: String) throws(ConfigurationError) -> JSONValue {
        let node: Node?
        do {
            node = try Yams.compose(yaml: yaml)
        } catch {
            throw ConfigurationError(field: file, "is not valid YAML: \(error)")
        }
        guard let node else { return .object(JSONObject()) }
        return try convert(node, path: "")
    }

    private static func convert(_ node: Node, path: String) throws(ConfigurationError) -> JSONValue {
        switch node {
        case .scalar:
            if node.null != nil { return .null }
            if let flag = node.bool { return .bool(flag) }
            if let number = node.int { return .integer(Int64(number)) }
            if let number = node.float { return .double(number) }
            return .string(node.string ?? "")
        case .sequence(let sequence):
            var items: [JSONValue] = []
            for (index, item) in sequence.enumerated() { items.append(try convert(item, path: "\(path)[\(index)]")) }
            return .array(items)
        case .mapping(let mapping):
            var object = JSONObject()
            for (key, value) in mapping {
                guard let name = key.string else { throw ConfigurationError(field: path.isEmpty ? "(file)" : path, "keys must be strings") }
                let childPath = path.isEmpty ? name : "\(path).\(name)"
                guard object[name] == nil else { throw ConfigurationError(field: childPath, "appears twice") }
                object[name] = try convert(value, path: childPath)
            }
            return .object(object)
        case .alias:
            throw ConfigurationError(field: path.isEmpty ? "(file)" : path, "YAML aliases are not supported")
        }
    }
}
