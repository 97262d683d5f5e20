public import RelayJSON

/// The checks that run before any I/O. Each throws an ``APNsError`` with
/// stage `.preflight` that names the field and the rule it broke.
///
/// They mirror what APNs would reject (so a bad send costs no round trip and
/// no retry budget) plus the silent failures APNs would accept: a date in
/// milliseconds, a bundle id with the Live Activity suffix already on it.
public enum Preflight {
    /// Dates at or above this many seconds (year 5138) are taken for
    /// milliseconds: the commonest timestamp bug (MS032).
    public static let millisecondThreshold: Int64 = 100_000_000_000

    /// The bundle id must be set, bare, and look like a bundle id.
    public static func checkBundleID(_ bundleID: String) throws(APNsError) {
        if bundleID.isEmpty {
            throw APNsError.preflight(.missingTopic, field: "bundleId", rule: "must be set (it becomes apns-topic)")
        }
        let suffix = PushType.liveactivity.topicSuffix
        if bundleID.hasSuffix(suffix) {
            throw APNsError.preflight(
                .malformedApnsConfig, field: "bundleId",
                rule: "must not end in \(suffix); the relay appends it to Live Activity topics")
        }
        let allowed = bundleID.utf8.allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }
        if !allowed {
            throw APNsError.preflight(
                .malformedApnsConfig, field: "bundleId", rule: "may contain only letters, digits, '.' and '-'")
        }
    }

    /// Priority must suit the push type: background pushes may not be immediate.
    public static func checkPriority(_ priority: Priority, for pushType: PushType, apnsID: APNsID? = nil)
        throws(APNsError)
    {
        if pushType == .background, priority == .immediate {
            throw APNsError.preflight(
                .badPriority, field: "priority", rule: "must be 5 or 1 for background pushes (Apple rejects 10 there)",
                apnsID: apnsID)
        }
    }

    /// A priority given as a number must be 1, 5 or 10.
    public static func parsePriority(_ value: Int64, field: String = "priority") throws(APNsError) -> Priority {
        guard let priority = Priority(rawValue: Int(clamping: value)) else {
            throw APNsError.preflight(.badPriority, field: field, rule: "must be 1, 5 or 10 (got \(value))")
        }
        return priority
    }

    /// `apns-expiration`: 0 (deliver once) or positive unix seconds.
    public static func checkExpiration(_ value: Int64, field: String = "expiration", apnsID: APNsID? = nil)
        throws(APNsError)
    {
        if value == 0 { return }
        if let rule = brokenDateRule(value) {
            throw APNsError.preflight(.badExpirationDate, field: field, rule: rule, apnsID: apnsID)
        }
    }

    /// A stale, dismissal or event date: positive unix seconds.
    public static func checkDate(_ value: Int64, field: String, apnsID: APNsID? = nil) throws(APNsError) {
        if let rule = brokenDateRule(value) {
            throw APNsError.preflight(.badDate, field: field, rule: rule, apnsID: apnsID)
        }
    }

    /// Seconds a Live Activity `timestamp` may lie past the relay's clock by default.
    public static let defaultTimestampLead: Int64 = 3600

    /// A Live Activity `timestamp` may not lie more than `maximumLead` seconds
    /// past `now`: iOS drops every later push whose timestamp is not newer, and
    /// so does the relay's own guard, so one far-future timestamp would block
    /// the activity for good (MS032).
    public static func checkTimestampLead(_ timestamp: Int64, now: Int64, maximumLead: Int64, field: String = "aps.timestamp", apnsID: APNsID? = nil)
        throws(APNsError)
    {
        let (latest, overflow) = now.addingReportingOverflow(maximumLead)
        if !overflow, timestamp > latest {
            throw APNsError.preflight(
                .badDate, field: field,
                rule: "must not be more than \(maximumLead) s past the relay's clock (\(now)); got \(timestamp), \(timestamp &- now) s ahead",
                apnsID: apnsID)
        }
    }

    static func brokenDateRule(_ value: Int64) -> String? {
        if value <= 0 { return "must be a positive unix-seconds integer (got \(value))" }
        if value >= millisecondThreshold {
            return "must be unix seconds, not milliseconds (got \(value); did you mean \(value / 1000)?)"
        }
        return nil
    }

    /// `apns-collapse-id`: 1 to 64 bytes of visible ASCII and spaces (it
    /// travels as a header value, where a control byte resets the stream).
    public static func checkCollapseID(_ collapseID: String, field: String = "collapseId", apnsID: APNsID? = nil) throws(APNsError) {
        let bytes = collapseID.utf8.count
        if bytes == 0 || bytes > 64 {
            throw APNsError.preflight(
                .badCollapseID, field: field, rule: "must be 1 to 64 bytes long (is \(bytes))", apnsID: apnsID)
        }
        try checkHeaderValue(collapseID, field: field, code: .badCollapseID, apnsID: apnsID)
    }

    /// The encoded body must fit APNs' limit for the request.
    public static func checkPayloadSize(_ bytes: Int, limit: Int, apnsID: APNsID? = nil) throws(APNsError) {
        if bytes == 0 {
            throw APNsError.preflight(.payloadEmpty, field: "payload", rule: "must not be empty", apnsID: apnsID)
        }
        if bytes > limit {
            throw APNsError.preflight(
                .payloadTooLarge, field: "payload",
                rule: "must be at most \(limit) bytes encoded (is \(bytes), \(bytes - limit) over)", apnsID: apnsID)
        }
    }

    /// A payload must be a JSON object whose `aps` member is an object.
    public static func checkPayloadShape(_ payload: JSONValue, field: String = "payload") throws(APNsError) {
        guard let object = payload.objectValue else {
            throw APNsError.preflight(.invalidPayload, field: field, rule: "must be a JSON object (got \(payload.typeName))")
        }
        guard let aps = object["aps"] else {
            throw APNsError.preflight(.invalidPayload, field: "\(field).aps", rule: "is required")
        }
        guard aps.objectValue != nil else {
            throw APNsError.preflight(.invalidPayload, field: "\(field).aps", rule: "must be an object (got \(aps.typeName))")
        }
    }
}
