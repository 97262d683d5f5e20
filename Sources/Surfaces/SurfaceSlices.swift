/// Lifecycle state shared by every kind.
public enum SurfaceState: String, Sendable, Hashable, CaseIterable {
    case queued, active, paused, attention
    case badTiming = "bad_timing"
    case completed
}

/// The Live Activity slice: what the Lock Screen and Dynamic Island render.
public struct LiveActivitySlice: Sendable, Hashable {
    public enum Stage: String, Sendable, Hashable, CaseIterable { case prompted, inProgress, completing }

    public var title: String
    public var body: String
    /// 0…1.
    public var progress: Double
    public var deepLink: String
    public var modeLabel: String
    public var contextLabel: String?
    public var statusLine: String?
    public var actionLabel: String?
    public var stage: Stage
    public var estimatedSeconds: Int64?
    public var morePartsCount: Int64?
}

/// The home-screen widget slice.
public struct WidgetSlice: Sendable, Hashable {
    public enum Family: String, Sendable, Hashable, CaseIterable { case systemSmall, systemMedium, systemLarge }
    public enum ReloadPolicy: String, Sendable, Hashable, CaseIterable { case manual, afterDate }

    public var title: String
    public var body: String
    public var progress: Double
    public var deepLink: String
    public var family: Family?
    public var reloadPolicy: ReloadPolicy?
}

/// The Control Center tile slice.
public struct ControlSlice: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable { case toggle, button, deepLink }

    public var label: String
    public var deepLink: String
    public var controlKind: Kind
    /// Toggle value, for `toggle` controls.
    public var state: Bool?
    public var intent: String?
}

/// The notification slice.
public struct NotificationSlice: Sendable, Hashable {
    /// Spelled as the contract spells it; ``wireValue`` is Apple's spelling.
    public enum InterruptionLevel: String, Sendable, Hashable, CaseIterable {
        case passive, active, timeSensitive, critical

        /// The `aps.interruption-level` value APNs expects.
        public var wireValue: String {
            switch self {
            case .passive: "passive"
            case .active: "active"
            case .timeSensitive: "time-sensitive"
            case .critical: "critical"
            }
        }
    }

    public var title: String
    public var subtitle: String?
    public var body: String
    public var deepLink: String
    /// The only category the contract defines is `surface-update`.
    public var category: String?
    public var threadID: String?
    public var interruptionLevel: InterruptionLevel?
    /// 0…1.
    public var relevanceScore: Double?
    public var targetContentID: String?
}

/// The Lock Screen accessory slice.
public struct LockAccessorySlice: Sendable, Hashable {
    public enum Family: String, Sendable, Hashable, CaseIterable { case accessoryCircular, accessoryRectangular, accessoryInline }

    public var title: String
    public var deepLink: String
    public var family: Family
    public var gaugeValue: Double?
    /// At most 20 characters.
    public var shortText: String?
}

/// The StandBy slice.
public struct StandbySlice: Sendable, Hashable {
    public enum Presentation: String, Sendable, Hashable, CaseIterable { case card, night }
    public enum Tint: String, Sendable, Hashable, CaseIterable { case `default`, monochrome }

    public var title: String
    public var body: String
    public var progress: Double
    public var deepLink: String
    public var presentation: Presentation
    public var tint: Tint?
}
