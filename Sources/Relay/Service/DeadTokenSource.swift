public import APNs

/// A token APNs rejected for good, as the dead-token store reports it.
public struct DeadTokenEntry: Sendable, Hashable {
    public var token: String
    public var environment: String
    public var reason: String
    /// When APNs said the token stopped being valid (410 `timestamp`), unix ms.
    public var apnsTimestampMilliseconds: Int64?
    /// First and last time the relay saw APNs reject it, unix ms.
    public var firstSeenMilliseconds: Int64
    public var lastSeenMilliseconds: Int64

    public init(token: String, environment: String, reason: String, apnsTimestampMilliseconds: Int64?, firstSeenMilliseconds: Int64, lastSeenMilliseconds: Int64) {
        self.token = token
        self.environment = environment
        self.reason = reason
        self.apnsTimestampMilliseconds = apnsTimestampMilliseconds
        self.firstSeenMilliseconds = firstSeenMilliseconds
        self.lastSeenMilliseconds = lastSeenMilliseconds
    }
}

/// Where the ingress reads the dead-token feed from. Declared here so the
/// ingress does not import the audit module; the executable wires it to
/// the Postgres audit store.
public protocol DeadTokenSource: Sendable {
    /// Dead tokens of `app` last seen at or after `since` (unix ms), newest first.
    func deadTokens(app: String, environment: Environment?, sinceMilliseconds: Int64, limit: Int) async throws -> [DeadTokenEntry]
}
