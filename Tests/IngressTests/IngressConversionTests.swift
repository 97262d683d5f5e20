import APNs
import Foundation
@testable import Ingress
import RelayJSON
import TestSupport
import Testing

/// Every place the ingress turns client text or JSON numbers into integers,
/// fed the extremes an attacker would try: each answers 400 naming the
/// field, none traps. (A trap is a crash of the whole relay, for any key.)
@Suite("Ingress conversions at the extremes")
struct IngressConversionTests {
    /// 2026-11-22T10:00:00Z, injected: no verdict here reads the wall clock.
    static let now = Date(timeIntervalSince1970: 1_795_341_600)
    static let nowMilliseconds: Int64 = 1_795_341_600_000

    static func sinceError(_ text: String) -> IngressError? {
        do {
            _ = try DeadTokenController.parseSince(text, now: now)
            return nil
        } catch {
            return error
        }
    }

    @Test("since: durations that overflow, or reach back over 100 years, are a 400 naming since", arguments: [
        "99999999999999999d", "9223372036854775807s", "106751991167300d", "9223372036854775807d", "153722867280912931m",
        "2562047788015215h", "36501d", "99999999999999999999999999999999s", "-1d", "-0d", "+5d", "1e308d", "NaNd", "infd", "d", " 1d",
        "1.5h", "١d",  // an Arabic-Indic digit: a number to Unicode, not to the rule
    ])
    func sinceOutOfRange(_ text: String) throws {
        let error = try #require(Self.sinceError(text), "\(text) was accepted")
        #expect(error.status == 400)
        #expect(error.field == "since")
        #expect(error.message.hasPrefix("since: "), "\(error.message)")
    }

    @Test("since: RFC 3339 times outside 1970-9999 are a 400", arguments: ["1969-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "NaN", "", "2026-13-01T00:00:00Z"])
    func sinceBadTimes(_ text: String) throws {
        let error = try #require(Self.sinceError(text), "\(text) was accepted")
        #expect(error.status == 400 && error.field == "since")
    }

    @Test("since: the valid extremes convert exactly")
    func sinceBoundaries() throws {
        #expect(try DeadTokenController.parseSince("0s", now: Self.now) == Self.nowMilliseconds)
        #expect(try DeadTokenController.parseSince("90s", now: Self.now) == Self.nowMilliseconds - 90_000)
        #expect(try DeadTokenController.parseSince("36500d", now: Self.now) == Self.nowMilliseconds - 36_500 * 86_400_000)
        #expect(try DeadTokenController.parseSince("\(36_500 * 24)h", now: Self.now) == Self.nowMilliseconds - 36_500 * 86_400_000)
        #expect(try DeadTokenController.parseSince("1970-01-01T00:00:00Z", now: Self.now) == 0)
        #expect(try DeadTokenController.parseSince("9999-12-31T23:59:59Z", now: Self.now) == 253_402_300_799_000)
        #expect(try DeadTokenController.parseSince("2026-11-22T10:00:00.250Z", now: Self.now) == Self.nowMilliseconds + 250)
    }

    static func decode(_ extra: String, operation: String = "update", fanOut: Bool = false) -> IngressError? {
        let body = #"{"app":"a","environment":"development","operation":"\#(operation)","token":"\#(String(repeating: "ab", count: 32))","snapshot":\#(TestSnapshots.liveActivity)\#(extra)}"#
        do {
            _ = try SendRequestDecoder.decode(try JSONParser.parse(Array(body.utf8)), allowFanOut: fanOut)
            return nil
        } catch let error as IngressError {
            return error
        } catch {
            Issue.record("unexpected \(error)")
            return nil
        }
    }

    @Test("JSON numbers at the extremes in every integer field are a 400 naming the field", arguments: [
        ("priority", "9223372036854775807"), ("priority", "-9223372036854775808"), ("priority", "9223372036854775808"), ("priority", "1e308"),
        ("priority", "-0.5"), ("priority", "4294967306"),
        ("expiration", "-9223372036854775808"), ("expiration", "1e308"), ("expiration", "-1"), ("expiration", "18446744073709551616"),
        ("timestamp", "-9223372036854775808"), ("timestamp", "1e308"), ("timestamp", "-1"), ("timestamp", "\"NaN\""),
        ("staleDate", "-9223372036854775807"), ("staleDate", "1e300"), ("relevanceScore", "\"NaN\""), ("relevanceScore", "\"1e308\""),
    ])
    func jsonExtremes(_ field: String, _ value: String) throws {
        let error = try #require(Self.decode(#","\#(field)":\#(value)"#), "\(field)=\(value) was accepted")
        #expect(error.status == 400)
        #expect(error.field == field, "\(error.message)")
    }

    @Test("-0 is zero, and the largest integers decode (the preflight judges them, without trapping)")
    func jsonBoundaries() {
        #expect(Self.decode(#","expiration":-0"#) == nil)
        #expect(Self.decode(#","timestamp":9223372036854775807"#) == nil)
        #expect(Self.decode(#","relevanceScore":1e308"#) == nil)
    }

    @Test("a batch item may name an apnsId only with a single token")
    func apnsIDWithTokens() throws {
        let id = #","apnsId":"0f9e8d7c-6b5a-4c3d-8e1f-a0b1c2d3e4f5""#
        let tokens = #","tokens":["\#(String(repeating: "ab", count: 32))","\#(String(repeating: "cd", count: 32))"]"#
        let body = #"{"app":"a","environment":"development","operation":"alert","snapshot":\#(TestSnapshots.liveActivity)\#(id)\#(tokens)}"#
        do {
            _ = try SendRequestDecoder.decode(try JSONParser.parse(Array(body.utf8)), path: "items[0]", allowFanOut: true)
            Issue.record("an apnsId shared by two tokens was accepted")
        } catch let error as IngressError {
            #expect(error.status == 400)
            #expect(error.field == "items[0].apnsId")
            #expect(error.message.contains("single token"), "\(error.message)")
        }
        let single = #"{"app":"a","environment":"development","operation":"alert","snapshot":\#(TestSnapshots.liveActivity)\#(id),"tokens":["\#(String(repeating: "ab", count: 32))"]}"#
        #expect(try SendRequestDecoder.decode(try JSONParser.parse(Array(single.utf8)), path: "items[0]", allowFanOut: true).operations.count == 1)
    }

    @Test("the rate limiter's Retry-After is bounded whatever the rate (no Int(∞) trap)")
    func limiterExtremes() {
        let limiter = RateLimiter()
        #expect(limiter.acquire(key: "zero", ratePerSecond: 0, burst: 1) == nil)
        #expect(limiter.acquire(key: "zero", ratePerSecond: 0, burst: 1) == RateLimiter.maximumWaitSeconds)
        #expect(limiter.acquire(key: "tiny", ratePerSecond: .leastNonzeroMagnitude, burst: 1e300, cost: 1e308) == RateLimiter.maximumWaitSeconds)
        #expect(limiter.acquire(key: "nan", ratePerSecond: .nan, burst: 1, cost: 2) == RateLimiter.maximumWaitSeconds)
    }

    @Test("HTTP dates with absurd years are unreadable, not a trap")
    func httpDateExtremes() {
        #expect(HTTPDate.parse("Sun, 06 Nov 9223372036854775807 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 -9223372036854775808") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 0 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Fri, 31 Dec 9999 23:59:59 GMT") == 253_402_300_799)
    }
}
