public import RelayJSON

/// The `aps` fields of a Live Activity push, before they are checked and laid out.
public struct LiveActivityContent: Sendable, Hashable {
    /// ActivityKit's ContentState, as the widget's `Codable` type decodes it.
    public var contentState: JSONValue?
    /// Event time in unix seconds; must grow with every push to one activity
    /// (iOS silently drops a push whose timestamp is not newer). Now when nil.
    public var timestamp: Int64?
    /// When iOS should render the activity as stale, unix seconds.
    public var staleDate: Int64?
    /// For `end`: when the activity leaves the Lock Screen, unix seconds. Now when nil.
    public var dismissalDate: Int64?
    /// Which activity wins the Dynamic Island when several are live (higher wins).
    public var relevanceScore: Double?
    /// For `start` (required) and optionally `update`: the alert shown with the push.
    public var alert: JSONValue?
    /// For `start`: the Swift `ActivityAttributes` type name, matched exactly by iOS.
    public var attributesType: String?
    /// For `start`: the static attributes the activity is created with.
    public var attributes: JSONValue?

    public init(
        contentState: JSONValue? = nil, timestamp: Int64? = nil, staleDate: Int64? = nil, dismissalDate: Int64? = nil,
        relevanceScore: Double? = nil, alert: JSONValue? = nil, attributesType: String? = nil,
        attributes: JSONValue? = nil
    ) {
        self.contentState = contentState
        self.timestamp = timestamp
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
        self.alert = alert
        self.attributesType = attributesType
        self.attributes = attributes
    }
}

/// The `aps.event` of a Live Activity push.
public enum LiveActivityEvent: String, Sendable, Hashable, CaseIterable, Codable {
    case start, update, end

    var operation: Operation {
        switch self {
        case .start: .start
        case .update: .update
        case .end: .end
        }
    }
}

extension LiveActivityContent {
    /// The `aps` dictionary for `event`, after checking the fields it needs.
    ///
    /// Key order is fixed (timestamp, event, content-state, attributes-type,
    /// attributes, alert, stale-date, dismissal-date, relevance-score) so the
    /// same input always encodes to the same bytes.
    func aps(for event: LiveActivityEvent, now: Int64, maximumLead: Int64 = Preflight.defaultTimestampLead, apnsID: APNsID) throws(APNsError) -> JSONObject {
        func require(_ present: Bool, _ field: String, _ rule: String) throws(APNsError) {
            if !present { throw APNsError.preflight(.missingEventField, field: field, rule: rule, apnsID: apnsID) }
        }
        func forbid(_ present: Bool, _ field: String, _ rule: String) throws(APNsError) {
            if present { throw APNsError.preflight(.invalidPayload, field: field, rule: rule, apnsID: apnsID) }
        }
        func requireObject(_ value: JSONValue?, _ field: String) throws(APNsError) {
            if let value, value.objectValue == nil {
                throw APNsError.preflight(
                    .invalidPayload, field: field, rule: "must be a JSON object (got \(value.typeName))", apnsID: apnsID)
            }
        }

        switch event {
        case .start:
            try require(contentState != nil, "aps.content-state", "is required for event start")
            try require(attributesType.map { !$0.isEmpty } ?? false, "aps.attributes-type", "is required for event start")
            try require(attributes != nil, "aps.attributes", "is required for event start")
            try require(alert != nil, "aps.alert", "is required for event start (iOS shows it when the activity starts)")
        case .update:
            try require(contentState != nil, "aps.content-state", "is required for event update")
        case .end:
            break
        }
        if event != .start {
            try forbid(attributesType != nil, "aps.attributes-type", "is only allowed on event start (attributes are immutable)")
            try forbid(attributes != nil, "aps.attributes", "is only allowed on event start (attributes are immutable)")
        }
        if event != .end {
            try forbid(dismissalDate != nil, "aps.dismissal-date", "is only allowed on event end")
        }
        try requireObject(contentState, "aps.content-state")
        try requireObject(attributes, "aps.attributes")
        if let alert, alert.objectValue == nil, alert.stringValue == nil {
            throw APNsError.preflight(
                .invalidPayload, field: "aps.alert", rule: "must be an object or a string (got \(alert.typeName))",
                apnsID: apnsID)
        }

        let timestamp = timestamp ?? now
        try Preflight.checkDate(timestamp, field: "aps.timestamp", apnsID: apnsID)
        try Preflight.checkTimestampLead(timestamp, now: now, maximumLead: maximumLead, apnsID: apnsID)
        if let staleDate { try Preflight.checkDate(staleDate, field: "aps.stale-date", apnsID: apnsID) }
        let dismissal = event == .end ? (dismissalDate ?? now) : nil
        if let dismissal { try Preflight.checkDate(dismissal, field: "aps.dismissal-date", apnsID: apnsID) }
        if let relevanceScore, !relevanceScore.isFinite || relevanceScore < 0 {
            throw APNsError.preflight(
                .invalidPayload, field: "aps.relevance-score", rule: "must be a finite number ≥ 0", apnsID: apnsID)
        }

        var aps = JSONObject()
        aps["timestamp"] = .integer(timestamp)
        aps["event"] = .string(event.rawValue)
        if let contentState { aps["content-state"] = contentState }
        if let attributesType { aps["attributes-type"] = .string(attributesType) }
        if let attributes { aps["attributes"] = attributes }
        if let alert { aps["alert"] = alert }
        if let staleDate { aps["stale-date"] = .integer(staleDate) }
        if let dismissal { aps["dismissal-date"] = .integer(dismissal) }
        if let relevanceScore { aps["relevance-score"] = .double(relevanceScore) }
        return aps
    }
}
