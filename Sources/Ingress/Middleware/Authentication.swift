import HTTPServer
import Relay
import Tracing

/// The caller's API key from `Authorization: Bearer …`, or 401 `Unauthorized`
/// with `www-authenticate`. The key goes into the context (and its name, never
/// the key, onto the span).
struct Authentication: IngressMiddleware {
    let keyring: APIKeyring

    func handle(_ request: HTTPRequest, _ context: IngressContext, next: IngressResponder) async throws(IngressError) -> HTTPResponse {
        guard let key = keyring.authenticate(authorization: request.header("authorization")) else { throw IngressError.unauthorized }
        context.spanAttributes?.set("apns_relay.caller", key.name)
        var context = context
        context.key = key
        return try await next(request, context)
    }
}
