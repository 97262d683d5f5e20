import HTTPServer

/// Counts every answered request by route and status, with the seconds it
/// took (``Ingress/RequestObserver``). Outermost, so it times every step.
struct RequestMetrics: IngressMiddleware {
    let observer: Ingress.RequestObserver?

    func handle(_ request: HTTPRequest, _ context: IngressContext, next: IngressResponder) async throws(IngressError) -> HTTPResponse {
        let started = ContinuousClock.now
        let response = try await next(request, context)
        observer?(context.route, response.status, started.duration(to: .now).seconds)
        return response
    }
}
