public import RelayJSON

/// Projections from a snapshot to what APNs and ActivityKit consume. Each is
/// gated on kind: projecting the wrong kind is an MS008 error, never a guess.
///
/// The wire shapes are those of the Mobile Surfaces SDK's helpers
/// (`toLiveActivityContentState`, `toApnsAlertPayload`,
/// `toNotificationContentPayload`, and `start`'s default attributes), so an
/// app built against that SDK decodes what the relay sends. Absent optionals
/// are left out, never written as `null`.
extension LiveSurfaceSnapshot {
    /// Throws unless the snapshot's kind is one of `allowed`, naming the operation.
    public func requireKind(_ allowed: Set<SurfaceKind>, for operation: String) throws(SnapshotValidationError) {
        guard !allowed.contains(kind) else { return }
        let names = allowed.map(\.rawValue).sorted().joined(separator: " or ")
        throw SnapshotValidationError(issues: [.init(
            path: JSONPath.root.appending("kind"), rule: "kind",
            message: "$.kind is \"\(kind.rawValue)\" but \(operation) needs a \(names) snapshot")])
    }

    /// The ActivityKit content-state: `{headline, subhead, progress, stage}`.
    ///
    /// These are the keys a widget's `Codable` ContentState decodes
    /// (`headline`/`subhead` strings, `progress` a number in 0…1, `stage` one
    /// of `prompted`, `inProgress`, `completing`); the slice's other fields
    /// are for the app and the alert, not the activity's content.
    public func liveActivityContentState() throws(SnapshotValidationError) -> JSONValue {
        try requireKind([.liveActivity], for: "a Live Activity content state")
        let slice = liveActivity!
        return [
            "headline": .string(slice.title),
            "subhead": .string(slice.body),
            "progress": Self.number(slice.progress),
            "stage": .string(slice.stage.rawValue),
        ]
    }

    /// The static attributes a remote start needs by default: `{surfaceId, modeLabel}`,
    /// what the SDK's `MobileSurfacesActivityAttributes` carries.
    public func liveActivityAttributes() throws(SnapshotValidationError) -> JSONValue {
        try requireKind([.liveActivity], for: "Live Activity attributes")
        return ["surfaceId": .string(surfaceID), "modeLabel": .string(liveActivity!.modeLabel)]
    }

    /// An alert push from a Live Activity snapshot, for users without the
    /// activity: `aps.alert` title and body, the default sound, and a
    /// `liveSurface` sidecar (`kind: surface_snapshot`) the app can route on.
    public func alertPayload() throws(SnapshotValidationError) -> JSONValue {
        try requireKind([.liveActivity], for: "an alert")
        let slice = liveActivity!
        return [
            "aps": ["alert": ["title": .string(slice.title), "body": .string(slice.body)], "sound": "default"],
            "liveSurface": sidecar(kind: "surface_snapshot", deepLink: slice.deepLink),
        ]
    }

    /// A notification push from a notification snapshot: `aps.alert` (title,
    /// subtitle when set, body), sound, category, `thread-id`,
    /// `interruption-level`, `relevance-score`, `target-content-id`, and a
    /// `liveSurface` sidecar (`kind: surface_notification`).
    ///
    /// `interruption-level` is written as APNs spells it (`time-sensitive`);
    /// the contract's `timeSensitive` is not a value APNs knows, so passing it
    /// through would silently deliver at the default level. The sidecar
    /// follows the SDK's documented wire shape; later SDK sources also write
    /// `schemaVersion: "5"` in the envelope and the sidecar and discriminate
    /// the sidecar as `surface_snapshot`, which the relay does not copy.
    public func notificationPayload() throws(SnapshotValidationError) -> JSONValue {
        try requireKind([.notification], for: "a notification")
        let slice = notification!
        var alert = JSONObject()
        alert["title"] = .string(slice.title)
        if let subtitle = slice.subtitle { alert["subtitle"] = .string(subtitle) }
        alert["body"] = .string(slice.body)
        var aps = JSONObject()
        aps["alert"] = .object(alert)
        aps["sound"] = "default"
        if let category = slice.category { aps["category"] = .string(category) }
        if let thread = slice.threadID { aps["thread-id"] = .string(thread) }
        if let level = slice.interruptionLevel { aps["interruption-level"] = .string(level.wireValue) }
        if let score = slice.relevanceScore { aps["relevance-score"] = Self.number(score) }
        if let target = slice.targetContentID { aps["target-content-id"] = .string(target) }
        return ["aps": .object(aps), "liveSurface": sidecar(kind: "surface_notification", deepLink: slice.deepLink)]
    }

    /// The kinds WidgetKit renders, each reloaded by a `widgets` push: the
    /// home-screen widget, the StandBy card, the Lock Screen accessory and the
    /// Control Center control are all WidgetKit extensions on the device.
    public static let widgetKitKinds: Set<SurfaceKind> = [.widget, .standby, .lockAccessory, .control]

    /// The sidecar of a WidgetKit reload, beside `aps: {"content-changed": true}`:
    /// `liveSurface: {kind: surface_reload, surfaceKind, snapshotId, surfaceId,
    /// state, updatedAt}`.
    ///
    /// The reload carries no content: WidgetKit asks the widget extension for
    /// a new timeline, which reads the app's own store. The sidecar only names
    /// which snapshot the reload was for, for the app's bookkeeping and the
    /// relay's `describe`; `updatedAt` lets a reader order reloads, which APNs
    /// does not. No slice field rides along, so the payload stays small
    /// (its size is the identifiers' size) and no display text leaves the
    /// backend twice.
    public func widgetReloadSidecar() throws(SnapshotValidationError) -> JSONObject {
        try requireKind(Self.widgetKitKinds, for: "a widget reload")
        var object = JSONObject()
        object["liveSurface"] = [
            "kind": "surface_reload", "surfaceKind": .string(kind.rawValue), "snapshotId": .string(id),
            "surfaceId": .string(surfaceID), "state": .string(state.rawValue), "updatedAt": .string(updatedAt),
        ]
        return object
    }

    private func sidecar(kind: String, deepLink: String) -> JSONValue {
        [
            "kind": .string(kind), "snapshotId": .string(id), "surfaceId": .string(surfaceID),
            "state": .string(state.rawValue), "deepLink": .string(deepLink),
        ]
    }
}
