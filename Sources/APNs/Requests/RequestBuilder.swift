import RelayJSON
public import RelayBasics

/// Builds the exact APNs request for every operation, after running every
/// preflight check that can be run without I/O.
///
/// A builder belongs to one app (bundle id). Time and ids are injected so a
/// request can be reproduced byte for byte in tests and in `describe`.
public struct RequestBuilder: Sendable {
    /// The app's bare bundle id; push-type suffixes are appended per request.
    public let bundleID: String
    private let now: @Sendable () -> Int64
    private let makeID: @Sendable () -> APNsID
    /// How far past `now` a Live Activity `timestamp` may lie (seconds).
    public let maximumTimestampLead: Int64

    /// How long an alert stays deliverable when the caller names no expiration.
    public static let defaultAlertLifetimeSeconds: Int64 = 3600

    /// - Parameters:
    ///   - bundleID: the bare bundle id. Empty is `MissingTopic` (MS035); one
    ///     ending in `.push-type.liveactivity` is `MalformedApnsConfig` (MS018).
    ///   - now: the current time in unix seconds.
    ///   - makeID: the apns-id for sends whose caller supplies none.
    ///   - maximumTimestampLead: seconds a Live Activity `timestamp` may lie
    ///     past `now` (clock skew between backend and relay); later ones are refused.
    public init(
        bundleID: String,
        now: @escaping @Sendable () -> Int64 = { UnixTime.nowSeconds() },
        makeID: @escaping @Sendable () -> APNsID = { APNsID.random() },
        maximumTimestampLead: Int64 = Preflight.defaultTimestampLead
    ) throws(APNsError) {
        try Preflight.checkBundleID(bundleID)
        self.bundleID = bundleID
        self.now = now
        self.makeID = makeID
        self.maximumTimestampLead = max(0, maximumTimestampLead)
    }

    func currentTime() -> Int64 { now() }

    func resolveID(_ supplied: APNsID?) -> APNsID { supplied ?? makeID() }
}

/// Options every device send accepts.
public struct DeviceSendOptions: Sendable, Hashable {
    /// The caller's apns-id, reused on every attempt; generated when nil.
    public var apnsID: APNsID?
    /// Overrides the push type's default priority.
    public var priority: Priority?
    /// Unix seconds after which APNs stops trying; 0 means deliver once or drop.
    public var expiration: Int64?
    /// Replaces an earlier notification with the same id on the device (≤ 64 bytes).
    public var collapseID: String?

    public init(apnsID: APNsID? = nil, priority: Priority? = nil, expiration: Int64? = nil, collapseID: String? = nil) {
        self.apnsID = apnsID
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
    }
}

extension RequestBuilder {
    /// Assembles a device send (`POST /3/device/<token>`) once its payload is final.
    func deviceRequest(
        operation: Operation, token: DeviceToken, pushType: PushType, payload: JSONValue,
        options: DeviceSendOptions, defaultExpiration: Int64?, body encoded: [UInt8]? = nil
    ) throws(APNsError) -> APNsRequest {
        let apnsID = resolveID(options.apnsID)
        let priority = options.priority ?? pushType.defaultPriority
        if let priority { try Preflight.checkPriority(priority, for: pushType, apnsID: apnsID) }
        let expiration = options.expiration ?? defaultExpiration
        if let expiration { try Preflight.checkExpiration(expiration, apnsID: apnsID) }
        if let collapseID = options.collapseID { try Preflight.checkCollapseID(collapseID, apnsID: apnsID) }
        // Encoded once for many sends of it (``EncodedPayload``), or here.
        let body = encoded ?? payload.encoded()
        try Preflight.checkPayloadSize(body.count, limit: pushType.maximumPayloadBytes, apnsID: apnsID)

        let topic = pushType.topic(forBundleID: bundleID)
        // Room for every header at once (the literal's two grew twice per send),
        // and one more: each attempt adds `authorization` to a copy.
        var headers: [HTTPHeader] = []
        headers.reserveCapacity(7)
        headers.append(HTTPHeader("apns-push-type", pushType.rawValue))
        headers.append(HTTPHeader("apns-topic", topic))
        if let priority { headers.append(HTTPHeader("apns-priority", String(priority.rawValue))) }
        if let expiration { headers.append(HTTPHeader("apns-expiration", String(expiration))) }
        if let collapseID = options.collapseID { headers.append(HTTPHeader("apns-collapse-id", collapseID)) }
        headers.append(HTTPHeader("apns-id", apnsID.value))

        return APNsRequest(
            operation: operation, method: .POST, destination: .send, path: "/3/device/\(token.hex)",
            headers: headers, body: body, payload: payload, apnsID: apnsID, pushType: pushType, priority: priority,
            topic: topic, tokenFingerprint: token.fingerprint, channelID: nil
        )
    }
}
