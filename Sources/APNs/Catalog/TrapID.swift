/// A trap id (`MS0xx`): the name of a known silent-failure mode.
///
/// Alert rules, dashboards and the audit table key on these ids, so they are
/// stable strings rather than an enum: a trap added to the catalog later must
/// not break anyone decoding an older id.
public struct TrapID: RawRepresentable, Sendable, Hashable, Comparable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }

    public var description: String { rawValue }

    public static func < (lhs: TrapID, rhs: TrapID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Snapshot failed validation, or its kind does not fit the operation.
    public static let invalidSnapshot: TrapID = "MS008"
    /// Payload over the APNs size limit.
    public static let payloadTooLarge: TrapID = "MS011"
    /// Token does not belong to this environment.
    public static let tokenEnvironmentMismatch: TrapID = "MS014"
    /// Rate limited: priority-10 budget exhausted or one token hammered.
    public static let tooManyRequests: TrapID = "MS015"
    /// Bundle id carries the `.push-type.liveactivity` suffix, or the key may not use the topic.
    public static let malformedTopic: TrapID = "MS018"
    /// Push-to-start token silent after a force-quit (APNs still answers 200).
    public static let pushToStartAfterForceQuit: TrapID = "MS019"
    /// The token is dead: uninstalled, rotated, or the activity ended.
    public static let deadToken: TrapID = "MS020"
    /// Per-activity tokens must be discarded when the activity ends.
    public static let activityTokenAfterEnd: TrapID = "MS021"
    /// Key id, team id, key path or bundle id missing at start-up.
    public static let missingConfiguration: TrapID = "MS028"
    /// Provider JWT rejected.
    public static let providerTokenRejected: TrapID = "MS030"
    /// Channel id altered, missing, or from the other environment.
    public static let badChannel: TrapID = "MS031"
    /// A date is not a positive unix-seconds integer.
    public static let badDate: TrapID = "MS032"
    /// Broadcast capability not enabled on the key.
    public static let broadcastNotEnabled: TrapID = "MS034"
    /// `apns-topic` missing.
    public static let missingTopic: TrapID = "MS035"
}
