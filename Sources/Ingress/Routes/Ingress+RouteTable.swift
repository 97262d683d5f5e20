public import HTTPServer
import Tracing

extension Ingress {
    /// Who may call a route, and so which of ``IngressSteps`` it passes.
    enum Access: Sendable {
        /// The API: every step, an API key required.
        case apiKey
        /// Probes for load balancers and orchestrators: counted, nothing else.
        case open
    }

    /// One row of the route table.
    struct Route: Sendable {
        var method: String
        /// The router's pattern (``HTTPServer/Router``); a last `{name...}` takes the rest of the path.
        var pattern: String
        var access: Access
        /// The route's handler, bound to the ingress' controllers.
        var endpoint: @Sendable (IngressControllers) -> IngressResponder

        /// An API route: its handler gets the caller's key and the request span.
        static func api(_ method: String, _ pattern: String, _ handler: @escaping @Sendable (IngressControllers) -> RouteHandler) -> Route {
            Route(method: method, pattern: pattern, access: .apiKey) { controllers in
                let handler = handler(controllers)
                return { request, context throws(IngressError) in
                    // Authentication runs before every API handler; without a key, fail closed.
                    guard let key = context.key else { throw IngressError.unauthorized }
                    return try await handler(Call(request: request, key: key, span: context.span))
                }
            }
        }

        /// A probe: no key, answered while draining.
        static func probe(_ method: String, _ pattern: String, _ handler: @escaping @Sendable (HealthProbes, HTTPRequest) -> HTTPResponse) -> Route {
            Route(method: method, pattern: pattern, access: .open) { controllers in
                let probes = controllers.probes
                return { request, _ in handler(probes, request) }
            }
        }
    }

    /// Every route of the ingress, declared once, each bound to the
    /// controller that serves it; docs/api.md documents each. To add a
    /// route: a row here and its handler in its controller
    /// (`Controllers/<Topic>Controller.swift`; a new controller also gets a
    /// member of ``IngressControllers``).
    static let routes: [Route] = [
        .api("POST", "/v1/send") { $0.send.send },
        .api("POST", "/v1/send/batch") { $0.batch.batch },
        .api("POST", "/v1/describe") { $0.send.describe },
        .api("POST", "/v1/channels") { $0.channels.createChannel },
        .api("GET", "/v1/channels") { $0.channels.listChannels },
        .api("GET", "/v1/channels/{channelId...}") { $0.channels.readChannel },
        .api("DELETE", "/v1/channels/{channelId...}") { $0.channels.deleteChannel },
        .api("GET", "/v1/dead-tokens") { $0.deadTokens.listDeadTokens },
        .api("POST", "/3/device/{token}") { $0.apnsCompatible.deviceCompatible },
        .api("GET", "/v1/admin/retry") { $0.admin.retryState },
        .api("PUT", "/v1/admin/retry") { $0.admin.setRetryState },
        .probe("GET", "/healthz") { $0.liveness($1) },
        .probe("GET", "/readyz") { $0.readiness($1) },
    ]

    /// Adds every route of ``routes`` to `router`, each behind its steps.
    public func install(on router: inout Router) {
        for route in Self.routes {
            router.add(route.method, route.pattern, steps.handler(route.access, route.endpoint(controllers)))
        }
    }
}
