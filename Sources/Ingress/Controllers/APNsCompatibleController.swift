import APNs
import HTTPServer
import Relay
import RelayJSON
import RelayBasics

/// The APNs-compatible routes: `POST /3/device/{token}` on the API
/// listener, and the HTTP/2 APNs listener's device, channel and broadcast
/// requests (``APNsCompatibleController+HTTP2.swift``). A script or an APNs
/// client library written for Apple talks to the relay unchanged but for
/// the host and the credential; every send goes through ``SendController``.
struct APNsCompatibleController: Sendable {
    let service: RelayService
    let sends: SendController

    var idempotency: IdempotencyGate { sends.idempotency }

    /// `POST /3/device/{token}`: APNs' own request shape, so a script that
    /// talks to Apple can talk to the relay by changing its host and putting
    /// a relay API key where the JWT was. Answers like APNs: its status,
    /// `apns-id`, and `{"reason": …}` on failure.
    @Sendable func deviceCompatible(_ call: Ingress.Call) async throws(IngressError) -> HTTPResponse {
        await deviceSend(call, vocabulary: .relay)
    }

    /// One APNs-shaped send, for both listeners: the HTTP/1.1 route and the
    /// HTTP/2 APNs ingress call this, so both convert, check, send, key and
    /// answer alike.
    func deviceSend(_ call: Ingress.Call, vocabulary: APNsAnswers.RefusalVocabulary) async -> HTTPResponse {
        do {
            let token = call.request.pathParameters["token"] ?? ""
            let payload = try RequestReading.parseBody(call.request, checksContentType: false)
            var headers = call.request.headers.filter { $0.name.hasPrefix("apns-") && !$0.name.hasPrefix("apns-relay-") }
            try APNsCompatibleController.checkSizes(of: headers)
            // APNs treats a missing push type as an alert on iOS; so does the relay here.
            if !headers.contains(where: { $0.name == "apns-push-type" }) { headers.append(HTTPHeader("apns-push-type", "alert")) }
            let topic = call.request.header("apns-topic")
            let app = try compatibleApp(call, topic: topic)
            try service.authorize(call.key, app: app)
            let environment = try compatibleEnvironment(call, app: app)
            // The payload goes to APNs as the caller wrote it, not re-encoded.
            let operation = RelayOperation.raw(token: token, payload: payload, headers: headers, bytes: call.request.body)
            guard let key = try IdempotencyKeys.headerIdempotencyKey(call.request) else {
                return APNsAnswers.compatibleResponse(.success(try await sends.perform(app, environment, operation, call)), vocabulary)
            }
            // What APNs would be sent: the token, the app and environment, the apns-* headers, the payload.
            let sentHeaders = headers.map { "\($0.name.lowercased()):\($0.value)" }.sorted()
            let canonical = IdempotencyKeys.canonical("device", [token, app, environment.rawValue] + sentHeaders, payload)
            let keyed = IdempotencyKeys.keyedSend(key, field: IdempotencyKeys.idempotencyHeader, app: app, call: call, canonical: canonical)
            // A send recovered from its audit row is answered, and kept for
            // later repeats, in this route's shape (APNs' on the HTTP/2 ingress).
            let render = { (result: Result<SendResult, IngressError>) in APNsAnswers.compatibleResponse(result, vocabulary) }
            let run = { (call: Ingress.Call) async throws(IngressError) -> SendResult in try await self.sends.perform(app, environment, operation, call) }
            switch try await idempotency.runKeyed(keyed, call, render: vocabulary == .apns ? render : SendAnswers.sendResponse, run) {
            case .replay(let answer):
                return SendAnswers.replayResponse(answer)
            case .sent(let result):
                let response = APNsAnswers.compatibleResponse(result, vocabulary)
                await idempotency.recordKeyed(keyed, result, response)
                return response
            }
        } catch {
            var error = error
            // APNs names the notification in every answer: a refusal (the
            // idempotency key's among them) carries the client's apns-id,
            // the first send's when the request repeated it.
            if vocabulary == .apns, error.apnsID == nil { error.apnsID = call.request.header("apns-id").flatMap(APNsID.init) }
            return APNsAnswers.compatibleResponse(.failure(error), vocabulary)
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

    /// The app: `apns-relay-app` header or `app` query, else the one whose
    /// bundle id the topic starts with, else the key's only app.
    private func compatibleApp(_ call: Ingress.Call, topic: String?) throws(IngressError) -> String {
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

    func compatibleEnvironment(_ call: Ingress.Call, app: String) throws(IngressError) -> Environment {
        if let name = call.request.header("apns-relay-environment") ?? call.request.query["environment"] {
            guard let environment = Environment(name: name) else { throw .invalid("apns-relay-environment", "must be development or production") }
            return environment
        }
        let environments = service.configuration.apps.first { $0.name == app }?.environments ?? []
        if environments.count == 1, let only = environments.first { return only }
        throw .invalid("apns-relay-environment", "name the environment with this header (or ?environment=): app \(app) sends to both")
    }
}
