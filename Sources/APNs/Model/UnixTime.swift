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
        // Digits straight into one buffer: the audit formats three of these per row.
        var text = [UInt8]()
        text.reserveCapacity(24)
        func digits(_ value: Int64, _ width: Int) {
            var divisor: Int64 = 1
            for _ in 1..<width { divisor *= 10 }
            while divisor * 10 <= value { divisor *= 10 }  // more digits than the width: print them all
            var rest = value
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(year, 4); text.append(UInt8(ascii: "-")); digits(month, 2); text.append(UInt8(ascii: "-")); digits(day, 2)
        text.append(UInt8(ascii: "T")); digits(secondOfDay / 3600, 2); text.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2); text.append(UInt8(ascii: ":")); digits(secondOfDay % 60, 2)
        text.append(UInt8(ascii: ".")); digits(milliseconds % 1000, 3); text.append(UInt8(ascii: "Z"))
        return String(decoding: text, as: UTF8.self)
    }
}
