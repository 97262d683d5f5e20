import HTTPServer
import APNs
import Relay
import RelayBasics
import Tracing

/// The HTTP/2 APNs-compatible listener (`apns_ingress:`): its requests
/// mapped onto the relay's (device sends, channel and broadcast requests),
/// and its handler.
extension APNsCompatibleController {
    /// The route value the HTTP/2 APNs ingress' sends are counted and traced
    /// under (`route` label of the request metrics): apart from the HTTP/1.1
    /// listener's `/3/device/{token}`, so the two ingresses can be told apart.
    static let apnsHTTP2Route = "h2:/3/device/{token}"

    /// The handler of the HTTP/2 APNs-compatible listener (`apns_ingress:`):
    /// `POST /3/device/<token>` (and APNs' channel and broadcast requests,
    /// ``apnsChannelSend(_:)``) authenticated by the caller's own provider
    /// token (``ProviderAuthentication``), through the same steps as the
    /// API (metrics, span, drain, concurrency, per-key rate) and the same
    /// send as the HTTP/1.1 `/3/device/{token}` route (``deviceSend(_:vocabulary:)``),
    /// every answer in APNs' words.
    ///
    /// - Parameters:
    ///   - steps: the API's steps, whose drain, concurrency count and rate
    ///     limiter this listener shares.
    ///   - environment: the APNs environment this listener plays (as APNs
    ///     has one host for each); nil: the app's only one, or the
    ///     `apns-relay-environment` header.
    ///   - now: seconds since the epoch, for provider tokens' age.
    /// - Throws: when a configured provider public key cannot be read.
    func http2Handler(
        steps base: IngressSteps, tracer: any Tracer, keyring: APIKeyring, environment: String?, now: @escaping @Sendable () -> Int64
    ) throws -> HTTPHandler {
        let steps = IngressSteps.apnsHTTP2(
            base: base, tracer: tracer, waitUntilRecorded: { [service] in await service.waitUntilRecorded() },
            authentication: try ProviderAuthentication(keyring: keyring, now: now))
        let responder = steps.responder { [self] (request: HTTPRequest, context: IngressContext) async throws(IngressError) -> HTTPResponse in
            guard let key = context.key else { throw IngressError.unauthorized }
            return await deviceSend(Ingress.Call(request: request, key: key, span: context.span), vocabulary: .apns)
        }
        let channels = steps.responder { [self] (request: HTTPRequest, context: IngressContext) async throws(IngressError) -> HTTPResponse in
            guard let key = context.key else { throw IngressError.unauthorized }
            return await apnsChannelSend(Ingress.Call(request: request, key: key, span: context.span))
        }
        let keyed = idempotency.keepsKeys
        return { request in
            guard let request = Self.apnsHTTP2Request(request, environment: environment, keyed: keyed) else {
                // APNs' channel and broadcast paths (below), else APNs' 404 or 405.
                switch Self.apnsHTTP2ChannelRequest(request, environment: environment, keyed: keyed) {
                case .request(let request):
                    do throws(IngressError) {
                        return try await channels(request, IngressContext(route: request.route ?? request.path))
                    } catch {
                        return APNsAnswers.compatibleResponse(.failure(error), .apns)
                    }
                case .refusal(let refusal): return refusal
                case nil: return Self.apnsPathRefusal(request)
                }
            }
            do throws(IngressError) {
                return try await responder(request, IngressContext(route: Self.apnsHTTP2Route))
            } catch {
                return APNsAnswers.compatibleResponse(.failure(error), .apns)
            }
        }
    }

    /// The request as the shared send reads it, or nil when its method or
    /// path is not APNs' `POST /3/device/<token>`. The listener's environment
    /// becomes `apns-relay-environment` unless the caller named one. The
    /// client's `apns-id` (every APNs library sends one) becomes the send's
    /// idempotency key when the relay keeps keys: a library's retry of a
    /// request it never saw answered is answered from the first send instead
    /// of reaching the device twice.
    static func apnsHTTP2Request(_ request: HTTPRequest, environment: String?, keyed: Bool) -> HTTPRequest? {
        let prefix = "/3/device/"
        guard request.method == "POST", request.path.hasPrefix(prefix) else { return nil }
        // In UTF-8 code units: the prefix is ASCII, so the cut is on a character
        // boundary, and no Character or Foundation search runs per request.
        let token = String(Substring(request.path.utf8.dropFirst(prefix.utf8.count)))
        // Scanned as a buffer (allUTF8Bytes), not through the UTF8View's iterator.
        guard !token.isEmpty, token.allUTF8Bytes(satisfy: { $0 != UInt8(ascii: "/") }) else { return nil }
        var request = request
        request.pathParameters["token"] = token
        request.route = apnsHTTP2Route
        if let environment, request.header("apns-relay-environment") == nil {
            request.headers.append(HTTPHeader("apns-relay-environment", environment))
        }
        if keyed, request.header("idempotency-key") == nil, let apnsID = request.header("apns-id") {
            request.headers.append(HTTPHeader("idempotency-key", "apns-id:" + apnsID.lowercased()))
        }
        return request
    }

