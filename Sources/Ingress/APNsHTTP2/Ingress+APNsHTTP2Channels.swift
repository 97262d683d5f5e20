import APNs
import HTTPServer
import Relay
import RelayBasics

extension Ingress {
    /// The route values the HTTP/2 APNs ingress' channel and broadcast
    /// requests are counted and traced under (`route` label), one per path
    /// APNs serves them on (create, read and delete share `…/channels`).
    static let apnsHTTP2ChannelsRoute = "h2:/1/apps/{bundle}/channels"
    static let apnsHTTP2AllChannelsRoute = "h2:/1/apps/{bundle}/all-channels"
    static let apnsHTTP2BroadcastRoute = "h2:/4/broadcasts/apps/{bundle}"

    /// What a request on the HTTP/2 APNs ingress is, when its path is one of
    /// APNs' channel or broadcast paths: the request as the channel send
    /// reads it (route, `bundle` path parameter, the listener's environment),
    /// or APNs' 405 MethodNotAllowed for another method on such a path.
    /// Nil for any other path.
    ///
    /// When the relay keeps idempotency keys (`keyed`), a create's or a
    /// broadcast's `apns-request-id` becomes its idempotency key, as
    /// `apns-id` does for `/3/device`: a client's retry of a request whose
    /// answer it lost is answered from the first, instead of making a second
    /// channel or reaching every device on the channel twice.
    static func apnsHTTP2ChannelRequest(_ request: HTTPRequest, environment: String?, keyed: Bool) -> APNsChannelRouting? {
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: false)
        let route: String
        let bundle: Substring
        switch segments.count {
        case 5 where segments[0].isEmpty && segments[1] == "1" && segments[2] == "apps" && segments[4] == "channels":
            (route, bundle) = (apnsHTTP2ChannelsRoute, segments[3])
        case 5 where segments[0].isEmpty && segments[1] == "1" && segments[2] == "apps" && segments[4] == "all-channels":
            (route, bundle) = (apnsHTTP2AllChannelsRoute, segments[3])
        case 5 where segments[0].isEmpty && segments[1] == "4" && segments[2] == "broadcasts" && segments[3] == "apps":
            (route, bundle) = (apnsHTTP2BroadcastRoute, segments[4])
        default:
            return nil
        }
        guard !bundle.isEmpty else { return nil }
        var request = request
        request.route = route
        guard apnsChannelKind(request) != nil else {
            let allowed = route == apnsHTTP2ChannelsRoute ? "POST, GET or DELETE" : route == apnsHTTP2AllChannelsRoute ? "GET" : "POST"
            return .refusal(compatibleResponse(.failure(IngressError(status: 405, type: .methodNotAllowed, message: "use \(allowed)")), .apns))
        }
        request.pathParameters["bundle"] = String(bundle)
        if let environment, request.header("apns-relay-environment") == nil {
            request.headers.append(HTTPHeader("apns-relay-environment", environment))
        }
        let kind = apnsChannelKind(request)
        if keyed, kind == .create || kind == .broadcast, request.header("idempotency-key") == nil, let id = request.header("apns-request-id") {
            request.headers.append(HTTPHeader("idempotency-key", "apns-request-id:" + id.lowercased()))
        }
        return .request(request)
    }

    /// A request on one of APNs' channel or broadcast paths: to be sent, or refused at once.
    enum APNsChannelRouting {
        case request(HTTPRequest)
        case refusal(HTTPResponse)
    }

    /// Which of APNs' channel requests a routed request is, by its route and method.
    static func apnsChannelKind(_ request: HTTPRequest) -> RawChannelRequest.Kind? {
        switch (request.route, request.method) {
        case (apnsHTTP2ChannelsRoute, "POST"): .create
        case (apnsHTTP2ChannelsRoute, "GET"): .read
        case (apnsHTTP2ChannelsRoute, "DELETE"): .delete
        case (apnsHTTP2AllChannelsRoute, "GET"): .list
        case (apnsHTTP2BroadcastRoute, "POST"): .broadcast
        default: nil
        }
    }

    /// A channel create, read, list or delete, or a broadcast, on the HTTP/2 APNs
    /// ingress: the app is the one whose bundle id the path names (one the
    /// caller's key may use, else 403 TopicDisallowed), the `apns-*` headers
    /// and body go to APNs as the client wrote them (``RequestBuilder/rawChannel(_:)``
    /// checks them first), through the same send as the relay's own channel
    /// routes (preflight, retry, kill switch, audit row, trace). Answers are
    /// APNs': its status, `apns-request-id`, `apns-channel-id` (create, read)
    /// and body (list, read); refusals `{"reason": …}` with `apns-request-id`.
    func apnsChannelSend(_ call: Call) async -> HTTPResponse {
        do throws(IngressError) {
            guard let kind = Self.apnsChannelKind(call.request) else {
                throw IngressError(status: 404, type: .notFound, message: "not a channel or broadcast request")
            }
            let app = try apnsChannelApp(call, bundleID: call.request.pathParameters["bundle"] ?? "")
            try authorize(call.key, app: app)
            let environment = try compatibleEnvironment(call, app: app)
            let headers = call.request.headers.filter { $0.name.hasPrefix("apns-") && !$0.name.hasPrefix("apns-relay-") }
            try Self.checkSizes(of: headers)
            let operation = RelayOperation.rawChannel(RawChannelRequest(kind: kind, headers: headers, body: call.request.body))
            guard let key = try Self.headerIdempotencyKey(call.request) else {
                return Self.apnsChannelResponse(.success(try await perform(app, environment, operation, call)))
            }
            // What APNs would be sent: the kind, the app and environment, the apns-* headers, the body.
            let sentHeaders = headers.map { "\($0.name):\($0.value)" }.sorted()
            let canonical = Self.canonical(
                "h2-channel-" + kind.rawValue, [app, environment.rawValue] + sentHeaders, .string(String(decoding: call.request.body, as: UTF8.self)))
            let keyed = Self.keyedSend(key, field: Self.idempotencyHeader, app: app, call: call, canonical: canonical)
            let run = { (call: Call) async throws(IngressError) -> SendResult in try await self.perform(app, environment, operation, call) }
            switch try await idempotency.runKeyed(keyed, call, render: Self.apnsChannelResponse, run) {
            case .replay(let answer):
                return Self.replayResponse(answer)
            case .sent(let result):
                let response = Self.apnsChannelResponse(result)
                await idempotency.recordKeyed(keyed, result, response)
                return response
            }
        } catch {
            var error = error
            // The request's own apns-request-id, the first send's when it repeated one (the idempotency key's refusals).
            if error.apnsID == nil { error.apnsID = call.request.header("apns-request-id").flatMap(APNsID.init) }
            return Self.apnsChannelResponse(.failure(error))
        }
    }

    /// APNs' answer: its status, `apns-request-id`, `apns-channel-id`,
    /// `apns-unique-id` and body; a refusal `{"reason": …}` with the send's `apns-request-id`.
    static func apnsChannelResponse(_ result: Result<SendResult, IngressError>) -> HTTPResponse {
        switch result {
        case .success(let result):
            var headers = [HTTPHeader("apns-request-id", result.apnsID.description)]
            if let channel = result.channelID { headers.append(HTTPHeader("apns-channel-id", channel)) }
            if let unique = result.apnsUniqueID { headers.append(HTTPHeader("apns-unique-id", unique)) }
            // APNs' bodies here are JSON (the channel list, a channel read); 201 and 204 carry none.
            if !result.body.isEmpty { headers.append(HTTPHeader("content-type", "application/json")) }
            return HTTPResponse(status: result.status, headers: headers, body: result.body)
        case .failure(let error):
            var response = compatibleResponse(.failure(error), .apns)
            // These requests are named by apns-request-id, as APNs names them in its answers.
            response.headers = response.headers.map { $0.name == "apns-id" ? HTTPHeader("apns-request-id", $0.value) : $0 }
            return response
        }
    }

    /// The app whose bundle id is `bundleID` among those the caller's key
    /// may use; 403 (TopicDisallowed) when there is none, so a key never
    /// reaches another app's channels, nor learns which bundle ids the relay serves.
    private func apnsChannelApp(_ call: Call, bundleID: String) throws(IngressError) -> String {
        let matches = service.configuration.apps.filter { $0.bundleID == bundleID && call.key.allows(app: $0.name) }
        if matches.count == 1 { return matches[0].name }
        if matches.isEmpty {
            throw IngressError(status: 403, type: .forbidden, message: "no app this key may use has the bundle id in the path", field: "bundle-id")
        }
        // Two apps of one bundle id (two configurations of one app): the header picks.
        if let named = call.request.header("apns-relay-app"), matches.contains(where: { $0.name == named }) { return named }
        throw .invalid("apns-relay-app", "name the app with this header: more than one of this key's apps has this bundle id")
    }
}
