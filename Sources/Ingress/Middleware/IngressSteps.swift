import HTTPServer
import Tracing

/// Every step of the ingress, and the one order they run in.
///
/// An API route (``Ingress/Access/apiKey``) passes, outermost first:
///
/// 1. ``RequestMetrics``: counts and times the answer, whatever it is;
/// 2. ``RequestSpan``: the request span and the answer's `traceparent`;
/// 3. ``ErrorRendering``: every refusal below becomes its JSON answer;
/// 4. ``DrainGate``: 503 `Draining` once the relay drains, before anything else;
/// 5. ``ConcurrencyCap``: 503 `Overloaded` past ingress.max_concurrent_requests;
/// 6. ``Authentication``: 401 without a valid key;
/// 7. ``RateLimit``: 429 once the key's bucket is empty (a known key's bucket only).
///
/// A probe (``Ingress/Access/open``) passes metrics and error rendering only:
/// it needs no key, answers while draining (`/readyz` says so), and its
/// `traceparent` comes from ``Ingress/prepare(_:)`` like the router's 404.
struct IngressSteps: Sendable {
    /// Owns the draining flag (``Ingress/beginDraining(batchesStartFor:)`` closes it).
    let drain = DrainGate()
    /// Owns the count of requests in progress (``Ingress/requestsInFlight``).
    let concurrency: ConcurrencyCap
    /// The per-key buckets the rate limit charges, which a batch also charges for its other sends.
    let limiter: RateLimiter
    /// Told of every answered request (the HTTP/2 APNs ingress counts with it too).
    let observer: Ingress.RequestObserver?
    private let api: [any IngressMiddleware]
    private let probe: [any IngressMiddleware]

    init(
        observer: Ingress.RequestObserver?, tracer: any Tracer, waitUntilRecorded: @escaping @Sendable () async -> Void,
        maximumConcurrentRequests: Int, keyring: APIKeyring, limiter: RateLimiter
    ) {
        concurrency = ConcurrencyCap(limit: maximumConcurrentRequests)
        self.limiter = limiter
        self.observer = observer
        let metrics = RequestMetrics(observer: observer)
        let errors = ErrorRendering(waitUntilRecorded: waitUntilRecorded)
        // The one order, outermost first (see above).
        api = [
            metrics, RequestSpan(tracer: tracer), errors, drain, concurrency, Authentication(keyring: keyring), RateLimit(limiter: limiter),
        ]
        probe = [metrics, errors]
    }

    /// The steps a route with `access` passes, outermost first.
    func chain(for access: Ingress.Access) -> [any IngressMiddleware] {
        switch access {
        case .apiKey: api
        case .open: probe
        }
    }

    /// The router's handler for a route: its steps around `endpoint`.
    func handler(_ access: Ingress.Access, _ endpoint: @escaping IngressResponder) -> HTTPHandler {
        let responder = chain(for: access).responder(around: endpoint)
        return { request in
            do throws(IngressError) {
                return try await responder(request, IngressContext(route: request.route ?? request.path))
            } catch {
                // Unreached: every chain renders its errors; kept total all the same.
                return error.response
            }
        }
    }
}
