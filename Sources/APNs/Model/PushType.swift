/// The `apns-push-type` header: what kind of push a request carries.
///
/// APNs checks the push type against the topic and the payload, so each type
/// also fixes the topic suffix and the default priority.
public enum PushType: String, Sendable, Hashable, CaseIterable, Codable {
    case alert
    case background
    case location
    case voip
    case complication
    case fileprovider
    case mdm
    case liveactivity
    case pushtotalk
    case widgets

    /// What APNs expects after the bundle id in `apns-topic` for this type.
    /// MDM topics come from the MDM enrolment profile and are used as given.
    public var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: ""
        case .location: ".location-query"
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .liveactivity: ".push-type.liveactivity"
        case .pushtotalk: ".voip-ptt"
        case .widgets: ".push-type.widgets"
        }
    }

    /// The topic for `bundleID` with this type's suffix.
    public func topic(forBundleID bundleID: String) -> String { bundleID + topicSuffix }

    /// The priority used when the caller names none: alerts and calls are
    /// immediate; background and Live Activity pushes conserve power (Apple
    /// throttles priority-10 budgets for them). nil for widget reloads: Apple's
    /// documented request carries no `apns-priority` (WidgetKit budgets the
    /// reloads on the device whatever the priority), so the relay sends none
    /// and APNs applies its own default.
    public var defaultPriority: Priority? {
        switch self {
        case .alert, .voip, .location, .complication, .mdm, .pushtotalk: .immediate
        case .background, .liveactivity, .fileprovider: .conservePower
        case .widgets: nil
        }
    }

    /// The largest payload APNs accepts for this type on a device send.
    public var maximumPayloadBytes: Int {
        self == .voip ? PayloadLimit.extended : PayloadLimit.standard
    }
}

/// APNs payload size limits, in bytes of the encoded JSON body.
public enum PayloadLimit {
    /// Every device send except VoIP.
    public static let standard = 4096
    /// VoIP pushes and broadcasts.
    public static let extended = 5120
}
