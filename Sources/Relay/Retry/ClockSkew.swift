import APNs
public import Logging
import Synchronization

/// Watches the difference between APNs' `Date` header and the local clock.
///
/// A clock more than an hour off makes every JWT look expired
/// (ExpiredProviderToken, MS030); the relay warns at 5 minutes so NTP gets
/// fixed before that. The latest value feeds `apns_relay_clock_skew_seconds`.
public final class ClockSkewMonitor: Sendable {
    /// Skew beyond which the monitor warns.
    public static let warningThresholdSeconds: Int64 = 300

    private struct State {
        var latest: Int64?
        var warned = false
    }

    private let state = Mutex(State())
    private let logger: Logger

    public init(logger: Logger) { self.logger = logger }

    /// Local clock minus APNs' clock, in seconds, from the last `Date` seen.
    public var latestSkewSeconds: Int64? { state.withLock { $0.latest } }

    /// Records one response's `Date` header against local time `now`.
    /// Returns the skew, or nil when the header is missing or unreadable.
    @discardableResult
    public func observe(dateHeader: String?, now: Int64) -> Int64? {
        guard let header = dateHeader, let serverTime = HTTPDate.parse(header) else { return nil }
        let skew = now - serverTime
        let shouldWarn = state.withLock { state -> Bool in
            state.latest = skew
            guard abs(skew) > Self.warningThresholdSeconds, !state.warned else { return false }
            state.warned = true
            return true
        }
        if shouldWarn {
            logger.warning(
                "local clock differs from APNs by more than 5 minutes; provider tokens may be rejected as expired (MS030): sync NTP",
                metadata: ["clock_skew_seconds": "\(skew)"])
        }
        return skew
    }
}
