#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Wall-clock helpers in unix time, without Foundation.
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

    /// An RFC 3339 UTC timestamp with millisecond precision, e.g. `2026-11-22T15:04:05.123Z`.
    public static func rfc3339(nanoseconds: UInt64) -> String {
        let milliseconds = Int64(nanoseconds / 1_000_000)
        let seconds = milliseconds / 1000
        let days = seconds / 86_400
        let secondOfDay = seconds % 86_400
        let (year, month, day) = HTTPDate.civil(fromDays: days)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):"
            + "\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(milliseconds % 1000, 3))Z"
    }
}
