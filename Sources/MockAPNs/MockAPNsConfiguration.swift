public import ProviderTokens

/// How a mock APNs behaves: which keys and apps it knows, which environment
/// it plays, and which faults it injects.
public struct MockAPNsConfiguration: Sendable {
    /// `development` or `production`; channels exist in one environment only.
    public var environment: String = "development"
    /// Provider keys whose JWTs it accepts.
    public var keys: [ProviderTokenVerifier.RegisteredKey] = []
    /// Bundle ids the keys may push to; empty accepts any.
    public var bundleIDs: Set<String> = []
    /// Whether the keys have the Broadcast capability (FeatureNotEnabled otherwise).
    public var broadcastEnabled = true
    /// Per-bundle channel limit (CannotCreateChannelConfig past it).
    public var maximumChannels = 10_000
    /// Scripted behaviours, first match wins.
    public var rules: [MockRule] = []
    /// Delay before every answer.
    public var responseDelay: MockDelay = .none
    /// After this many streams on one connection, GOAWAY (graceful or abrupt).
    public var goAwayAfterStreams: (count: Int, graceful: Bool)?
    /// SETTINGS_MAX_CONCURRENT_STREAMS advertised to clients.
    public var maxConcurrentStreams = 1000
    /// Requests kept in the log (oldest dropped first).
    public var logCapacity = 100_000
    /// Called with every request as it is logged, before any delay: lets a
    /// process outside the tests (scripts/fuzz, through `mock-apns
    /// --request-log`) count what reached APNs per apns-id or payload.
    public var requestObserver: (@Sendable (MockAPNsLog.Entry) -> Void)?

    public init() {}
}

/// The verifier lives in ProviderTokens (the HTTP/2 APNs ingress checks
/// tokens with it too); named here so the mock's users need no second import.
public typealias ProviderTokenVerifier = ProviderTokens.ProviderTokenVerifier
