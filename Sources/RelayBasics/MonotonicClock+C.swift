import Glibc

/// `CLOCK_MONOTONIC` in nanoseconds since an arbitrary start: the one clock
/// for deadlines and intervals (the HTTP/2 loops' timers, the audit writer's
/// pacing, the batch deadlines' watcher, ``MonotonicCondition``'s waits),
/// which no step of the wall clock moves.
public enum MonotonicClock {
    public static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// `seconds` in the nanoseconds of ``now()``: negative (or NaN) counts
    /// as none, and past a century as a century, so no setting's product can
    /// trap the conversion or overflow a deadline.
    public static func nanoseconds(_ seconds: Double) -> UInt64 {
        guard seconds > 0 else { return 0 }
        return UInt64(min(seconds, 3.2e9) * 1_000_000_000)
    }
}
