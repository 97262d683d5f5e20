import RelayJSON
import RelayBasics

extension RequestBuilder {
    /// A Live Activity push to a device token: `start` goes to a push-to-start
    /// token, `update` and `end` to the activity's own token. Topic
    /// `<bundle>.push-type.liveactivity`, push type `liveactivity`, priority 5
    /// unless the options say otherwise, no expiration unless given.
    public func liveActivity(
        _ event: LiveActivityEvent, token: String, content: LiveActivityContent, options: DeviceSendOptions = .init()
    ) throws(APNsError) -> APNsRequest {
        let token = try DeviceToken(token)
        let apnsID = resolveID(options.apnsID)
        var resolved = options
        resolved.apnsID = apnsID
        let aps = try content.aps(for: event, now: currentTime(), maximumLead: maximumTimestampLead, apnsID: apnsID)
        return try deviceRequest(
            operation: event.operation, token: token, pushType: .liveactivity, payload: ["aps": .object(aps)],
            options: resolved, defaultExpiration: nil)
    }

    /// An iOS 18 broadcast: one update fanned out by APNs to every device on
    /// the channel. `POST /4/broadcasts/apps/<bundle>` with `apns-channel-id`
    /// and no `apns-topic`; payload limit 5 KB.
    ///
    /// Channels carry updates only (the SDK's rule), so the event is always
    /// `update`. `apns-expiration` defaults to 0, the one value every channel
    /// accepts; a no-storage channel must get 0 (BadExpirationDate, MS032).
    /// Broadcasts are named by `apns-request-id` rather than `apns-id`.
    public func broadcast(
        channelID: String, content: LiveActivityContent, storagePolicy: ChannelStoragePolicy? = nil,
        options: DeviceSendOptions = .init()
    ) throws(APNsError) -> APNsRequest {
        let channel = try ChannelID(channelID)
        let apnsID = resolveID(options.apnsID)
        let priority = options.priority ?? .conservePower
        let expiration = options.expiration ?? 0
        try Preflight.checkExpiration(expiration, apnsID: apnsID)
        if storagePolicy == .noStorage, expiration != 0 {
            throw APNsError.preflight(
                .badExpirationDate, field: "expiration", rule: "must be 0 on a no-storage channel (got \(expiration))",
                apnsID: apnsID)
        }
        if options.collapseID != nil {
            throw APNsError.preflight(
                .notForBroadcast, field: "collapseId",
                rule: "is for device sends only: a broadcast request has no apns-collapse-id", apnsID: apnsID)
        }
        let aps = try content.aps(for: .update, now: currentTime(), maximumLead: maximumTimestampLead, apnsID: apnsID)
        let payload: JSONValue = ["aps": .object(aps)]
        let body = payload.encoded()
        try Preflight.checkPayloadSize(body.count, limit: PayloadLimit.extended, apnsID: apnsID)

        let headers = [
            HTTPHeader("apns-channel-id", channel.value),
            HTTPHeader("apns-push-type", PushType.liveactivity.rawValue),
            HTTPHeader("apns-priority", String(priority.rawValue)),
            HTTPHeader("apns-expiration", String(expiration)),
            HTTPHeader("apns-request-id", apnsID.value),
        ]
        return APNsRequest(
            operation: .broadcast, method: .POST, destination: .send, path: "/4/broadcasts/apps/\(bundleID)",
            headers: headers, body: body, payload: payload, apnsID: apnsID, pushType: .liveactivity,
            priority: priority, topic: nil, tokenFingerprint: nil, channelID: channel.value
        )
    }
}
