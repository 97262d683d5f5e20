/// A JSON object that keeps its members in insertion order.
///
/// Keys are unique: setting an existing key replaces its value in place, so the
/// order in which a payload was built is the order in which it is encoded.
public struct JSONObject: Sendable, Hashable {
    public private(set) var members: [(key: String, value: JSONValue)]

    public init() { members = [] }

    /// Builds an object from pairs; a repeated key keeps its first position and last value.
    public init(_ pairs: [(String, JSONValue)]) {
        members = []
        members.reserveCapacity(pairs.count)
        for (key, value) in pairs { self[key] = value }
    }

    /// Appends a member whose key the caller knows is new (the parser has
    /// already refused duplicates): no search for an existing key.
    mutating func appendNewMember(_ key: String, _ value: JSONValue) {
        members.append((key, value))
    }

    /// Room for `count` members without growing.
    mutating func reserveCapacity(_ count: Int) {
        members.reserveCapacity(count)
    }

    /// Whether a member is called `key`.
    func containsKey(_ key: String) -> Bool {
        members.contains { $0.key == key }
    }

    public var count: Int { members.count }
    public var isEmpty: Bool { members.isEmpty }
    public var keys: [String] { members.map(\.key) }

    public subscript(key: String) -> JSONValue? {
        get { members.first(where: { $0.key == key })?.value }
        set {
            if let index = members.firstIndex(where: { $0.key == key }) {
                if let newValue {
                    members[index].value = newValue
                } else {
                    members.remove(at: index)
                }
            } else if let newValue {
                members.append((key, newValue))
            }
        }
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.members.count == rhs.members.count else { return false }
        // Members walked in place: `zip` copied each pair of members (a
        // retain and a release of each key and value), and one storage
        // (the parser's repeated objects, copies) is equal to itself at once.
        return lhs.members.withUnsafeBufferPointer { left in
            rhs.members.withUnsafeBufferPointer { right in
                if left.baseAddress == right.baseAddress { return true }
                for index in left.indices where left[index].key != right[index].key || left[index].value != right[index].value {
                    return false
                }
                return true
            }
        }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(members.count)
        for member in members {
            hasher.combine(member.key)
            hasher.combine(member.value)
        }
    }
}
