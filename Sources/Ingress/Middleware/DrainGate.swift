import HTTPServer
import Synchronization

/// Refuses every request once the relay drains: 503 `Draining` with
/// `retry-after`, before anything else is checked (a key or a rate is no
/// reason to keep a shutting-down instance busy).
final class DrainGate: IngressMiddleware {
    private let draining = Atomic<Bool>(false)

    var isDraining: Bool { draining.load(ordering: .acquiring) }

    func close() { draining.store(true, ordering: .releasing) }

    func handle(_ request: HTTPRequest, _ context: IngressContext, next: IngressResponder) async throws(IngressError) -> HTTPResponse {
        if isDraining {
            var error = IngressError(status: 503, type: .draining, message: "this relay instance is shutting down; retry on another")
            error.retryAfter = 1
            throw error
        }
        return try await next(request, context)
    }
}
