public import APNs

/// How a send is retried: how many times, how long to wait, and for what.
///
/// Defaults follow the SDK: 3 retries, 100 ms base, 5 s cap, jitter on.
/// Change them only with a reason: they are tuned against iOS's Live Activity
/// budgets (MS015). *What* is retried is not a setting: the reason catalog's
/// ``APNsReason/RetryRule`` says, read by ``decide(_:_:random:)``.
public struct RetryPolicy: Sendable, Hashable {
    public var maxRetries: Int = 3
    /// First backoff step, in seconds.
    public var baseDelay: Double = 0.1
    /// Longest exponential step, in seconds (jitter is added after the cap).
    public var maxDelay: Double = 5.0
    /// Adds a random 0…`baseDelay` to every wait, so retries of a burst spread out.
    public var jitter: Bool = true

    public init() {}

    /// The policy actually applied to a send at `priority`.
    ///
    /// Priority 10 is budgeted by iOS: hammering a throttled token deepens the
    /// throttle. So priority-10 sends get at most 2 retries and twice the
    /// delays. The stretch only narrows retries and widens waits: a policy of
    /// 1 retry stays at 1.
    public func effective(for priority: Priority?) -> RetryPolicy {
        guard priority == .immediate else { return self }
        var stretched = self
        stretched.maxRetries = min(maxRetries, 2)
        stretched.baseDelay = baseDelay * 2
        stretched.maxDelay = maxDelay * 2
        return stretched
    }

    /// The wait before retry number `retry` (0 for the first retry), in seconds.
    ///
    /// `min(base × 2^retry, max)`, plus a jitter drawn from 0…base, and never
    /// less than a server's `Retry-After`.
    public func delay(
        beforeRetry retry: Int, retryAfter: Double? = nil,
        random: (ClosedRange<Double>) -> Double = { Double.random(in: $0) }
    ) -> Double {
        let exponential = min(baseDelay * Double(1 << min(retry, 30)), maxDelay)
        let jittered = jitter && baseDelay > 0 ? exponential + random(0...baseDelay) : exponential
        return max(jittered, retryAfter ?? 0)
    }
}
