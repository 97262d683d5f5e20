import HTTPServer
import Synchronization

/// At most `limit` requests past this step at once; beyond it 503
/// `Overloaded` with `retry-after` (ingress.max_concurrent_requests).
final class ConcurrencyCap: IngressMiddleware {
    let limit: Int
    private let running = Atomic<Int>(0)

    init(limit: Int) { self.limit = limit }

    /// Requests past this step now.
    var inFlight: Int { running.load(ordering: .relaxed) }

    func handle(_ request: HTTPRequest, _ context: IngressContext, next: IngressResponder) async throws(IngressError) -> HTTPResponse {
        let count = running.wrappingAdd(1, ordering: .relaxed).newValue
        defer { running.wrappingSubtract(1, ordering: .relaxed) }
        if count > limit {
            var error = IngressError(status: 503, type: .overloaded, message: "more than \(limit) requests in progress")
            error.retryAfter = 1
            throw error
        }
        return try await next(request, context)
    }
}
