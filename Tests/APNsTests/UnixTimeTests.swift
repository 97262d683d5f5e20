import APNs
import Foundation
import Testing

@Suite("UnixTime")
struct UnixTimeTests {
    @Test("rfc3339 agrees with Foundation's ISO 8601 formatter to the millisecond, 1970 to 2200")
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
            #expect(UnixTime.rfc3339(nanoseconds: nanoseconds) == formatter.string(from: date), "\(nanoseconds)")
        }
    }
}
