import APNs
import HTTPServer
import Relay
import RelayJSON
import RelayBasics

extension Ingress {
    /// `POST /v1/channels` `{app, environment, storagePolicy?}` → 201 with the new channel id.
    @Sendable func createChannel(_ call: Call) async throws(IngressError) -> HTTPResponse {
        var reader = try FieldReader(try body(call.request), path: "")
        let app = try reader.requiredString("app")
        let environment = try SendRequestDecoder.environment(&reader)
        let policy = try SendRequestDecoder.storagePolicy(&reader) ?? .noStorage
        try reader.rejectUnknown(allowed: "app, environment, storagePolicy")
        try authorize(call.key, app: app)
        let result = try await perform(app, environment, .createChannel(storagePolicy: policy), call)
        guard let channelID = result.channelID else {
            throw IngressError(status: 502, type: .upstream, message: "APNs created a channel but sent no apns-channel-id header")
        }
        var body = Self.successBody(result)
        body["channelId"] = .string(channelID)
        return .json(201, JSONValue.object(body).encoded(), headers: [HTTPHeader("apns-id", result.apnsID.description)])
    }

    /// `GET /v1/channels?app=&environment=` → the app's channels in that environment.
    @Sendable func listChannels(_ call: Call) async throws(IngressError) -> HTTPResponse {
        let (app, environment) = try appAndEnvironment(query: call.request.query, allowed: ["app", "environment"])
        try authorize(call.key, app: app)
        let result = try await perform(app, environment, .listChannels, call)
        var channels: [JSONValue] = []
        if !result.body.isEmpty, let parsed = try? JSONParser.parse(result.body), let list = parsed["channels"]?.arrayValue {
            channels = list
        }
        var body = Self.successBody(result)
        body["channels"] = .array(channels)
        return .json(200, JSONValue.object(body).encoded(), headers: [HTTPHeader("apns-id", result.apnsID.description)])
    }

    /// `GET /v1/channels/{channelId}?app=&environment=` → the channel's
    /// storage policy and push type, as APNs' read channel answers them.
    @Sendable func readChannel(_ call: Call) async throws(IngressError) -> HTTPResponse {
        let (app, environment, channelID) = try channelTarget(call)
        let result = try await perform(app, environment, .readChannel(channelID: channelID), call)
        var body = Self.successBody(result)
        body["channelId"] = .string(channelID)
        // APNs' body: {"message-storage-policy": 0|1, "push-type": "LiveActivity"}; null when it sent none.
        let answered = result.body.isEmpty ? nil : try? JSONParser.parse(result.body)
        body["storagePolicy"] = answered?["message-storage-policy"]?.integerValue.flatMap { ChannelStoragePolicy(wireValue: Int($0)) }
            .map { .string($0.rawValue) } ?? .null
        body["pushType"] = answered?["push-type"] ?? .null
        return .json(200, JSONValue.object(body).encoded(), headers: [HTTPHeader("apns-id", result.apnsID.description)])
    }

    /// `DELETE /v1/channels/{channelId}?app=&environment=`.
    @Sendable func deleteChannel(_ call: Call) async throws(IngressError) -> HTTPResponse {
        let (app, environment, channelID) = try channelTarget(call)
        let result = try await perform(app, environment, .deleteChannel(channelID: channelID), call)
        return .json(200, JSONValue.object(Self.successBody(result)).encoded(), headers: [HTTPHeader("apns-id", result.apnsID.description)])
    }

    /// The app, environment and channel id of `…/v1/channels/{channelId}?app=&environment=`,
    /// checked, with the key allowed to act for the app.
    private func channelTarget(_ call: Call) throws(IngressError) -> (String, Environment, String) {
        let (app, environment) = try appAndEnvironment(query: call.request.query, allowed: ["app", "environment"])
        try authorize(call.key, app: app)
        let channelID = call.request.pathParameters["channelId"] ?? ""
        try FieldLimits.check(channelID, FieldLimits.channelID, field: "channelId")
        return (app, environment, channelID)
    }

    /// Fails on the first query parameter the route does not read.
    func rejectUnknown(query: [String: String], allowed: Set<String>) throws(IngressError) {
        try Self.rejectUnknownParameters(query, allowed: allowed)
    }

    /// ``rejectUnknown(query:allowed:)`` for a controller that holds no `Ingress`.
    static func rejectUnknownParameters(_ query: [String: String], allowed: Set<String>) throws(IngressError) {
        for name in query.keys.sorted() where !allowed.contains(name) {
            throw .invalid(name, "unknown query parameter (allowed: \(allowed.sorted().joined(separator: ", ")))")
        }
    }

    /// `app` and `environment` from a query string, rejecting parameters nobody reads.
    func appAndEnvironment(query: [String: String], allowed: Set<String>) throws(IngressError) -> (String, Environment) {
        try rejectUnknown(query: query, allowed: allowed)
        guard let app = query["app"], !app.isEmpty else { throw .invalid("app", "query parameter is required") }
        guard let name = query["environment"], !name.isEmpty else { throw .invalid("environment", "query parameter is required (development or production)") }
        guard let environment = Environment(name: name) else { throw .invalid("environment", "must be development or production") }
        return (app, environment)
    }
}
