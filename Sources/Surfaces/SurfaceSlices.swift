/// Lifecycle state shared by every kind.
public enum SurfaceState: String, Sendable, Hashable, CaseIterable {
    case queued, active, paused, attention
    case badTiming = "bad_timing"
    case completed
}

/// The Live Activity slice: what the Lock Screen and Dynamic Island render.
public struct LiveActivitySlice: Sendable, Hashable {
    /// Where the activity is; ActivityKit uses it for the compact layout and the dismissal grace.
    public enum Stage: String, Sendable, Hashable, CaseIterable { case prompted, inProgress, completing }

    /// Headline on the Lock Screen and in the Dynamic Island; never empty.
    public var title: String
    /// The secondary line; may be empty.
    public var body: String
    /// 0…1.
    public var progress: Double
    /// Opened on tap; always starts with a lowercase `scheme://`.
    public var deepLink: String
    /// Short mode name; also the default remote-start attribute.
    public var modeLabel: String
    /// Optional context next to the mode.
    public var contextLabel: String?
    /// Optional one-line status.
    public var statusLine: String?
    /// Optional call to action; never empty when present.
    public var actionLabel: String?
    /// The content-state stage.
    public var stage: Stage
    /// Optional remaining-time hint, 0…2^53 − 1.
    public var estimatedSeconds: Int64?
    /// Optional count of queued follow-up parts, 0…2^53 − 1.
    public var morePartsCount: Int64?
}

/// The home-screen widget slice.
public struct WidgetSlice: Sendable, Hashable {
    /// The home-screen widget size the entry targets.
    public enum Family: String, Sendable, Hashable, CaseIterable { case systemSmall, systemMedium, systemLarge }
    /// How WidgetKit should schedule the next reload.
    public enum ReloadPolicy: String, Sendable, Hashable, CaseIterable { case manual, afterDate }

    /// Widget headline; never empty.
    public var title: String
    /// The secondary line; may be empty.
    public var body: String
    /// 0…1.
    public var progress: Double
    /// Opened on tap; always starts with a lowercase `scheme://`.
    public var deepLink: String
    /// Optional; absent lets the widget choose.
    public var family: Family?
    /// Optional reload hint.
    public var reloadPolicy: ReloadPolicy?
}

/// The Control Center tile slice.
public struct ControlSlice: Sendable, Hashable {
    /// What the control does when pressed.
    public enum Kind: String, Sendable, Hashable, CaseIterable { case toggle, button, deepLink }

    /// Tile label; never empty.
    public var label: String
    /// Opened on tap; always starts with a lowercase `scheme://`.
    public var deepLink: String
    /// Toggle, button or deep link.
    public var controlKind: Kind
    /// Toggle value, for `toggle` controls.
    public var state: Bool?
    /// Optional App Intent identifier the control runs.
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

    /// `aps.alert.title`; never empty.
    public var title: String
    /// `aps.alert.subtitle`; never empty when present, so it cannot vanish on the wire.
    public var subtitle: String?
    /// `aps.alert.body`; may be empty.
    public var body: String
    /// Opened on tap; always starts with a lowercase `scheme://`.
    public var deepLink: String
    /// The only category the contract defines is `surface-update`.
    public var category: String?
    /// `aps.thread-id` for grouping; never empty when present.
    public var threadID: String?
    /// Optional; absent means the system default (active).
    public var interruptionLevel: InterruptionLevel?
    /// 0…1.
    public var relevanceScore: Double?
    /// `aps.target-content-id`, the scene to open; never empty when present.
    public var targetContentID: String?
}

/// The Lock Screen accessory slice.
public struct LockAccessorySlice: Sendable, Hashable {
    /// The Lock Screen accessory family.
    public enum Family: String, Sendable, Hashable, CaseIterable { case accessoryCircular, accessoryRectangular, accessoryInline }

    /// Accessory headline (circular accessories ignore it); never empty.
    public var title: String
    /// Opened on tap; always starts with a lowercase `scheme://`.
    public var deepLink: String
    /// Which accessory renders it.
    public var family: Family
    /// Optional gauge fill, 0…1; absent means no gauge.
    public var gaugeValue: Double?
    /// At most 20 characters.
    public var shortText: String?
}

/// The StandBy slice.
public struct StandbySlice: Sendable, Hashable {
    /// Full colour (`card`) or the red-shifted night mode.
    public enum Presentation: String, Sendable, Hashable, CaseIterable { case card, night }
    /// Colour treatment; `monochrome` forces white on black.
    public enum Tint: String, Sendable, Hashable, CaseIterable { case `default`, monochrome }

    /// StandBy headline; never empty.
    public var title: String
    /// The secondary line; may be empty.
    public var body: String
    /// 0…1.
    public var progress: Double
    /// Opened on tap; always starts with a lowercase `scheme://`.
    public var deepLink: String
    /// Card or night.
    public var presentation: Presentation
    /// Optional colour hint.
    public var tint: Tint?
}
