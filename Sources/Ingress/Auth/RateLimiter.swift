import Synchronization
import RelayBasics

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
    /// The longest Retry-After the limiter names (a day).
    static let maximumWaitSeconds = 86_400

    /// nil when the request may go ahead; otherwise whole seconds to wait (≥ 1).
    func acquire(key: String, ratePerSecond: Double, burst: Double, cost: Double = 1) -> Int? {
        let now = clock.now
        return buckets.withLock { buckets in
            var bucket = buckets[key] ?? Bucket(tokens: burst, updated: now)
            let elapsed = bucket.updated.duration(to: now)
            let seconds = elapsed.seconds
            bucket.tokens = min(burst, bucket.tokens + seconds * ratePerSecond)
            bucket.updated = now
            defer { buckets[key] = bucket }
            if bucket.tokens >= cost {
                bucket.tokens -= cost
                return nil
            }
            let missing = cost - bucket.tokens
            // Bounded before the conversion: a tiny rate or a NaN must not trap.
            let wait = (missing / ratePerSecond).rounded(.up)
            guard wait.isFinite, wait < Double(Self.maximumWaitSeconds) else { return Self.maximumWaitSeconds }
            return max(1, Int(wait))
        }
    }
}
