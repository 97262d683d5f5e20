/// RFC 3339 date-times in UTC, without Foundation's formatters.
///
/// Formatting always writes the relay's one form, `YYYY-MM-DDTHH:MM:SS.mmmZ`
/// (milliseconds, `Z`): audit rows, log lines, spans and API answers all use
/// it, so they sort and compare as text. Parsing accepts exactly what the
/// contract's `updatedAt` accepts (see ``parse(_:)``).
public enum RFC3339 {
    /// `nanoseconds` since 1970 as `2026-11-22T15:04:05.123Z` (truncated to the millisecond).
    public static func format(nanoseconds: UInt64) -> String {
        format(milliseconds: Int64(nanoseconds / 1_000_000))
    }

    /// `milliseconds` since 1970 (before it when negative) as `2026-11-22T15:04:05.123Z`.
    public static func format(milliseconds: Int64) -> String {
        var text = [UInt8]()
        text.reserveCapacity(24)
        append(milliseconds: milliseconds, to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends `format(nanoseconds:)`'s text to `text`, with no `String` in between.
    public static func append(nanoseconds: UInt64, to text: inout [UInt8]) {
        append(milliseconds: Int64(nanoseconds / 1_000_000), to: &text)
    }

    /// Appends `format(milliseconds:)`'s text to `text`: the audit writes three
    /// per row straight into its COPY line.
    public static func append(milliseconds: Int64, to text: inout [UInt8]) {
        // Floor division, so -1 ms is 1969-12-31T23:59:59.999Z.
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let millisecond = milliseconds - seconds * 1000
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = CivilDate.date(days: days)
        // Years 0 to 9999 (every timestamp a relay writes): the 24 bytes on
        // the stack and one append. A digit at a time into `text` checked its
        // uniqueness and capacity per byte: ~800 instructions a timestamp,
        // four per audited send.
        if year >= 0, year < 10_000 {
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { out in
                write(year: year, month: month, day: day, secondOfDay: secondOfDay, millisecond: millisecond, to: out.baseAddress!)
                text.append(contentsOf: UnsafeBufferPointer(out))
            }
        }
        func digits(_ value: Int64, _ width: Int) {
            // The usual case by constant divisors, which the compiler turns
            // into multiplications: the audit formats four of these per send.
            switch width {
            case 2 where value >= 0 && value < 100:
                text.append(UInt8(ascii: "0") + UInt8(value / 10))
                text.append(UInt8(ascii: "0") + UInt8(value % 10))
                return
            case 3 where value >= 0 && value < 1000:
                text.append(UInt8(ascii: "0") + UInt8(value / 100))
                text.append(UInt8(ascii: "0") + UInt8(value / 10 % 10))
                text.append(UInt8(ascii: "0") + UInt8(value % 10))
                return
            case 4 where value >= 0 && value < 10000:
                text.append(UInt8(ascii: "0") + UInt8(value / 1000))
                text.append(UInt8(ascii: "0") + UInt8(value / 100 % 10))
                text.append(UInt8(ascii: "0") + UInt8(value / 10 % 10))
                text.append(UInt8(ascii: "0") + UInt8(value % 10))
                return
            default:
                break
            }
            if value < 0 { text.append(UInt8(ascii: "-")) }
            let magnitude = value.magnitude
            var divisor: UInt64 = 1
            for _ in 1..<width { divisor *= 10 }
            while divisor <= magnitude / 10 { divisor *= 10 }  // more digits than the width: print them all
            var rest = magnitude
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(year, 4); text.append(UInt8(ascii: "-")); digits(month, 2); text.append(UInt8(ascii: "-")); digits(day, 2)
        text.append(UInt8(ascii: "T")); digits(secondOfDay / 3600, 2); text.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2); text.append(UInt8(ascii: ":")); digits(secondOfDay % 60, 2)
        text.append(UInt8(ascii: ".")); digits(millisecond, 3); text.append(UInt8(ascii: "Z"))
    }

    /// Writes `format(nanoseconds:)`'s 24 bytes at `out`: for a caller that
    /// writes a line into memory it sized itself (the log line), with no
    /// array in between. `UInt64` nanoseconds end in the year 2554, so the
    /// year always has four digits.
    public static func write(nanoseconds: UInt64, to out: UnsafeMutablePointer<UInt8>) {
        let milliseconds = Int64(nanoseconds / 1_000_000)
        let seconds = milliseconds / 1000
        let days = seconds / 86_400
        let (year, month, day) = CivilDate.date(days: days)
        write(year: year, month: month, day: day, secondOfDay: seconds - days * 86_400, millisecond: milliseconds - seconds * 1000, to: out)
    }

    /// The 24 bytes of a year from 0 to 9999, the digits by constant divisors.
    @inline(__always)
    private static func write(year: Int64, month: Int64, day: Int64, secondOfDay: Int64, millisecond: Int64, to out: UnsafeMutablePointer<UInt8>) {
        @inline(__always) func put(_ value: Int64, _ width: Int, at end: Int) {
            var rest = UInt64(truncatingIfNeeded: value)
            var index = end
            for _ in 0..<width {
                index -= 1
                out[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            }
        }
        put(year, 4, at: 4); out[4] = UInt8(ascii: "-"); put(month, 2, at: 7); out[7] = UInt8(ascii: "-")
        put(day, 2, at: 10); out[10] = UInt8(ascii: "T"); put(secondOfDay / 3600, 2, at: 13)
        out[13] = UInt8(ascii: ":"); put(secondOfDay / 60 % 60, 2, at: 16); out[16] = UInt8(ascii: ":")
        put(secondOfDay % 60, 2, at: 19); out[19] = UInt8(ascii: "."); put(millisecond, 3, at: 23)
        out[23] = UInt8(ascii: "Z")
    }

    /// Unix seconds for `text` (fraction kept, offset applied), or nil when it
    /// breaks the rule.
    ///
    /// The rule is the contract's `updatedAt`, which has both a `pattern` and
    /// `format: date-time`; a validator that asserts formats applies both:
    ///
    /// - the pattern: `YYYY-MM-DDTHH:MM[:SS[.fraction]](Z|±HH:MM)`, uppercase `T`
    ///   and `Z`, ASCII digits, real calendar days with the Gregorian leap rule,
    ///   hours 00–23, offsets up to ±23:59;
    /// - the format: seconds present (RFC 3339's `partial-time` requires them,
    ///   so the pattern's optional seconds never survive), and a year from 0001
    ///   (the format checker rejects year 0000, which the pattern would allow).
    ///
    /// Days are proleptic Gregorian (``CivilDate``): 1500-02-29 is refused and
    /// 1582-10-10 accepted, as the pattern does.
    public static func parse(_ text: String) -> Double? {
        var scanner = Scanner(bytes: Array(text.utf8))
        guard let year = scanner.digits(4), year >= 1, scanner.expect("-"),
              let month = scanner.digits(2), (1...12).contains(month), scanner.expect("-"),
              let day = scanner.digits(2), day >= 1, day <= CivilDate.daysIn(month: month, year: year), scanner.expect("T"),
              let hour = scanner.digits(2), hour <= 23, scanner.expect(":"),
              let minute = scanner.digits(2), minute <= 59, scanner.expect(":"),
              let second = scanner.digits(2), second <= 59
        else { return nil }

        var fraction = 0.0
        if scanner.expect(".") {
            guard let digits = scanner.digitRun() else { return nil }
            fraction = Double("0." + digits) ?? 0
        }

        let offsetSeconds: Int64
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

        let days = CivilDate.days(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Double(seconds) + fraction
    }

    /// A cursor over ASCII bytes; every match is exact, nothing is skipped.
    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool { index == bytes.count }

        mutating func digits(_ count: Int) -> Int64? {
            guard index + count <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[index..<(index + count)] {
                guard isDigit(byte) else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
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

        mutating func sign() -> Int64? {
            if expect("+") { return 1 }
            if expect("-") { return -1 }
            return nil
        }

        private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    }
}
