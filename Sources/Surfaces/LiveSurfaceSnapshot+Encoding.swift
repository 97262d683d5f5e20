public import RelayJSON

extension LiveSurfaceSnapshot {
    /// The snapshot as contract JSON (no `$schema` annotation); parsing the
    /// result gives back an equal snapshot.
    public func encodeJSON() -> JSONValue {
        var object = JSONObject()
        object["schemaVersion"] = .string(Self.schemaVersion)
        object["kind"] = .string(kind.rawValue)
        object["id"] = .string(id)
        object["surfaceId"] = .string(surfaceID)
        object["updatedAt"] = .string(updatedAt)
        object["state"] = .string(state.rawValue)
        object[kind.rawValue] = .object(sliceJSON())
        return .object(object)
    }

    private func sliceJSON() -> JSONObject {
        var object = JSONObject()
        func set(_ key: String, _ value: String?) { if let value { object[key] = .string(value) } }
        func set(_ key: String, _ value: Double?) { if let value { object[key] = Self.number(value) } }
        func set(_ key: String, _ value: Int64?) { if let value { object[key] = .integer(value) } }
        func set(_ key: String, _ value: Bool?) { if let value { object[key] = .bool(value) } }

        switch slice {
        case .liveActivity(let s):
            set("title", s.title); set("body", s.body); set("progress", s.progress); set("deepLink", s.deepLink)
            set("modeLabel", s.modeLabel); set("contextLabel", s.contextLabel); set("statusLine", s.statusLine)
            set("actionLabel", s.actionLabel); set("stage", s.stage.rawValue)
            set("estimatedSeconds", s.estimatedSeconds); set("morePartsCount", s.morePartsCount)
        case .widget(let s):
            set("title", s.title); set("body", s.body); set("progress", s.progress); set("deepLink", s.deepLink)
            set("family", s.family?.rawValue); set("reloadPolicy", s.reloadPolicy?.rawValue)
        case .control(let s):
            set("label", s.label); set("deepLink", s.deepLink); set("controlKind", s.controlKind.rawValue)
            set("state", s.state); set("intent", s.intent)
        case .notification(let s):
            set("title", s.title); set("subtitle", s.subtitle); set("body", s.body); set("deepLink", s.deepLink)
            set("category", s.category); set("threadId", s.threadID)
            set("interruptionLevel", s.interruptionLevel?.rawValue); set("relevanceScore", s.relevanceScore)
            set("targetContentId", s.targetContentID)
        case .lockAccessory(let s):
            set("title", s.title); set("deepLink", s.deepLink); set("family", s.family.rawValue)
            set("gaugeValue", s.gaugeValue); set("shortText", s.shortText)
        case .standby(let s):
            set("title", s.title); set("body", s.body); set("progress", s.progress); set("deepLink", s.deepLink)
            set("presentation", s.presentation.rawValue); set("tint", s.tint?.rawValue)
        }
        return object
    }

    /// Whole numbers encode as integers (`1`, not `1.0`), as producers write them.
    static func number(_ value: Double) -> JSONValue {
        value.rounded(.towardZero) == value && abs(value) < 9_007_199_254_740_992 ? .integer(Int64(value)) : .double(value)
    }
}
