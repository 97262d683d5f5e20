import ProviderTokens
import APNs
import RelayJSON
import RelayBasics

extension MockAPNsEngine {
    /// Channel create (`POST …/channels`), read (`GET …/channels` naming one
    /// in `apns-channel-id`), list (`GET …/all-channels`) and delete
    /// (`DELETE …/channels`), held in memory for this environment.
    func manageChannels(_ request: MockRequest, bundleID: String, resource: String) -> MockResponse {
        guard configuration.broadcastEnabled else { return error("FeatureNotEnabled", request: request) }
        if !configuration.bundleIDs.isEmpty, !configuration.bundleIDs.contains(bundleID) {
            return error("TopicDisallowed", request: request)
        }
        switch (request.method, resource) {
        case ("POST", "channels"):
            return createChannel(request, bundleID: bundleID)
        case ("GET", "channels"):
            return readChannel(request, bundleID: bundleID)
        case ("GET", "all-channels"):
            let ids = state.withLock { ($0.channels[bundleID] ?? [:]).keys.sorted() }
            let body: JSONValue = ["channels": .array(ids.map(JSONValue.string))]
            return success(request, idHeader: "apns-request-id", body: body.encoded())
        case ("DELETE", "channels"):
            guard let channel = request.header("apns-channel-id") else { return error("MissingChannelId", request: request) }
            guard MockRules.isBase64(channel) else { return error("BadChannelId", request: request) }
            let removed = state.withLock { $0.channels[bundleID]?.removeValue(forKey: channel) != nil }
            return removed ? success(request, idHeader: "apns-request-id", status: 204)
                : error("ChannelNotRegistered", request: request)
        case (_, "channels"), (_, "all-channels"):
            return error("MethodNotAllowed", request: request)
        default:
            return error("BadPath", request: request)
        }
    }

    /// APNs' read channel: 200 with the channel's storage policy and push
    /// type, and its id in `apns-channel-id`.
    private func readChannel(_ request: MockRequest, bundleID: String) -> MockResponse {
        guard let channel = request.header("apns-channel-id") else { return error("MissingChannelId", request: request) }
        guard MockRules.isBase64(channel) else { return error("BadChannelId", request: request) }
        guard let policy = state.withLock({ $0.channels[bundleID]?[channel] }) else { return error("ChannelNotRegistered", request: request) }
        let body: JSONValue = ["message-storage-policy": .integer(Int64(policy)), "push-type": "LiveActivity"]
        var response = success(request, idHeader: "apns-request-id", body: body.encoded())
        response.headers.append(HTTPHeader("apns-channel-id", channel))
        return response
    }

    private func createChannel(_ request: MockRequest, bundleID: String) -> MockResponse {
        guard let body = try? JSONParser.parse(request.body),
              let policy = body["message-storage-policy"]?.integerValue, policy == 0 || policy == 1
        else { return error("BadRequest", status: 400, request: request) }
        guard body["push-type"]?.stringValue == "LiveActivity" else { return error("InvalidPushType", request: request) }
        var random = SystemRandomNumberGenerator()
        let raw = (0..<18).map { _ in UInt8.random(in: 0...255, using: &random) }
        // Standard base64 (18 bytes: no padding needed), the alphabet APNs' ids use.
        let channelID = String(Base64URL.encode(raw).map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        let created = state.withLock { state -> Bool in
            var channels = state.channels[bundleID] ?? [:]
            guard channels.count < configuration.maximumChannels else { return false }
            channels[channelID] = Int(policy)
            state.channels[bundleID] = channels
            return true
        }
        guard created else { return error("CannotCreateChannelConfig", request: request) }
        var response = success(request, idHeader: "apns-request-id", status: 201)
        response.headers.append(HTTPHeader("apns-channel-id", channelID))
        return response
    }

    /// Creates a channel directly (test setup), returning its id.
    public func registerChannel(bundleID: String, id: String, storagePolicy: Int = 0) {
        state.withLock { $0.channels[bundleID, default: [:]][id] = storagePolicy }
    }

    /// The channels that exist for `bundleID`.
    public func channels(bundleID: String) -> [String] {
        state.withLock { ($0.channels[bundleID] ?? [:]).keys.sorted() }
    }
}
