/// The six kinds of LiveSurfaceSnapshot v5. The kind selects which slice a
/// snapshot carries and which projections apply to it.
public enum SurfaceKind: String, Sendable, Hashable, CaseIterable {
    case liveActivity
    case widget
    case control
    case lockAccessory
    case standby
    case notification
}
