import Foundation
import RelayBasics
import Testing

@Suite("RFC3339")
struct RFC3339Tests {
    @Test("format agrees with Foundation's ISO 8601 formatter to the millisecond, 1970 to 2200")
    func matchesFoundation() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        var generator = SystemRandomNumberGenerator()
        let samples: [UInt64] = [0, 999_999, 1_000_000, 86_399_999_000_000, 951_782_400_123_000_000, 4_102_444_800_000_000_000]
            + (0..<2000).map { _ in UInt64.random(in: 0...7_258_118_400_000_000_000, using: &generator) }
        for nanoseconds in samples {
            let milliseconds = nanoseconds / 1_000_000
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            #expect(RFC3339.format(nanoseconds: nanoseconds) == formatter.string(from: date), "\(nanoseconds)")
            #expect(RFC3339.format(milliseconds: Int64(milliseconds)) == formatter.string(from: date), "\(milliseconds)")
        }
    }

    @Test("fixed instants, leap days, century rules and the millisecond edges", arguments: [
        (Int64(0), "1970-01-01T00:00:00.000Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (-86_400_000, "1969-12-31T00:00:00.000Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),  // 2000 is a leap year (divisible by 400)
        (951_868_799_999, "2000-02-29T23:59:59.999Z"),
        (4_107_456_000_000, "2100-02-28T00:00:00.000Z"),
        (4_107_542_400_000, "2100-03-01T00:00:00.000Z"),  // 2100 is not (divisible by 100)
        (1_709_164_800_123, "2024-02-29T00:00:00.123Z"),
        (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
        (253_402_300_800_000, "10000-01-01T00:00:00.000Z"),  // a fifth year digit is printed, not cut
    ])
    func fixedInstants(milliseconds: Int64, text: String) {
        #expect(RFC3339.format(milliseconds: milliseconds) == text)
        if milliseconds >= 0, milliseconds % 1000 == 0, text.count == 24 {
            #expect(RFC3339.parse(text) == Double(milliseconds / 1000))
        }
    }

    @Test("format then parse gives the same millisecond back")
    func roundTrip() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let milliseconds = Int64.random(in: -62_135_596_800_000...253_402_300_799_999, using: &generator)  // 0001 to 9999
            let parsed = try #require(RFC3339.parse(RFC3339.format(milliseconds: milliseconds)), "\(milliseconds)")
            #expect(Int64((parsed * 1000).rounded(.down)) == milliseconds || Int64((parsed * 1000).rounded()) == milliseconds)
        }
    }

    @Test("parse keeps fractional seconds and applies offsets")
    func parseFractionsAndOffsets() {
        #expect(RFC3339.parse("1970-01-01T00:00:00Z") == 0)
        #expect(RFC3339.parse("1970-01-01T00:00:00.5Z") == 0.5)
        #expect(RFC3339.parse("1970-01-01T00:00:01.250000000Z") == 1.25)
        #expect(RFC3339.parse("1970-01-01T01:00:00+01:00") == 0)
        #expect(RFC3339.parse("1969-12-31T23:30:00-00:30") == 0)
        #expect(RFC3339.parse("2026-05-12T18:30:00Z") == 1_778_610_600)
        #expect(RFC3339.parse("0001-01-01T00:00:00Z") == -62_135_596_800)
    }

    @Test("parse refuses what the contract's updatedAt refuses", arguments: [
        "", "2026-05-12", "2026-05-12T18:30Z",  // seconds are required
        "2026-05-12t18:30:00Z", "2026-05-12T18:30:00z",  // uppercase T and Z only
        "2026-05-12T18:30:00", "2026-05-12T18:30:00+0100", "2026-05-12T18:30:00+24:00",
        "2026-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "1500-02-29T00:00:00Z",  // not leap years (proleptic Gregorian)
        "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
        "2026-05-12T24:00:00Z", "2026-05-12T18:60:00Z", "2026-05-12T18:30:60Z",
        "0000-01-01T00:00:00Z", "2026-05-12T18:30:00.Z", "2026-05-12T18:30:00Z\n", "２026-05-12T18:30:00Z",
    ])
    func parseRefuses(text: String) {
        #expect(RFC3339.parse(text) == nil)
    }

    @Test("leap days parse where the Gregorian rule has them")
    func leapDays() {
        #expect(RFC3339.parse("2000-02-29T00:00:00Z") != nil)
        #expect(RFC3339.parse("2024-02-29T00:00:00Z") != nil)
        #expect(RFC3339.parse("1600-02-29T00:00:00Z") != nil)
        #expect(RFC3339.parse("1582-10-10T00:00:00Z") != nil)  // in the Julian gap, real in proleptic Gregorian
    }

    @Test("civil dates and day counts are inverses, day by day from year 1 to 9999")
    func civilDateInverse() {
        var expected: (year: Int64, month: Int64, day: Int64) = (1, 1, 1)
        var mismatch: String?
        for days in CivilDate.days(year: 1, month: 1, day: 1)...CivilDate.days(year: 9999, month: 12, day: 31) {
            let date = CivilDate.date(days: days)
            if date != expected || CivilDate.days(year: date.year, month: date.month, day: date.day) != days {
                mismatch = "day \(days): \(date), expected \(expected)"
                break
            }
            expected.day += 1
            if expected.day > CivilDate.daysIn(month: expected.month, year: expected.year) {
                expected.day = 1
                expected.month += 1
                if expected.month > 12 { (expected.month, expected.year) = (1, expected.year + 1) }
            }
        }
        #expect(mismatch == nil)
        #expect(expected == (10_000, 1, 1))
        #expect(CivilDate.days(year: 1970, month: 1, day: 1) == 0)
    }
}
