public import Foundation

/// A LiveSurfaceSnapshot (contract version 5): one surface's state at one
/// moment, with the slice for its kind.
///
/// Build one with ``init(parsing:)`` or ``init(json:)``, which validate
/// exactly as the contract's JSON Schema does and report every problem at
/// once; there is no unchecked initializer from untrusted input.
public struct LiveSurfaceSnapshot: Sendable, Hashable {
    /// The only wire-format generation this relay understands.
    public static let schemaVersion = "5"

    /// The kind-specific payload.
    public enum Slice: Sendable, Hashable {
        case liveActivity(LiveActivitySlice)
        case widget(WidgetSlice)
        case control(ControlSlice)
        case lockAccessory(LockAccessorySlice)
        case standby(StandbySlice)
        case notification(NotificationSlice)

        /// The kind this slice belongs to.
        public var kind: SurfaceKind {
            switch self {
            case .liveActivity: .liveActivity
            case .widget: .widget
            case .control: .control
            case .lockAccessory: .lockAccessory
            case .standby: .standby
            case .notification: .notification
            }
        }
    }

    /// Stable per logical state: the same state produced twice has the same id.
    public var id: String
    /// Which surface this snapshot updates.
    public var surfaceID: String
    /// RFC 3339, as the producer wrote it.
    public var updatedAt: String
    /// `updatedAt` as unix seconds (fraction kept), for ordering.
    public var updatedAtSeconds: Double
    /// Lifecycle state; `attention` is what warrants a high-priority push.
    public var state: SurfaceState
    /// The slice for ``kind``; a snapshot carries exactly one.
    public var slice: Slice

    /// The discriminator, derived from the slice so the two cannot disagree.
    public var kind: SurfaceKind { slice.kind }

    /// `updatedAt` as an instant, for comparing with clocks and other dates.
    public var updatedAtDate: Date { Date(timeIntervalSince1970: updatedAtSeconds) }

    /// The Live Activity slice, when this is a `liveActivity` snapshot.
    public var liveActivity: LiveActivitySlice? {
        if case .liveActivity(let slice) = slice { return slice }
        return nil
    }

    /// The notification slice, when this is a `notification` snapshot.
    public var notification: NotificationSlice? {
        if case .notification(let slice) = slice { return slice }
        return nil
    }
}
