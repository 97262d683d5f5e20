/// What a send does. The raw value is the label metrics, traces and the audit
/// table use, so it never changes once shipped.
public enum Operation: String, Sendable, Hashable, CaseIterable, Codable {
    /// Alert from a Live Activity snapshot (the fallback for users without the activity).
    case alert
    /// Alert from a notification snapshot.
    case notification
    /// Silent `content-available` push.
    case background
    /// Live Activity remote start (push-to-start token).
    case start
    /// Live Activity content update (per-activity token).
    case update
    /// Live Activity end (per-activity token).
    case end
    /// WidgetKit reload (iOS 26, push type `widgets`) for a `widget`,
    /// `standby`, `lockAccessory` or `control` snapshot.
    case widget
    /// iOS 18 channel broadcast.
    case broadcast
    case channelCreate = "channel_create"
    case channelList = "channel_list"
    /// APNs' read channel: one channel's storage policy and push type.
    case channelRead = "channel_read"
    case channelDelete = "channel_delete"
    /// The caller's own payload and headers.
    case raw
}

/// The HTTP methods APNs uses.
public enum HTTPMethod: String, Sendable, Hashable, Codable {
    case GET, POST, DELETE
}
