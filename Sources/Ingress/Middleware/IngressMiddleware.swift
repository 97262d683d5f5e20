import HTTPServer
import Relay
import Tracing

/// One step of the ingress between the router and a route's handler, in the
/// manner of hummingbird's `RouterMiddleware`: it sees the request and the
/// context so far, and answers itself or passes both on to `next`.
///
/// The steps and their one order are declared in ``IngressSteps``; a route's
/// ``Ingress/Access`` picks which of them it passes.
protocol IngressMiddleware: Sendable {
    func handle(_ request: HTTPRequest, _ context: IngressContext, next: IngressResponder) async throws(IngressError) -> HTTPResponse
}

/// The rest of the chain, as a step sees it (the route's handler at its end).
typealias IngressResponder = @Sendable (HTTPRequest, IngressContext) async throws(IngressError) -> HTTPResponse

/// What the steps learn about a request on the way in.
struct IngressContext: Sendable {
    /// The route pattern the router matched (`/v1/channels/{channelId}`):
    /// the span's `http.route` and the metrics' `route` label.
    var route: String
    /// The request span, once ``RequestSpan`` has started it.
    var span: (any Span)?
    /// Its attribute writer, made with it; nil when it records nothing.
    var spanAttributes: SpanAttributeWriter?
    /// The caller's key, once ``Authentication`` has checked it.
    var key: APIKey?
}

extension Array where Element == any IngressMiddleware {
    /// The steps folded around `endpoint`, the first one outermost.
    func responder(around endpoint: @escaping IngressResponder) -> IngressResponder {
        var responder = endpoint
        for step in reversed() {
            let next = responder
            responder = { @Sendable (request: HTTPRequest, context: IngressContext) async throws(IngressError) -> HTTPResponse in
                try await step.handle(request, context, next: next)
            }
        }
        return responder
    }
}
