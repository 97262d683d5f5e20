public import APNs
public import RelayBasics

/// One app the relay sends for: its bundle id, its signing key, and the
/// environments it may use.
public struct AppConfiguration: Sendable {
    /// The app's name in requests, metrics and the audit (`checkout-ios`).
    public var name: String
    /// The bare bundle id; the relay appends per-push-type suffixes.
    public var bundleID: String
    public var teamID: String?
    public var keyID: String?
    /// Path of the `.p8` key.
    public var keyPath: String?
    public var environments: Set<Environment>

    public init(name: String, bundleID: String, teamID: String?, keyID: String?, keyPath: String?, environments: Set<Environment> = [.development, .production]) {
        self.name = name
        self.bundleID = bundleID
        self.teamID = teamID
        self.keyID = keyID
        self.keyPath = keyPath
        self.environments = environments
    }
}

/// What the relay does with a Live Activity push whose `timestamp` is not
/// newer than the last one sent to the same activity token: iOS drops such
/// a push silently, so the relay can refuse it, warn, or let it through.
public enum TimestampPolicy: String, Sendable, Hashable {
    case reject, warn, allow
}

/// Settings of the relay as a whole.
public struct RelayConfiguration: Sendable {
    public var apps: [AppConfiguration]
    public var retryPolicy = RetryPolicy()
    public var requestTimeout = 10.0
    public var sendDeadline = 30.0
    /// Replaces Apple's hosts per environment (tests, the demo's mock APNs).
    public var endpointOverrides: [Environment: APNsEndpoints] = [:]
    public var timestampPolicy = TimestampPolicy.reject
    /// Activity tokens remembered for the timestamp check (oldest forgotten first).
    public var timestampMemory = 100_000
    /// Seconds a Live Activity `timestamp` may lie past ``now``; later ones are refused (400).
    public var maximumTimestampLead = Preflight.defaultTimestampLead
    /// The relay's clock in unix seconds (injected by tests; the system clock otherwise).
    public var now: @Sendable () -> Int64 = { UnixTime.nowSeconds() }

    public init(apps: [AppConfiguration]) { self.apps = apps }
}
