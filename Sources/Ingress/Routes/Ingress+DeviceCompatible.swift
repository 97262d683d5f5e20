import APNs
import HTTPServer
import Relay
import RelayJSON
import RelayBasics

extension Ingress {
    /// `POST /3/device/{token}`: APNs' own request shape, so a script that
    /// talks to Apple can talk to the relay by changing its host and putting
    /// a relay API key where the JWT was. Answers like APNs: its status,
    /// `apns-id`, and `{"reason": …}` on failure.
    @Sendable func deviceCompatible(_ call: Call) async throws(IngressError) -> HTTPResponse {
        do {
            let token = call.request.pathParameters["token"] ?? ""
            let payload = try body(call.request, checksContentType: false)
            var headers = call.request.headers.filter { $0.name.hasPrefix("apns-") && !$0.name.hasPrefix("apns-relay-") }
            // APNs treats a missing push type as an alert on iOS; so does the relay here.
            if !headers.contains(where: { $0.name == "apns-push-type" }) { headers.append(HTTPHeader("apns-push-type", "alert")) }
            let topic = call.request.header("apns-topic")
            let app = try compatibleApp(call, topic: topic)
            try authorize(call.key, app: app)
            let environment = try compatibleEnvironment(call, app: app)
            let result = try await perform(app, environment, .raw(token: token, payload: payload, headers: headers), call)
            var responseHeaders = [HTTPHeader("apns-id", result.apnsID.description)]
            if let unique = result.apnsUniqueID { responseHeaders.append(HTTPHeader("apns-unique-id", unique)) }
            return HTTPResponse(status: result.status, headers: responseHeaders, body: [])
        } catch {
            // APNs clients read "reason" (and "timestamp" on 410); the relay's
            // own error object rides along for people reading the body.
            var members: [(String, JSONValue)] = [("reason", .string(error.reason ?? error.type.rawValue))]
            if let unregisteredAt = error.unregisteredAt { members.append(("timestamp", .integer(unregisteredAt))) }
            members.append(("error", error.object))
            return .json(error.status, JSONValue.object(JSONObject(members)).encoded(), headers: error.headers)
        }
    }

    /// The app: `apns-relay-app` header or `app` query, else the one whose
    /// bundle id the topic starts with, else the key's only app.
    private func compatibleApp(_ call: Call, topic: String?) throws(IngressError) -> String {
        if let app = call.request.header("apns-relay-app") ?? call.request.query["app"] { return app }
        let configured = service.configuration.apps
        if let topic {
            let matches = configured.filter { topic == $0.bundleID || topic.hasPrefix($0.bundleID + ".") }
            if matches.count == 1 { return matches[0].name }
        }
        let allowed = configured.filter { call.key.allows(app: $0.name) }
        if allowed.count == 1 { return allowed[0].name }
        throw .invalid("apns-relay-app", "name the app with this header (or ?app=): the topic does not pick exactly one of this key's apps")
    }

    private func compatibleEnvironment(_ call: Call, app: String) throws(IngressError) -> Environment {
        if let name = call.request.header("apns-relay-environment") ?? call.request.query["environment"] {
            guard let environment = Environment(name: name) else { throw .invalid("apns-relay-environment", "must be development or production") }
            return environment
        }
        let environments = service.configuration.apps.first { $0.name == app }?.environments ?? []
        if environments.count == 1, let only = environments.first { return only }
        throw .invalid("apns-relay-environment", "name the environment with this header (or ?environment=): app \(app) sends to both")
    }
}
