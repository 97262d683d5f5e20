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
        /// The route's handler on a given ingress.
        var endpoint: @Sendable (Ingress) -> IngressResponder

        /// An API route: its handler gets the caller's key and the request span.
        static func api(_ method: String, _ pattern: String, _ handler: @escaping @Sendable (Ingress) -> RouteHandler) -> Route {
            Route(method: method, pattern: pattern, access: .apiKey) { ingress in
                let handler = handler(ingress)
                return { request, context throws(IngressError) in
                    // Authentication runs before every API handler; without a key, fail closed.
                    guard let key = context.key else { throw IngressError.unauthorized }
                    return try await handler(Call(request: request, key: key, span: context.span))
                }
            }
        }

        /// A probe: no key, answered while draining.
        static func probe(_ method: String, _ pattern: String, _ handler: @escaping @Sendable (HealthProbes, HTTPRequest) -> HTTPResponse) -> Route {
            Route(method: method, pattern: pattern, access: .open) { ingress in
                let probes = ingress.probes
                return { request, _ in handler(probes, request) }
            }
        }
    }

    /// Every route of the ingress, declared once; docs/api.md documents each.
    /// To add a route: a row here and its handler in `Routes/Ingress+<Topic>.swift`.
    static let routes: [Route] = [
        .api("POST", "/v1/send") { $0.send },
        .api("POST", "/v1/send/batch") { $0.batch },
        .api("POST", "/v1/describe") { $0.describe },
        .api("POST", "/v1/channels") { $0.createChannel },
        .api("GET", "/v1/channels") { $0.listChannels },
        .api("GET", "/v1/channels/{channelId...}") { $0.readChannel },
        .api("DELETE", "/v1/channels/{channelId...}") { $0.deleteChannel },
        .api("GET", "/v1/dead-tokens") { $0.deadTokenController.listDeadTokens },
        .api("POST", "/3/device/{token}") { $0.deviceCompatible },
        .api("GET", "/v1/admin/retry") { $0.admin.retryState },
        .api("PUT", "/v1/admin/retry") { $0.admin.setRetryState },
        .probe("GET", "/healthz") { $0.liveness($1) },
        .probe("GET", "/readyz") { $0.readiness($1) },
    ]

    /// The admin routes' controller, with what they use of this ingress.
    var admin: AdminController { AdminController(killSwitch: service.killSwitch, instance: configuration.instance, logger: logger) }

    /// The dead-token feed's controller, with what it uses of this ingress.
    var deadTokenController: DeadTokenController { DeadTokenController(deadTokens: deadTokens, service: service, logger: logger) }

    /// Adds every route of ``routes`` to `router`, each behind its steps.
    public func install(on router: inout Router) {
        for route in Self.routes {
            router.add(route.method, route.pattern, steps.handler(route.access, route.endpoint(self)))
        }
    }
}
