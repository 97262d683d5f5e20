public import APNs

/// The `Retry-After` header: delay-seconds or an HTTP date.
public enum RetryAfter {
    /// Seconds to wait from `now` (unix seconds); nil when absent or unreadable.
    /// A date in the past means "now" (0).
    public static func seconds(from header: String?, now: Int64) -> Double? {
        guard let header = header?.trimmingWhitespace(), !header.isEmpty else { return nil }
        if header.allSatisfy(\.isASCIIDigit), let seconds = Int64(header) { return Double(seconds) }
        guard let date = HTTPDate.parse(header) else { return nil }
        return Double(max(0, date - now))
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars.drop(while: { $0 == " " || $0 == "\t" })
        var trimmed = String(String.UnicodeScalarView(scalars))
        while trimmed.last == " " || trimmed.last == "\t" { trimmed.removeLast() }
        return trimmed
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
