public import RelayJSON
public import RelayBasics

extension RequestBuilder {
    /// An alert push from a Live Activity snapshot's alert projection: push
    /// type `alert`, bare bundle-id topic, priority 10 and expiration now+1h
    /// unless the options say otherwise.
    public func alert(token: String, payload: JSONValue, options: DeviceSendOptions = .init())
        throws(APNsError) -> APNsRequest
    {
        try alertRequest(operation: .alert, token: token, payload: payload, options: options)
    }

    /// A notification push from a notification snapshot's projection. Same
    /// wire shape as ``alert(token:payload:options:)``; only the operation
    /// label (and so the metrics and audit rows) differs.
    public func notification(token: String, payload: JSONValue, options: DeviceSendOptions = .init())
        throws(APNsError) -> APNsRequest
    {
        try alertRequest(operation: .notification, token: token, payload: payload, options: options)
    }

    /// ``alert(token:payload:options:)`` with a payload checked and encoded
    /// once for many sends (a batch's alerts from one snapshot).
    public func alert(token: String, payload: EncodedPayload, options: DeviceSendOptions = .init())
        throws(APNsError) -> APNsRequest
    {
        try alertRequest(operation: .alert, token: token, payload: payload.payload, body: payload.body, options: options)
    }

    /// ``notification(token:payload:options:)`` with a payload checked and
    /// encoded once for many sends.
    public func notification(token: String, payload: EncodedPayload, options: DeviceSendOptions = .init())
        throws(APNsError) -> APNsRequest
    {
        try alertRequest(operation: .notification, token: token, payload: payload.payload, body: payload.body, options: options)
    }

    /// `body`: the payload already shape-checked and encoded (``EncodedPayload``).
    private func alertRequest(operation: Operation, token: String, payload: JSONValue, body: [UInt8]? = nil, options: DeviceSendOptions)
        throws(APNsError) -> APNsRequest
    {
        let token = try DeviceToken(token)
        if body == nil { try Preflight.checkPayloadShape(payload) }
        return try deviceRequest(
            operation: operation, token: token, pushType: .alert, payload: payload, options: options,
            defaultExpiration: currentTime() + Self.defaultAlertLifetimeSeconds, body: body)
    }

    /// A silent background push: `aps` is exactly `{"content-available": 1}`,
    /// `customData` rides beside it at the top level, priority defaults to 5.
    public func background(token: String, customData: JSONObject = JSONObject(), options: DeviceSendOptions = .init())
        throws(APNsError) -> APNsRequest
    {
        let token = try DeviceToken(token)
        if customData["aps"] != nil {
            throw APNsError.preflight(
                .invalidPayload, field: "customData.aps", rule: "is set by the relay for background pushes")
        }
        var payload = JSONObject()
        payload["aps"] = ["content-available": 1]
        for member in customData.members { payload[member.key] = member.value }
        return try deviceRequest(
            operation: .background, token: token, pushType: .background, payload: .object(payload), options: options,
            defaultExpiration: currentTime() + Self.defaultAlertLifetimeSeconds)
    }

    /// The caller's own payload and `apns-*` headers, sent to `/3/device/<token>`.
    ///
    /// The push type is required; the topic defaults to the bundle id with the
    /// push type's suffix. Header values are checked like the typed options
    /// (priority, expiration, collapse id, apns-id). `authorization`,
    /// pseudo-headers and repeated headers are refused: the relay owns them.
    ///
    /// `bytes`, when given, is the payload as the caller wrote it (it must
    /// parse to `payload`): sent byte for byte, so an APNs client's payload
    /// reaches APNs exactly as it encoded it.
    public func raw(token: String, payload: JSONValue, headers: [HTTPHeader], bytes: [UInt8]? = nil) throws(APNsError) -> APNsRequest {
        let token = try DeviceToken(token)
        try Preflight.checkPayloadShape(payload)
        let supplied = try RawHeaders(headers)
        let apnsID = resolveID(supplied.apnsID)
        let pushType = supplied.pushType
        let priority = supplied.priority ?? pushType.defaultPriority
        if let priority { try Preflight.checkPriority(priority, for: pushType, apnsID: apnsID) }
        if pushType == .widgets { try Preflight.checkWidgetReloadPayload(payload, apnsID: apnsID) }
        let body = bytes ?? payload.encoded()
        try Preflight.checkPayloadSize(body.count, limit: pushType.maximumPayloadBytes, apnsID: apnsID)
        // A topic of another app would reach APNs under this app's name (and
        // its audit rows); only this bundle id and its push-type suffixes pass.
        if let topic = supplied.topic { try Preflight.checkTopic(topic, bundleID: bundleID, apnsID: apnsID) }
        let topic = supplied.topic ?? pushType.topic(forBundleID: bundleID)

        var wire = [HTTPHeader("apns-push-type", pushType.rawValue), HTTPHeader("apns-topic", topic)]
        if let priority { wire.append(HTTPHeader("apns-priority", String(priority.rawValue))) }
        if let expiration = supplied.expiration { wire.append(HTTPHeader("apns-expiration", String(expiration))) }
        if let collapseID = supplied.collapseID { wire.append(HTTPHeader("apns-collapse-id", collapseID)) }
        wire.append(HTTPHeader("apns-id", apnsID.value))
        wire.append(contentsOf: supplied.others)

        return APNsRequest(
            operation: .raw, method: .POST, destination: .send, path: "/3/device/\(token.hex)", headers: wire,
            body: body, payload: payload, apnsID: apnsID, pushType: pushType, priority: priority, topic: topic,
            tokenFingerprint: token.fingerprint, channelID: nil
        )
    }
}

