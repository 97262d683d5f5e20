import APNs
import HTTPServer
import Relay
import RelayJSON
import RelayBasics

/// The relay's channel routes (`/v1/channels`: create, list, read,
/// delete), each one send through ``SendController``.
struct ChannelController: Sendable {
    let service: RelayService
    let sends: SendController

    /// `POST /v1/channels` `{app, environment, storagePolicy?}` → 201 with the new channel id.
    @Sendable func createChannel(_ call: Ingress.Call) async throws(IngressError) -> HTTPResponse {
        var reader = try FieldReader(try RequestReading.parseBody(call.request), path: "")
        let app = try reader.requiredString("app")
        let environment = try SendRequestDecoder.environment(&reader)
        let policy = try SendRequestDecoder.storagePolicy(&reader) ?? .noStorage
        try reader.rejectUnknown(allowed: "app, environment, storagePolicy")
        try service.authorize(call.key, app: app)
        let result = try await sends.perform(app, environment, .createChannel(storagePolicy: policy), call)
        guard let channelID = result.channelID else {
            throw IngressError(status: 502, type: .upstream, message: "APNs created a channel but sent no apns-channel-id header")
        }
        var body = SendAnswers.successBody(result)
        body["channelId"] = .string(channelID)
        return .json(201, JSONValue.object(body).encoded(), headers: [HTTPHeader("apns-id", result.apnsID.description)])
    }

    /// `GET /v1/channels?app=&environment=` → the app's channels in that environment.
    @Sendable func listChannels(_ call: Ingress.Call) async throws(IngressError) -> HTTPResponse {
        let (app, environment) = try RequestReading.appAndEnvironment(query: call.request.query, allowed: ["app", "environment"])
        try service.authorize(call.key, app: app)
        let result = try await sends.perform(app, environment, .listChannels, call)
        var channels: [JSONValue] = []
        if !result.body.isEmpty, let parsed = try? JSONParser.parse(result.body), let list = parsed["channels"]?.arrayValue {
            channels = list
        }
        var body = SendAnswers.successBody(result)
        body["channels"] = .array(channels)
        return .json(200, JSONValue.object(body).encoded(), headers: [HTTPHeader("apns-id", result.apnsID.description)])
    }

    /// `GET /v1/channels/{channelId}?app=&environment=` → the channel's
    /// storage policy and push type, as APNs' read channel answers them.
    @Sendable func readChannel(_ call: Ingress.Call) async throws(IngressError) -> HTTPResponse {
        let (app, environment, channelID) = try channelTarget(call)
        let result = try await sends.perform(app, environment, .readChannel(channelID: channelID), call)
        var body = SendAnswers.successBody(result)
        body["channelId"] = .string(channelID)
        // APNs' body: {"message-storage-policy": 0|1, "push-type": "LiveActivity"}; null when it sent none.
        let answered = result.body.isEmpty ? nil : try? JSONParser.parse(result.body)
        body["storagePolicy"] = answered?["message-storage-policy"]?.integerValue.flatMap { ChannelStoragePolicy(wireValue: Int($0)) }
            .map { .string($0.rawValue) } ?? .null
        body["pushType"] = answered?["push-type"] ?? .null
        return .json(200, JSONValue.object(body).encoded(), headers: [HTTPHeader("apns-id", result.apnsID.description)])
    }

    /// `DELETE /v1/channels/{channelId}?app=&environment=`.
    @Sendable func deleteChannel(_ call: Ingress.Call) async throws(IngressError) -> HTTPResponse {
        let (app, environment, channelID) = try channelTarget(call)
        let result = try await sends.perform(app, environment, .deleteChannel(channelID: channelID), call)
        return .json(200, JSONValue.object(SendAnswers.successBody(result)).encoded(), headers: [HTTPHeader("apns-id", result.apnsID.description)])
    }

    /// The app, environment and channel id of `…/v1/channels/{channelId}?app=&environment=`,
    /// checked, with the key allowed to act for the app.
    private func channelTarget(_ call: Ingress.Call) throws(IngressError) -> (String, Environment, String) {
        let (app, environment) = try RequestReading.appAndEnvironment(query: call.request.query, allowed: ["app", "environment"])
        try service.authorize(call.key, app: app)
        let channelID = call.request.pathParameters["channelId"] ?? ""
        try FieldLimits.check(channelID, FieldLimits.channelID, field: "channelId")
        return (app, environment, channelID)
    }
}
