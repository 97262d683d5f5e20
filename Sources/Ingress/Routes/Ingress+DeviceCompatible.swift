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
        await deviceSend(call, vocabulary: .relay)
    }

    /// Whose words a refusal is answered in.
    enum RefusalVocabulary {
        /// APNs' reason where APNs gave one, else the relay's error type
        /// (the HTTP/1.1 route: its callers read the relay's `error` object too).
        case relay
        /// APNs' reasons only (the HTTP/2 APNs ingress: its callers are APNs
        /// client libraries, which know nothing else). See ``apnsReason(for:)``.
        case apns
    }

    /// One APNs-shaped send, for both listeners: the HTTP/1.1 route and the
    /// HTTP/2 APNs ingress call this, so both convert, check, send, key and
    /// answer alike.
    func deviceSend(_ call: Call, vocabulary: RefusalVocabulary) async -> HTTPResponse {
        do {
            let token = call.request.pathParameters["token"] ?? ""
            let payload = try body(call.request, checksContentType: false)
            var headers = call.request.headers.filter { $0.name.hasPrefix("apns-") && !$0.name.hasPrefix("apns-relay-") }
            try Self.checkSizes(of: headers)
            // APNs treats a missing push type as an alert on iOS; so does the relay here.
            if !headers.contains(where: { $0.name == "apns-push-type" }) { headers.append(HTTPHeader("apns-push-type", "alert")) }
            let topic = call.request.header("apns-topic")
            let app = try compatibleApp(call, topic: topic)
            try authorize(call.key, app: app)
            let environment = try compatibleEnvironment(call, app: app)
            // The payload goes to APNs as the caller wrote it, not re-encoded.
            let operation = RelayOperation.raw(token: token, payload: payload, headers: headers, bytes: call.request.body)
            guard let key = try Self.headerIdempotencyKey(call.request) else {
                return Self.compatibleResponse(.success(try await perform(app, environment, operation, call)), vocabulary)
            }
            // What APNs would be sent: the token, the app and environment, the apns-* headers, the payload.
            let sentHeaders = headers.map { "\($0.name.lowercased()):\($0.value)" }.sorted()
            let canonical = Self.canonical("device", [token, app, environment.rawValue] + sentHeaders, payload)
            let keyed = Self.keyedSend(key, field: Self.idempotencyHeader, app: app, call: call, canonical: canonical)
            // A send recovered from its audit row is answered, and kept for
            // later repeats, in this route's shape (APNs' on the HTTP/2 ingress).
            let render = { (result: Result<SendResult, IngressError>) in Self.compatibleResponse(result, vocabulary) }
            let run = { (call: Call) async throws(IngressError) -> SendResult in try await self.perform(app, environment, operation, call) }
            switch try await idempotency.runKeyed(keyed, call, render: vocabulary == .apns ? render : Self.sendResponse, run) {
            case .replay(let answer):
                return Self.replayResponse(answer)
            case .sent(let result):
                let response = Self.compatibleResponse(result, vocabulary)
                await idempotency.recordKeyed(keyed, result, response)
                return response
            }
        } catch {
            var error = error
            // APNs names the notification in every answer: a refusal (the
            // idempotency key's among them) carries the client's apns-id,
            // the first send's when the request repeated it.
            if vocabulary == .apns, error.apnsID == nil { error.apnsID = call.request.header("apns-id").flatMap(APNsID.init) }
            return Self.compatibleResponse(.failure(error), vocabulary)
        }
    }

    /// The `apns-*` headers' count and sizes (``FieldLimits``): `apns-topic` becomes an audit column.
    static func checkSizes(of headers: [HTTPHeader]) throws(IngressError) {
        if headers.count > FieldLimits.rawHeaders {
            throw .invalid("apns-*", "at most \(FieldLimits.rawHeaders) apns-* headers (has \(headers.count))")
        }
        for header in headers {
            if header.name.utf8.count > FieldLimits.headerName {
                throw .invalid("apns-*", "a header name must be at most \(FieldLimits.headerName) bytes (one is \(header.name.utf8.count))")
            }
            try FieldLimits.check(header.value, FieldLimits.headerValue, field: header.name)
        }
    }

    /// APNs' answer shape: its status and `apns-id` (`apns-unique-id`) on
    /// success; on failure `{"reason": …}` (and `"timestamp"` on 410), which
    /// APNs clients read, with the relay's own error object for people
    /// reading the body.
    static func compatibleResponse(_ result: Result<SendResult, IngressError>, _ vocabulary: RefusalVocabulary = .relay) -> HTTPResponse {
        switch result {
        case .success(let result):
            var responseHeaders = [HTTPHeader("apns-id", result.apnsID.description)]
            if let unique = result.apnsUniqueID { responseHeaders.append(HTTPHeader("apns-unique-id", unique)) }
            return HTTPResponse(status: result.status, headers: responseHeaders, body: [])
        case .failure(let error):
            let reason = switch vocabulary {
            case .relay: error.reason ?? error.type.rawValue
            case .apns: apnsReason(for: error)
            }
            let status = switch vocabulary {
            case .relay: error.status
            case .apns: apnsStatus(for: error)
            }
            var members: [(String, JSONValue)] = [("reason", .string(reason))]
            if let unregisteredAt = error.unregisteredAt { members.append(("timestamp", .integer(unregisteredAt))) }
            members.append(("error", error.object))
            return .json(status, JSONValue.object(JSONObject(members)).encoded(), headers: error.headers)
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

    func compatibleEnvironment(_ call: Call, app: String) throws(IngressError) -> Environment {
        if let name = call.request.header("apns-relay-environment") ?? call.request.query["environment"] {
            guard let environment = Environment(name: name) else { throw .invalid("apns-relay-environment", "must be development or production") }
            return environment
        }
        let environments = service.configuration.apps.first { $0.name == app }?.environments ?? []
        if environments.count == 1, let only = environments.first { return only }
        throw .invalid("apns-relay-environment", "name the environment with this header (or ?environment=): app \(app) sends to both")
    }
}