/// Caller-supplied headers of a raw send, parsed and checked.
struct RawHeaders {
    var pushType: PushType
    var topic: String?
    var priority: Priority?
    var expiration: Int64?
    var collapseID: String?
    var apnsID: APNsID?
    /// Other `apns-*` headers, passed through in the caller's order.
    var others: [HTTPHeader] = []

    init(_ headers: [HTTPHeader]) throws(APNsError) {
        // Names seen so far, searched in order: a raw send has a handful of
        // headers, fewer than hashing each name into a set is worth.
        var seen: [String] = []
        seen.reserveCapacity(headers.count)
        var pushType: PushType?
        for header in headers {
            let name = header.name
            try Self.checkWellFormed(header, seen: &seen)
            switch name {
            case "apns-push-type":
                pushType = try Self.pushType(header.value, field: name)
            case "apns-topic":
                if header.value.isEmpty { throw APNsError.preflight(.missingTopic, field: name, rule: "must not be empty") }
                topic = header.value
            case "apns-priority":
                guard let value = Int64(header.value) else {
                    throw APNsError.preflight(.badPriority, field: name, rule: "must be 1, 5 or 10 (got \(header.value))")
                }
                priority = try Preflight.parsePriority(value, field: name)
            case "apns-expiration":
                guard let value = Int64(header.value) else {
                    throw APNsError.preflight(.badExpirationDate, field: name, rule: "must be an integer of unix seconds")
                }
                try Preflight.checkExpiration(value, field: name)
                expiration = value
            case "apns-collapse-id":
                try Preflight.checkCollapseID(header.value, field: name)
                collapseID = header.value
            case "apns-id":
                guard let id = APNsID(header.value) else {
                    throw APNsError.preflight(.badMessageID, field: name, rule: "must be a UUID (8-4-4-4-12 hex digits)")
                }
                apnsID = id
            case "content-type":
                continue  // APNs ignores it; dropping it keeps the wire shape canonical.
            default:
                guard name.hasPrefix("apns-") else {
                    throw APNsError.preflight(
                        .forbiddenHeader, field: name, rule: "is not an apns-* header; the relay sets the rest itself")
                }
                others.append(header)
            }
        }
        guard let pushType else {
            throw APNsError.preflight("MissingPushType", field: "apns-push-type", rule: "is required for raw sends")
        }
        self.pushType = pushType
    }

    /// Checks a header's name and value before it is interpreted, and that
    /// it is not repeated: a byte HTTP/2 forbids makes APNs reset the stream,
    /// which the relay would retry and report as a transport failure.
    private static func checkWellFormed(_ header: HTTPHeader, seen: inout [String]) throws(APNsError) {
        let name = header.name
        try Preflight.checkHeaderName(name)
        try Preflight.checkHeaderValue(header.value, field: name)
        guard !seen.contains(name) else {
            throw APNsError.preflight("DuplicateHeaders", field: name, rule: "must appear once")
        }
        seen.append(name)
    }

    /// The `apns-push-type` header's value as a ``PushType``.
    private static func pushType(_ value: String, field: String) throws(APNsError) -> PushType {
        guard let type = PushType(rawValue: value) else {
            throw APNsError.preflight(
                .invalidPushType, field: field,
                rule: "must be one of \(PushType.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return type
    }
}
