public import RelayJSON
import RelayBasics

extension LiveSurfaceSnapshot {
    /// The top-level fields every kind carries.
    static let baseKeys: Set<String> = ["schemaVersion", "id", "surfaceId", "kind", "updatedAt", "state"]

    // Made once rather than on every snapshot: the top level's allowed keys
    // (see `init(json:)`), each slice's (see `readSlice`), the enum spellings.
    // The key lists are sorted, as an unknown key's message lists them, and
    // found by a switch on the kind rather than hashed.
    private static func topLevelKeys(_ kind: SurfaceKind) -> [String] {
        switch kind {
        case .liveActivity: TopLevelKeys.liveActivity
        case .widget: TopLevelKeys.widget
        case .control: TopLevelKeys.control
        case .lockAccessory: TopLevelKeys.lockAccessory
        case .standby: TopLevelKeys.standby
        case .notification: TopLevelKeys.notification
        }
    }
    private static let topLevelKeysOfAnyKind = baseKeys.union(["$schema"]).union(SurfaceKind.allCases.map(\.rawValue)).sorted()

    /// Parses and validates a snapshot from JSON bytes.
    public init(parsing bytes: some Collection<UInt8>) throws(SnapshotValidationError) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            throw .notJSON(error)
        }
        try self.init(json: value)
    }

    /// Validates a parsed JSON value against the contract. Every problem is
    /// reported, each at its path; nothing is guessed or defaulted.
    public init(json: JSONValue) throws(SnapshotValidationError) {
        var reader = SnapshotReader()
        guard let root = json.objectValue else {
            throw SnapshotValidationError(issues: [.init(path: .root, rule: "type", message: "$ must be a JSON object (got \(json.typeName))")])
        }
        let path = JSONPath.root

        let kind = reader.enumValue(SurfaceKind.self, root, "kind", at: path, required: true)
        // Every reference fixture carries a "$schema" annotation for editors;
        // the JSON Schema's additionalProperties would reject it, so the
        // relay accepts it at the top level only (and ignores it).
        let allowed = kind.map(Self.topLevelKeys) ?? Self.topLevelKeysOfAnyKind
        reader.rejectUnknownKeys(root, allowed: allowed, at: path)
        _ = reader.string(root, "$schema", at: path, required: false)

        if let version = reader.string(root, "schemaVersion", at: path, required: true), version != Self.schemaVersion {
            reader.fail(path.appending("schemaVersion"), "const", "must be \"5\" (got \"\(version)\"); migrate the producer to contract v5")
        }
        let id = reader.string(root, "id", at: path, required: true, minLength: 1)
        let surfaceID = reader.string(root, "surfaceId", at: path, required: true, minLength: 1)
        let state = reader.enumValue(SurfaceState.self, root, "state", at: path, required: true)
        var updatedSeconds: Double?
        let updatedAt = reader.string(root, "updatedAt", at: path, required: true)
        if let updatedAt {
            updatedSeconds = RFC3339.parse(updatedAt)
            if updatedSeconds == nil {
                reader.fail(path.appending("updatedAt"), "format", "must be an RFC 3339 date-time like 2026-05-12T18:30:00Z (got \"\(updatedAt)\")")
            }
        }

        var slice: Slice?
        if let kind, let object = reader.object(root, kind.rawValue, at: path) {
            slice = Self.readSlice(kind, object, at: path.appending(kind.rawValue), &reader)
        }

        guard reader.issues.isEmpty, let id, let surfaceID, let updatedAt, let updatedSeconds,
              let state, let slice
        else { throw SnapshotValidationError(issues: reader.issues) }
        self.init(id: id, surfaceID: surfaceID, updatedAt: updatedAt, updatedAtSeconds: updatedSeconds, state: state, slice: slice)
    }

    private static func readSlice(_ kind: SurfaceKind, _ object: JSONObject, at path: JSONPath, _ reader: inout SnapshotReader) -> Slice? {
        func keys(_ names: [String]) { reader.rejectUnknownKeys(object, allowed: names, at: path) }
        func enumValue<E: RawRepresentable & CaseIterable>(_ type: E.Type, _ key: String, required: Bool) -> E? where E.RawValue == String {
            reader.enumValue(type, object, key, at: path, required: required)
        }
        let unit = 0.0...1.0
        let issuesBefore = reader.issues.count

        switch kind {
        case .liveActivity:
            keys(SliceKeys.liveActivity)
            let slice = LiveActivitySlice(
                title: reader.string(object, "title", at: path, required: true, minLength: 1) ?? "",
                body: reader.string(object, "body", at: path, required: true) ?? "",
                progress: reader.number(object, "progress", at: path, required: true, range: unit) ?? 0,
                deepLink: reader.deepLink(object, at: path) ?? "",
                modeLabel: reader.string(object, "modeLabel", at: path, required: true, minLength: 1) ?? "",
                contextLabel: reader.string(object, "contextLabel", at: path, required: false),
                statusLine: reader.string(object, "statusLine", at: path, required: false),
                actionLabel: reader.string(object, "actionLabel", at: path, required: false, minLength: 1),
                stage: enumValue(LiveActivitySlice.Stage.self, "stage", required: true) ?? .prompted,
                estimatedSeconds: reader.integer(object, "estimatedSeconds", at: path, required: false),
                morePartsCount: reader.integer(object, "morePartsCount", at: path, required: false))
            return reader.issues.count == issuesBefore ? .liveActivity(slice) : nil
        case .widget:
            keys(SliceKeys.widget)
            let slice = WidgetSlice(
                title: reader.string(object, "title", at: path, required: true, minLength: 1) ?? "",
                body: reader.string(object, "body", at: path, required: true) ?? "",
                progress: reader.number(object, "progress", at: path, required: true, range: unit) ?? 0,
                deepLink: reader.deepLink(object, at: path) ?? "",
                family: enumValue(WidgetSlice.Family.self, "family", required: false),
                reloadPolicy: enumValue(WidgetSlice.ReloadPolicy.self, "reloadPolicy", required: false))
            return reader.issues.count == issuesBefore ? .widget(slice) : nil
        case .control:
            keys(SliceKeys.control)
            let slice = ControlSlice(
                label: reader.string(object, "label", at: path, required: true, minLength: 1) ?? "",
                deepLink: reader.deepLink(object, at: path) ?? "",
                controlKind: enumValue(ControlSlice.Kind.self, "controlKind", required: true) ?? .button,
                state: reader.bool(object, "state", at: path, required: false),
                intent: reader.string(object, "intent", at: path, required: false))
            return reader.issues.count == issuesBefore ? .control(slice) : nil
        case .notification:
            keys(SliceKeys.notification)
            let slice = NotificationSlice(
                title: reader.string(object, "title", at: path, required: true, minLength: 1) ?? "",
                subtitle: reader.string(object, "subtitle", at: path, required: false, minLength: 1),
                body: reader.string(object, "body", at: path, required: true) ?? "",
                deepLink: reader.deepLink(object, at: path) ?? "",
                category: reader.string(object, "category", at: path, required: false, allowed: ["surface-update"]),
                threadID: reader.string(object, "threadId", at: path, required: false, minLength: 1),
                interruptionLevel: enumValue(NotificationSlice.InterruptionLevel.self, "interruptionLevel", required: false),
                relevanceScore: reader.number(object, "relevanceScore", at: path, required: false, range: unit),
                targetContentID: reader.string(object, "targetContentId", at: path, required: false, minLength: 1))
            return reader.issues.count == issuesBefore ? .notification(slice) : nil
        case .lockAccessory:
            keys(SliceKeys.lockAccessory)
            let slice = LockAccessorySlice(
                title: reader.string(object, "title", at: path, required: true, minLength: 1) ?? "",
                deepLink: reader.deepLink(object, at: path) ?? "",
                family: enumValue(LockAccessorySlice.Family.self, "family", required: true) ?? .accessoryInline,
                gaugeValue: reader.number(object, "gaugeValue", at: path, required: false, range: unit),
                shortText: reader.string(object, "shortText", at: path, required: false, maxLength: 20))
            return reader.issues.count == issuesBefore ? .lockAccessory(slice) : nil
        case .standby:
            keys(SliceKeys.standby)
            let slice = StandbySlice(
                title: reader.string(object, "title", at: path, required: true, minLength: 1) ?? "",
                body: reader.string(object, "body", at: path, required: true) ?? "",
                progress: reader.number(object, "progress", at: path, required: true, range: unit) ?? 0,
                deepLink: reader.deepLink(object, at: path) ?? "",
                presentation: enumValue(StandbySlice.Presentation.self, "presentation", required: true) ?? .card,
                tint: enumValue(StandbySlice.Tint.self, "tint", required: false))
            return reader.issues.count == issuesBefore ? .standby(slice) : nil
        }
    }
}

