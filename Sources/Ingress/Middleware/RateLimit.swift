import HTTPServer

/// The per-key token bucket (`rate_per_second`, `burst`): one token per
/// request, or 429 `RateLimited` with `retry-after`. After ``Authentication``:
/// the bucket is the key's, and an unknown caller spends nobody's tokens.
struct RateLimit: IngressMiddleware {
    let limiter: RateLimiter

    func handle(_ request: HTTPRequest, _ context: IngressContext, next: IngressResponder) async throws(IngressError) -> HTTPResponse {
        // No key (a route without authentication): nobody's bucket to charge.
        if let key = context.key, let rate = key.ratePerSecond {
            let burst = key.burst ?? rate
            if let wait = limiter.acquire(key: key.name, ratePerSecond: rate, burst: burst) {
                var error = IngressError(status: 429, type: .rateLimited, message: "API key \(key.name) is over its \(rate) requests/s limit")
                error.retryAfter = wait
                throw error
            }
        }
        return try await next(request, context)
    }
}
