#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The wall clock in unix time, without Foundation.
///
/// The only place the relay reads the real-time clock for timestamps (audit
/// rows, log lines, span starts, JWT `iat`); durations use `ContinuousClock`.
public enum UnixTime {
    /// Now, in whole unix seconds.
    public static func nowSeconds() -> Int64 {
        Int64(nowNanoseconds() / 1_000_000_000)
    }

    /// Now, in nanoseconds since 1970.
    public static func nowNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }
}
