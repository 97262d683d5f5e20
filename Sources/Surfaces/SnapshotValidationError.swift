public import RelayJSON

/// A snapshot broke the contract. Lists every problem, each with the JSON path
/// of the offending value, the schema rule, and a sentence naming both.
///
/// Maps to trap MS008: the producer must be fixed, and nothing was sent.
public struct SnapshotValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// One broken rule.
    public struct Issue: Sendable, Hashable, CustomStringConvertible {
        /// Where the offending value is (or, for `required`, would be).
        public var path: JSONPath
        /// The JSON Schema keyword: `required`, `type`, `minLength`, `maxLength`,
        /// `minimum`, `maximum`, `enum`, `const`, `pattern`, `format`,
        /// `additionalProperties`, or `kind` for a projection on the wrong kind.
        public var rule: String
        /// A sentence naming the path and the rule, for logs and error bodies.
        public var message: String

        /// The message.
        public var description: String { message }
    }

    /// Stable code for the audit and error bodies.
    public static let code = "InvalidSnapshot"
    /// The trap this error hits.
    public static let trapID = "MS008"

    /// Every problem found, one per broken rule and location.
    public var issues: [Issue]

    /// An error listing `issues`.
    public init(issues: [Issue]) { self.issues = issues }

    /// A count of problems followed by each message.
    public var description: String {
        "invalid snapshot (\(issues.count) problem\(issues.count == 1 ? "" : "s")): "
            + issues.map(\.message).joined(separator: "; ")
    }
}

/// Why bytes are not a snapshot before the contract is even checked.
extension SnapshotValidationError {
    static func notJSON(_ error: JSONParseError) -> SnapshotValidationError {
        SnapshotValidationError(issues: [Issue(path: .root, rule: "json", message: "snapshot is not valid JSON: \(error)")])
    }
}
