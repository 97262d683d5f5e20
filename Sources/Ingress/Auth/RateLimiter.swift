import Synchronization

/// Token buckets per API key: each key gets `burst` requests at once and
/// `ratePerSecond` sustained; beyond that the ingress answers 429 with the
/// seconds until a token is back.
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    private let buckets = Mutex<[String: Bucket]>([:])
    private let clock = ContinuousClock()

    /// nil when the request may go ahead; otherwise whole seconds to wait (≥ 1).
    func acquire(key: String, ratePerSecond: Double, burst: Double, cost: Double = 1) -> Int? {
        let now = clock.now
        return buckets.withLock { buckets in
            var bucket = buckets[key] ?? Bucket(tokens: burst, updated: now)
            let elapsed = bucket.updated.duration(to: now)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            bucket.tokens = min(burst, bucket.tokens + seconds * ratePerSecond)
            bucket.updated = now
            defer { buckets[key] = bucket }
            if bucket.tokens >= cost {
                bucket.tokens -= cost
                return nil
            }
            let missing = cost - bucket.tokens
            return max(1, Int((missing / ratePerSecond).rounded(.up)))
        }
    }
}
