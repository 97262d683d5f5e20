public import HTTPServer
import RelayBasics
import Tracing

extension Ingress {
    /// The route value the HTTP/2 APNs ingress' sends are counted and traced
    /// under (`route` label of the request metrics): apart from the HTTP/1.1
    /// listener's `/3/device/{token}`, so the two ingresses can be told apart.
    public static let apnsHTTP2Route = "h2:/3/device/{token}"

    /// The handler of the HTTP/2 APNs-compatible listener (`apns_ingress:`):
    /// `POST /3/device/<token>` (and APNs' channel and broadcast requests,
    /// ``apnsChannelSend(_:)``) authenticated by the caller's own provider
    /// token (``ProviderAuthentication``), through the same steps as the
    /// API (metrics, span, drain, concurrency, per-key rate) and the same
    /// send as the HTTP/1.1 `/3/device/{token}` route (``deviceSend(_:vocabulary:)``),
    /// every answer in APNs' words.
    ///
    /// - Parameters:
    ///   - environment: the APNs environment this listener plays (as APNs
    ///     has one host for each); nil: the app's only one, or the
    ///     `apns-relay-environment` header.
    ///   - now: seconds since the epoch, for provider tokens' age.
    /// - Throws: when a configured provider public key cannot be read.
    public func apnsHTTP2Handler(environment: String?, now: @escaping @Sendable () -> Int64) throws -> HTTPHandler {
        let steps = IngressSteps.apnsHTTP2(
            base: self.steps, tracer: tracer, waitUntilRecorded: { [service] in await service.waitUntilRecorded() },
            authentication: try ProviderAuthentication(keyring: keyring, now: now))
        let responder = steps.responder { [self] (request: HTTPRequest, context: IngressContext) async throws(IngressError) -> HTTPResponse in
            guard let key = context.key else { throw IngressError.unauthorized }
            return await deviceSend(Call(request: request, key: key, span: context.span), vocabulary: .apns)
        }
        let channels = steps.responder { [self] (request: HTTPRequest, context: IngressContext) async throws(IngressError) -> HTTPResponse in
            guard let key = context.key else { throw IngressError.unauthorized }
            return await apnsChannelSend(Call(request: request, key: key, span: context.span))
        }
        let keyed = idempotency.keepsKeys
        return { request in
            guard let request = Self.apnsHTTP2Request(request, environment: environment, keyed: keyed) else {
                // APNs' channel and broadcast paths (Ingress+APNsHTTP2Channels.swift), else APNs' 404 or 405.
                switch Self.apnsHTTP2ChannelRequest(request, environment: environment, keyed: keyed) {
                case .request(let request):
                    do throws(IngressError) {
                        return try await channels(request, IngressContext(route: request.route ?? request.path))
                    } catch {
                        return Self.compatibleResponse(.failure(error), .apns)
                    }
                case .refusal(let refusal): return refusal
                case nil: return Self.apnsPathRefusal(request)
                }
            }
            do throws(IngressError) {
                return try await responder(request, IngressContext(route: Self.apnsHTTP2Route))
            } catch {
                return Self.compatibleResponse(.failure(error), .apns)
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
        return compatibleResponse(.failure(error), .apns)
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
            ErrorRendering(waitUntilRecorded: waitUntilRecorded) { Ingress.compatibleResponse(.failure($0), .apns) },
            base.drain, base.concurrency, authentication, RateLimit(limiter: base.limiter),
        ]
    }
}
