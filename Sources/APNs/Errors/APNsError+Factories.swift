internal import RelayJSON

extension APNsError {
    /// A preflight failure: `field` broke `rule`; nothing was sent.
    ///
    /// Codes that mirror an APNs reason take that reason's status, trap and
    /// fix from the catalog, so a rejection caught locally and the same
    /// rejection from APNs look alike to every observer.
    public static func preflight(_ code: Code, field: String, rule: String, apnsID: APNsID? = nil) -> APNsError {
        let catalogued = APNsReason.named(code.rawValue)
        let local = localRules[code]
        return APNsError(
            stage: .preflight,
            code: code,
            status: catalogued?.status ?? local?.status ?? 400,
            field: field,
            rule: rule,
            apnsID: apnsID,
            dropsToken: false,
            trapID: catalogued?.trapID ?? local?.trapID ?? Trap.id(forErrorType: code.rawValue),
            fix: catalogued?.fix ?? local?.fix ?? "Fix \(field): it \(rule)."
        )
    }

    /// Relay-only codes whose fix is more than the broken rule. `InvalidPayload`
    /// has none: it covers many rules (no `aps`, attributes on an update, a
    /// dismissal date before the end…), so its fix names the field and the rule.
    private static let localRules: [Code: (status: Int, trapID: TrapID?, fix: String)] = [
        .badDate: (400, .badDate, "Send dates as positive unix seconds, not milliseconds or ISO strings."),
        .malformedApnsConfig: (
            400, .malformedTopic, "Configure the bare bundle id; the relay appends .push-type.liveactivity itself."
        ),
        .missingEventField: (400, nil, "Supply every field the Live Activity event needs."),
        .forbiddenHeader: (400, nil, "Leave authorization and pseudo-headers to the relay."),
        .invalidHeader: (400, nil, "Send lowercase header names and values of visible ASCII characters and spaces only."),
        .topicNotForApp: (
            403, nil, "Send for the app whose bundle id the topic carries, with a key scoped to that app; omit apns-topic to get the default."
        ),
        .notForBroadcast: (400, nil, "Leave collapseId out of broadcasts; collapse ids apply to device sends only."),
    ]

    /// The error for a non-2xx APNs answer.
    ///
    /// - Parameters:
    ///   - status: the `:status` APNs answered with.
    ///   - body: the response body; APNs sends `{"reason": …}` and, for 410,
    ///     `"timestamp"` in milliseconds. A missing or unreadable body falls
    ///     back to the reason its status implies.
    ///   - apnsID: the `apns-id` APNs echoed, or the one sent.
    public static func fromResponse(status: Int, body: [UInt8], apnsID: APNsID?) -> APNsError {
        let parsed = try? JSONParser.parse(body)
        let reasonName = parsed?["reason"]?.stringValue ?? fallbackReason(forStatus: status)
        let timestamp = parsed?["timestamp"]?.integerValue
        if let reason = APNsReason.named(reasonName) {
            return APNsError(
                stage: .apns, code: Code(rawValue: reason.name), status: status, apnsID: apnsID,
                unregisteredAt: timestamp, dropsToken: reason.dropsToken,
                trapID: reason.trapID, fix: reason.fix
            )
        }
        // A reason newer than the catalog: keep it verbatim (RetryPolicy.decide
        // retries it only as a server error).
        return APNsError(
            stage: .apns, code: Code(rawValue: reasonName), status: status, apnsID: apnsID,
            unregisteredAt: timestamp, dropsToken: false,
            trapID: Trap.id(forErrorType: reasonName),
            fix: "APNs reason \(reasonName) is not in the relay's catalog; check Apple's documentation."
        )
    }

    private static func fallbackReason(forStatus status: Int) -> String {
        switch status {
        case 500: "InternalServerError"
        case 503: "ServiceUnavailable"
        case 413: "PayloadTooLarge"
        case 429: "TooManyRequests"
        case 405: "MethodNotAllowed"
        default: "HTTP\(status)"
        }
    }
}
