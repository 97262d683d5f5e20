import RelayJSON
import RelayBasics

extension RequestBuilder {
    /// Creates a broadcast channel on the channel-management host:
    /// `POST /1/apps/<bundle>/channels` with the storage policy and push type
    /// `LiveActivity`. APNs answers 201 with the new id in `apns-channel-id`.
    public func createChannel(storagePolicy: ChannelStoragePolicy = .noStorage, requestID: APNsID? = nil)
        -> APNsRequest
    {
        let id = resolveID(requestID)
        let payload: JSONValue = [
            "message-storage-policy": .integer(Int64(storagePolicy.wireValue)),
            "push-type": "LiveActivity",
        ]
        return managementRequest(
            .channelCreate, method: .POST, path: "/1/apps/\(bundleID)/channels", channel: nil, payload: payload, id: id)
    }

    /// Lists the app's channels: `GET /1/apps/<bundle>/all-channels`.
    public func listChannels(requestID: APNsID? = nil) -> APNsRequest {
        managementRequest(
            .channelList, method: .GET, path: "/1/apps/\(bundleID)/all-channels", channel: nil, payload: nil,
            id: resolveID(requestID))
    }

    /// Reads one channel (its storage policy and push type):
    /// `GET /1/apps/<bundle>/channels` with `apns-channel-id`.
    public func readChannel(channelID: String, requestID: APNsID? = nil) throws(APNsError) -> APNsRequest {
        let channel = try ChannelID(channelID)
        return managementRequest(
            .channelRead, method: .GET, path: "/1/apps/\(bundleID)/channels", channel: channel, payload: nil,
            id: resolveID(requestID))
    }

    /// Deletes a channel: `DELETE /1/apps/<bundle>/channels` with `apns-channel-id`.
    public func deleteChannel(channelID: String, requestID: APNsID? = nil) throws(APNsError) -> APNsRequest {
        let channel = try ChannelID(channelID)
        return managementRequest(
            .channelDelete, method: .DELETE, path: "/1/apps/\(bundleID)/channels", channel: channel, payload: nil,
            id: resolveID(requestID))
    }

    private func managementRequest(
        _ operation: Operation, method: HTTPMethod, path: String, channel: ChannelID?, payload: JSONValue?, id: APNsID
    ) -> APNsRequest {
        var headers: [HTTPHeader] = []
        if let channel { headers.append(HTTPHeader("apns-channel-id", channel.value)) }
        headers.append(HTTPHeader("apns-request-id", id.value))
        return APNsRequest(
            operation: operation, method: method, destination: .channelManagement, path: path, headers: headers,
            body: payload?.encoded() ?? [], payload: payload, apnsID: id, pushType: nil, priority: nil, topic: nil,
            tokenFingerprint: nil, channelID: channel?.value
        )
    }
}
