import RelayBasics

/// HTTP dates (RFC 9110 §5.6.7) to and from unix seconds, without Foundation's
/// formatters: the relay parses APNs' `Date` header on every response to watch
/// clock skew, and `Retry-After` on every 429.
public enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday

    /// Parses IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete
    /// RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
    /// (`Sun Nov  6 08:49:37 1994`). Returns unix seconds, or nil.
    public static func parse(_ text: String) -> Int64? {
        let fields = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        if fields.count == 6, fields[0].hasSuffix(","), fields[5] == "GMT" {
            // IMF-fixdate
            return make(year: Int(fields[3]), month: fields[2], day: Int(fields[1]), time: fields[4])
        }
        if fields.count == 4, fields[0].hasSuffix(","), fields[3] == "GMT" {
            // RFC 850: dd-Mon-yy
            let parts = fields[1].split(separator: "-").map(String.init)
            guard parts.count == 3, let shortYear = Int(parts[2]), parts[2].count == 2 else { return nil }
            let year = shortYear < 70 ? 2000 + shortYear : 1900 + shortYear
            return make(year: year, month: parts[1], day: Int(parts[0]), time: fields[2])
        }
        if fields.count == 5 {
            // asctime
            return make(year: Int(fields[4]), month: fields[1], day: Int(fields[2]), time: fields[3])
        }
        return nil
    }

    /// Formats unix seconds as IMF-fixdate.
    public static func format(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = CivilDate.date(days: days)
        let weekday = weekdays[Int(((days % 7) + 7) % 7)]
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(weekday), \(two(day)) \(months[Int(month) - 1]) \(year) "
            + "\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }

    private static func make(year: Int?, month: String, day: Int?, time: String) -> Int64? {
        guard let year, let day, let monthIndex = months.firstIndex(of: month) else { return nil }
        let clock = time.split(separator: ":").compactMap { Int($0) }
        // The year is bounded before any arithmetic: a hostile Date header
        // ("Sun, 06 Nov 9223372036854775807 …") must be unreadable, not a trap.
        guard (1...9999).contains(year), clock.count == 3, (0...23).contains(clock[0]), (0...59).contains(clock[1]), (0...60).contains(clock[2]),
              (1...31).contains(day), Int64(day) <= CivilDate.daysIn(month: Int64(monthIndex + 1), year: Int64(year))
        else { return nil }
        let days = CivilDate.days(year: Int64(year), month: Int64(monthIndex + 1), day: Int64(day))
        return days * 86_400 + Int64(clock[0] * 3600 + clock[1] * 60 + clock[2])
    }
}
