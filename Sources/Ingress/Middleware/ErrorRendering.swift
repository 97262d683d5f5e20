import HTTPServer
import Tracing

/// Turns an ``IngressError`` thrown by any later step or the handler into its
/// answer (by default the JSON envelope, `retry-after`, `www-authenticate`,
/// `apns-id`; the HTTP/2 APNs ingress renders APNs' shape instead), marking
/// the span failed for a 5xx. Never throws: the steps outside it (span,
/// metrics) always see a response.
struct ErrorRendering: IngressMiddleware {
    /// Returns once every audit row recorded so far is durable.
    let waitUntilRecorded: @Sendable () async -> Void
    /// The answer to a refusal.
    var render: @Sendable (IngressError) -> HTTPResponse = { $0.response }

    func handle(_ request: HTTPRequest, _ context: IngressContext, next: IngressResponder) async throws(IngressError) -> HTTPResponse {
        do {
            return try await next(request, context)
        } catch {
            // The promise: an answered send has its row, whatever crashes next.
            if error.isRecordedRefusal { await waitUntilRecorded() }
            if error.status >= 500 { context.span?.setStatus(SpanStatus(code: .error, message: error.type.rawValue)) }
            return render(error)
        }
    }
}
