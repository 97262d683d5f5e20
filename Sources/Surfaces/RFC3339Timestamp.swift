import Foundation

/// RFC 3339 date-times exactly as the contract's `updatedAt` pattern allows:
/// `YYYY-MM-DDTHH:MM[:SS[.fraction]](Z|±HH:MM)`, uppercase `T` and `Z`, real
/// calendar days (leap years included), hours 00–23; and, because the
/// schema also names `format: date-time`, seconds are required.
enum RFC3339Timestamp {
    /// Unix seconds for `text`, or nil when it breaks the rule.
    static func parse(_ text: String) -> Double? {
        let bytes = Array(text.utf8)
        var index = 0

        func digits(_ count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<(index + count)] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            index += count
            return value
        }
        func expect(_ character: Character) -> Bool {
            guard index < bytes.count, bytes[index] == character.asciiValue else { return false }
            index += 1
            return true
        }

        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2),
              expect("T"), let hour = digits(2), hour <= 23, expect(":"), let minute = digits(2), minute <= 59,
              expect(":"), let second = digits(2), second <= 59
        else { return nil }

        var fraction = 0.0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            let start = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                fraction += Double(bytes[index] - 0x30) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }

        var offsetSeconds = 0
        if expect("Z") {
            offsetSeconds = 0
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let offsetHours = digits(2), offsetHours <= 23, expect(":"), let offsetMinutes = digits(2), offsetMinutes <= 59
            else { return nil }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60)
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }

        let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        // Rejects 2023-02-29, 2026-04-31 and the like: the pattern's calendar rules.
        guard components.isValidDate(in: utcCalendar), let date = utcCalendar.date(from: components) else { return nil }
        return date.timeIntervalSince1970 + fraction - Double(offsetSeconds)
    }

    private static let utcCalendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0)!
        return calendar
    }()
}
