/// A trap: a known failure mode worth its own alert, with what it means and
/// what the operator should do. Mirrors `docs/reference/traps.tsv`.
public struct Trap: Sendable, Hashable {
    public enum Severity: String, Sendable, Hashable, Comparable {
        case info, warning, error

        private var rank: Int {
            switch self {
            case .info: 0
            case .warning: 1
            case .error: 2
            }
        }

        public static func < (lhs: Severity, rhs: Severity) -> Bool { lhs.rank < rhs.rank }
    }

    public var id: TrapID
    public var severity: Severity
    /// The error types (APNs reasons or relay error codes) that hit this trap.
    public var errorTypes: [String]
    public var meaning: String
    public var operatorAction: String

    public init(id: TrapID, severity: Severity, errorTypes: [String], meaning: String, operatorAction: String) {
        self.id = id
        self.severity = severity
        self.errorTypes = errorTypes
        self.meaning = meaning
        self.operatorAction = operatorAction
    }
}

extension Trap {
    /// Every trap, in id order.
    public static let catalog: [Trap] = [
        .init(id: .invalidSnapshot, severity: .error, errorTypes: ["InvalidSnapshot"],
              meaning: "snapshot failed validation, or its kind does not fit the operation (update/start/end/broadcast need liveActivity)",
              operatorAction: "fix the producer; nothing was sent"),
        .init(id: .payloadTooLarge, severity: .error, errorTypes: ["PayloadTooLarge"],
              meaning: "payload over 4 KB (5 KB broadcast); caught before the network when possible",
              operatorAction: "producer bug: trim body/labels or split the update"),
        .init(id: .tokenEnvironmentMismatch, severity: .error, errorTypes: ["BadDeviceToken", "TokenEnvironmentMismatch"],
              meaning: "token environment does not match the build (dev-client/TestFlight vs App Store)",
              operatorAction: "route the token to the right environment; stop sending to it here"),
        .init(id: .tooManyRequests, severity: .warning, errorTypes: ["TooManyRequests"],
              meaning: "priority-10 budget exhausted or one token hammered",
              operatorAction: "move routine updates to priority 5; keep 10 for state transitions"),
        .init(id: .malformedTopic, severity: .error, errorTypes: ["TopicDisallowed", "MalformedApnsConfig"],
              meaning: "bundle id configured with the .push-type.liveactivity suffix, or key not allowed for the topic",
              operatorAction: "fix the app's bundle id in config (the suffix is added per request)"),
        .init(id: .pushToStartAfterForceQuit, severity: .info, errorTypes: [],
              meaning: "push-to-start token silent after the user force-quits the app (Apple bug FB21158660); APNs still answers 200",
              operatorAction: "support runbook: ask the user to open the app once"),
        .init(id: .deadToken, severity: .info, errorTypes: ["Unregistered", "ExpiredToken"],
              meaning: "token is dead (uninstall, rotation, activity ended)",
              operatorAction: "drop the token from the store; a rising ratio means tokens are kept too long"),
        .init(id: .activityTokenAfterEnd, severity: .info, errorTypes: [],
              meaning: "per-activity tokens must be discarded when the activity ends",
              operatorAction: "evict on ended/dismissed"),
        .init(id: .missingConfiguration, severity: .error, errorTypes: ["MissingApnsConfig"],
              meaning: "key id, team id, key path or bundle id missing at start-up",
              operatorAction: "fix configuration; the relay refuses to start the app"),
        .init(id: .providerTokenRejected, severity: .error,
              errorTypes: ["ExpiredProviderToken", "InvalidProviderToken", "Forbidden", "UnrelatedKeyIdInToken", "BadEnvironmentKeyIdInToken"],
              meaning: "provider JWT rejected: clock skew, wrong key/team id, or revoked key",
              operatorAction: "Expired: check NTP; Invalid: fix key id/team id; Forbidden: mint a new key. Alert on each separately"),
        .init(id: .badChannel, severity: .error, errorTypes: ["BadChannelId", "ChannelNotRegistered", "MissingChannelId"],
              meaning: "channel id altered, missing, or from the other environment",
              operatorAction: "pass channel ids through untouched; recreate in the right environment"),
        .init(id: .badDate, severity: .error, errorTypes: ["BadDate", "BadExpirationDate"],
              meaning: "a stale/dismissal/expiration date is not a positive unix-seconds integer (often milliseconds)",
              operatorAction: "fix the producer's timestamps"),
        .init(id: .broadcastNotEnabled, severity: .info, errorTypes: ["FeatureNotEnabled"],
              meaning: "broadcast capability not enabled on the auth key",
              operatorAction: "enable Broadcast on the key in the developer portal"),
        .init(id: .missingTopic, severity: .error, errorTypes: ["MissingTopic"],
              meaning: "apns-topic missing; bundle id unset",
              operatorAction: "fix configuration"),
    ]

    private static let byID: [TrapID: Trap] = Dictionary(uniqueKeysWithValues: catalog.map { ($0.id, $0) })
    private static let byErrorType: [String: TrapID] = {
        var map: [String: TrapID] = [:]
        for trap in catalog {
            for errorType in trap.errorTypes { map[errorType] = trap.id }
        }
        return map
    }()

    /// The trap with this id.
    public static func withID(_ id: TrapID) -> Trap? { byID[id] }

    /// The trap an error type (an APNs reason or a relay error code) maps to.
    public static func id(forErrorType errorType: String) -> TrapID? { byErrorType[errorType] }
}