/// The top level's member names for each kind's snapshot, sorted.
private enum TopLevelKeys {
    static func keys(_ kind: SurfaceKind) -> [String] { LiveSurfaceSnapshot.baseKeys.union(["$schema", kind.rawValue]).sorted() }
    static let liveActivity = keys(.liveActivity)
    static let widget = keys(.widget)
    static let control = keys(.control)
    static let lockAccessory = keys(.lockAccessory)
    static let standby = keys(.standby)
    static let notification = keys(.notification)
}

/// Each slice's member names, the lists `readSlice` checks a slice against
/// (sorted, as an unknown member's message lists them).
private enum SliceKeys {
    static let liveActivity: [String] = ["title", "body", "progress", "deepLink", "modeLabel", "contextLabel", "statusLine", "actionLabel", "stage", "estimatedSeconds", "morePartsCount"].sorted()
    static let widget: [String] = ["title", "body", "progress", "deepLink", "family", "reloadPolicy"].sorted()
    static let control: [String] = ["label", "deepLink", "controlKind", "state", "intent"].sorted()
    static let notification: [String] = ["title", "subtitle", "body", "deepLink", "category", "threadId", "interruptionLevel", "relevanceScore", "targetContentId"].sorted()
    static let lockAccessory: [String] = ["title", "deepLink", "family", "gaugeValue", "shortText"].sorted()
    static let standby: [String] = ["title", "body", "progress", "deepLink", "presentation", "tint"].sorted()
}