    /// APNs' answers to a path or method it does not serve: 405 MethodNotAllowed, 404 BadPath.
    static func apnsPathRefusal(_ request: HTTPRequest) -> HTTPResponse {
        let error = request.path.hasPrefix("/3/device/") && request.method != "POST"
            ? IngressError(status: 405, type: .methodNotAllowed, message: "use POST")
            : IngressError(status: 404, type: .notFound, message: "this listener serves APNs' /3/device/<token>, /1/apps/<bundle-id>/channels, /1/apps/<bundle-id>/all-channels and /4/broadcasts/apps/<bundle-id>")
        return APNsAnswers.compatibleResponse(.failure(error), .apns)
    }
}

extension APNsCompatibleController {
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
            return .refusal(APNsAnswers.compatibleResponse(.failure(IngressError(status: 405, type: .methodNotAllowed, message: "use \(allowed)")), .apns))
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
    func apnsChannelSend(_ call: Ingress.Call) async -> HTTPResponse {
        do throws(IngressError) {
            guard let kind = Self.apnsChannelKind(call.request) else {
                throw IngressError(status: 404, type: .notFound, message: "not a channel or broadcast request")
            }
            let app = try apnsChannelApp(call, bundleID: call.request.pathParameters["bundle"] ?? "")
            try service.authorize(call.key, app: app)
            let environment = try compatibleEnvironment(call, app: app)
            let headers = call.request.headers.filter { $0.name.hasPrefix("apns-") && !$0.name.hasPrefix("apns-relay-") }
            try Self.checkSizes(of: headers)
            let operation = RelayOperation.rawChannel(RawChannelRequest(kind: kind, headers: headers, body: call.request.body))
            guard let key = try IdempotencyKeys.headerIdempotencyKey(call.request) else {
                return APNsAnswers.apnsChannelResponse(.success(try await sends.perform(app, environment, operation, call)))
            }
            // What APNs would be sent: the kind, the app and environment, the apns-* headers, the body.
            let sentHeaders = headers.map { "\($0.name):\($0.value)" }.sorted()
            let canonical = IdempotencyKeys.canonical(
                "h2-channel-" + kind.rawValue, [app, environment.rawValue] + sentHeaders, .string(String(decoding: call.request.body, as: UTF8.self)))
            let keyed = IdempotencyKeys.keyedSend(key, field: IdempotencyKeys.idempotencyHeader, app: app, call: call, canonical: canonical)
            let run = { (call: Ingress.Call) async throws(IngressError) -> SendResult in try await self.sends.perform(app, environment, operation, call) }
            switch try await idempotency.runKeyed(keyed, call, render: APNsAnswers.apnsChannelResponse, run) {
            case .replay(let answer):
                return SendAnswers.replayResponse(answer)
            case .sent(let result):
                let response = APNsAnswers.apnsChannelResponse(result)
                await idempotency.recordKeyed(keyed, result, response)
                return response
            }
        } catch {
            var error = error
            // The request's own apns-request-id, the first send's when it repeated one (the idempotency key's refusals).
            if error.apnsID == nil { error.apnsID = call.request.header("apns-request-id").flatMap(APNsID.init) }
            return APNsAnswers.apnsChannelResponse(.failure(error))
        }
    }

    /// The app whose bundle id is `bundleID` among those the caller's key
    /// may use; 403 (TopicDisallowed) when there is none, so a key never
    /// reaches another app's channels, nor learns which bundle ids the relay serves.
    private func apnsChannelApp(_ call: Ingress.Call, bundleID: String) throws(IngressError) -> String {
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

extension IngressSteps {
    /// The HTTP/2 APNs ingress' steps, in the API's order with two
    /// replaced: errors rendered in APNs' words, and the provider token
    /// instead of the API key. Drain, concurrency and rate limit are the
    /// API's own (one draining flag, one concurrency count, one bucket per key).
    static func apnsHTTP2(
        base: IngressSteps, tracer: any Tracer, waitUntilRecorded: @escaping @Sendable () async -> Void,
        authentication: ProviderAuthentication
    ) -> [any IngressMiddleware] {
        [
            RequestMetrics(observer: base.observer), RequestSpan(tracer: tracer),
            // Every refusal in APNs' shape (status, `{"reason", …}`), never the relay's envelope.
            ErrorRendering(waitUntilRecorded: waitUntilRecorded) { APNsAnswers.compatibleResponse(.failure($0), .apns) },
            base.drain, base.concurrency, authentication, RateLimit(limiter: base.limiter),
        ]
    }
}
