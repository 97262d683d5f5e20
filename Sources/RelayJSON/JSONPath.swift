/// A location inside a JSON document, written the way error messages show it:
/// `$.liveActivity.progress`, `$.items[3].token`.
public struct JSONPath: Sendable, Hashable, CustomStringConvertible {
    public enum Component: Sendable, Hashable {
        case key(String)
        case index(Int)
    }

    public private(set) var components: [Component]

    public init(_ components: [Component] = []) { self.components = components }

    /// The document root, `$`.
    public static let root = JSONPath()

    public func appending(_ key: String) -> JSONPath {
        var copy = self
        copy.components.append(.key(key))
        return copy
    }

    public func appending(index: Int) -> JSONPath {
        var copy = self
        copy.components.append(.index(index))
        return copy
    }

    public var description: String {
        var text = "$"
        for component in components {
            switch component {
            case .key(let key):
                if !key.isEmpty, key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) {
                    text += "." + key
                } else {
                    text += "[" + JSONValue.string(key).encodedString() + "]"
                }
            case .index(let index):
                text += "[\(index)]"
            }
        }
        return text
    }
}
