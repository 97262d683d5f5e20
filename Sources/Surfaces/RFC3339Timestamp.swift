/// RFC 3339 date-times exactly as the contract's `updatedAt` accepts them.
///
/// The schema gives `updatedAt` both a `pattern` and `format: date-time`, and
/// a validator that asserts formats (the differential test's jsonschema +
/// rfc3339-validator does) applies both, so a value must satisfy each:
///
/// - the pattern: `YYYY-MM-DDTHH:MM[:SS[.fraction]](Z|±HH:MM)`, uppercase `T`
///   and `Z`, ASCII digits, real calendar days with the Gregorian leap rule,
///   hours 00–23, offsets up to ±23:59;
/// - the format: seconds present (RFC 3339's `partial-time` requires them,
///   so the pattern's optional seconds never survive), and a year from 0001
///   (the format checker rejects year 0000, which the pattern would allow).
///
/// The calendar arithmetic is our own, proleptic Gregorian, rather than
/// Foundation's `Calendar`: the Gregorian calendar switches to Julian rules
/// before 1582, which would accept 1500-02-29 and reject 1582-10-10 where the
/// pattern does the opposite.
enum RFC3339Timestamp {
    /// Unix seconds for `text` (fraction kept, offset applied), or nil when it
    /// breaks the rule.
    static func parse(_ text: String) -> Double? {
        var scanner = Scanner(bytes: Array(text.utf8))
        guard let year = scanner.digits(4), year >= 1, scanner.expect("-"),
              let month = scanner.digits(2), (1...12).contains(month), scanner.expect("-"),
              let day = scanner.digits(2), day >= 1, day <= daysIn(month: month, year: year), scanner.expect("T"),
              let hour = scanner.digits(2), hour <= 23, scanner.expect(":"),
              let minute = scanner.digits(2), minute <= 59, scanner.expect(":"),
              let second = scanner.digits(2), second <= 59
        else { return nil }

        var fraction = 0.0
        if scanner.expect(".") {
            guard let digits = scanner.digitRun() else { return nil }
            fraction = Double("0." + digits) ?? 0
        }

        let offsetSeconds: Int
        if scanner.expect("Z") {
            offsetSeconds = 0
        } else if let sign = scanner.sign() {
            guard let hours = scanner.digits(2), hours <= 23, scanner.expect(":"),
                  let minutes = scanner.digits(2), minutes <= 59
            else { return nil }
            offsetSeconds = sign * (hours * 3600 + minutes * 60)
        } else {
            return nil
        }
        // No trailing text at all: ECMA-262's `$` (the dialect JSON Schema
        // patterns use) does not match before a final newline the way
        // Python's does.
        guard scanner.atEnd else { return nil }

        let days = daysSinceEpoch(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Double(seconds) + fraction
    }

    static func isLeap(_ year: Int) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to the given proleptic Gregorian date, counting
    /// whole 400-year cycles (146 097 days each) from a March-based year so
    /// the leap day falls at the end of the year.
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let marchYear = month <= 2 ? year - 1 : year
        let era = (marchYear >= 0 ? marchYear : marchYear - 399) / 400
        let yearOfEra = marchYear - era * 400
        let monthFromMarch = (month + 9) % 12
        let dayOfYear = (153 * monthFromMarch + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// A cursor over ASCII bytes; every match is exact, nothing is skipped.
    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool { index == bytes.count }

        mutating func digits(_ count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<(index + count)] {
                guard isDigit(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            index += count
            return value
        }

        /// One or more digits, as text.
        mutating func digitRun() -> String? {
            let start = index
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            return index > start ? String(decoding: bytes[start..<index], as: UTF8.self) : nil
        }

        mutating func expect(_ character: Unicode.Scalar) -> Bool {
            guard index < bytes.count, bytes[index] == UInt8(ascii: character) else { return false }
            index += 1
            return true
        }

        mutating func sign() -> Int? {
            if expect("+") { return 1 }
            if expect("-") { return -1 }
            return nil
        }

        private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    }
}
