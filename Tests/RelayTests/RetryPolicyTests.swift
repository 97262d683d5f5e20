import APNs
import Relay
import Testing

@Suite("Retry policy")
struct RetryPolicyTests {
    @Test("defaults: 3 retries, 100 ms base, 5 s cap, jitter, catalog's retryable reasons")
    func defaults() {
        let policy = RetryPolicy()
        #expect(policy.maxRetries == 3)
        #expect(policy.baseDelay == 0.1)
        #expect(policy.maxDelay == 5)
        #expect(policy.jitter)
        // What is retried is the catalog's call, read through `decide`.
        let retried = APNsReason.catalog.filter { reason in
            policy.decide(.rejected(answer(reason.name, status: reason.status)), fresh).delay != nil
        }
        #expect(Set(retried.map(\.name)) == ["TooManyRequests", "InternalServerError", "ServiceUnavailable", "Shutdown", "IdleTimeout", "ExpiredProviderToken"])
    }

    /// A send's state before its first retry, far from its deadline.
    let fresh = RetryPolicy.State(secondsLeft: 30)

    func answer(_ reason: String, status: Int) -> APNsError {
        .fromResponse(status: status, body: Array(#"{"reason":"\#(reason)"}"#.utf8), apnsID: nil)
    }

    @Test("delays double up to the cap, then jitter is added on top")
    func delays() {
        let policy = RetryPolicy()
        let noJitter: (ClosedRange<Double>) -> Double = { $0.lowerBound }
        let fullJitter: (ClosedRange<Double>) -> Double = { $0.upperBound }
        #expect([0, 1, 2, 3, 6, 7].map { policy.delay(beforeRetry: $0, random: noJitter) } == [0.1, 0.2, 0.4, 0.8, 5, 5])
        #expect(policy.delay(beforeRetry: 9, random: fullJitter) == 5.1)
        var unjittered = policy
        unjittered.jitter = false
        #expect(unjittered.delay(beforeRetry: 0, random: fullJitter) == 0.1)
    }

    @Test("real jitter stays within 0…base above the exponential step")
    func jitterBounds() {
        let policy = RetryPolicy()
        var outOfBounds: [String] = []
        for retry in 0..<8 {
            let step = min(0.1 * Double(1 << retry), 5)
            for _ in 0..<200 {
                let delay = policy.delay(beforeRetry: retry)
                if delay < step || delay > step + 0.1 { outOfBounds.append("retry \(retry): \(delay)") }
            }
        }
        #expect(outOfBounds.isEmpty, "\(outOfBounds.prefix(5))")
    }

    @Test("Retry-After sets a floor, never a ceiling")
    func retryAfterFloor() {
        let policy = RetryPolicy()
        #expect(policy.delay(beforeRetry: 0, retryAfter: 7, random: { $0.lowerBound }) == 7)
        #expect(policy.delay(beforeRetry: 6, retryAfter: 1, random: { $0.lowerBound }) == 5)
    }

    @Test("priority 10 gets at most 2 retries and doubled delays; the stretch never widens retries")
    func priorityStretch() {
        let base = RetryPolicy()
        let stretched = base.effective(for: .immediate)
        #expect(stretched.maxRetries == 2)
        #expect(stretched.baseDelay == 0.2)
        #expect(stretched.maxDelay == 10)
        #expect(base.effective(for: .conservePower) == base)
        #expect(base.effective(for: nil) == base)
        var one = base
        one.maxRetries = 1
        #expect(one.effective(for: .immediate).maxRetries == 1)
    }

    @Test("retryable: catalog reasons and any 5xx; never preflight errors")
    func retryable() {
        let policy = RetryPolicy()
        #expect(policy.decide(.rejected(answer("TooManyRequests", status: 429)), fresh).delay != nil)
        #expect(policy.decide(.rejected(.fromResponse(status: 502, body: [], apnsID: nil)), fresh).delay != nil)
        #expect(policy.decide(.rejected(answer("Unregistered", status: 410)), fresh).delay == nil)
        #expect(policy.decide(.rejected(.preflight(.payloadTooLarge, field: "payload", rule: "too big")), fresh).delay == nil)
    }
}

@Suite("Kill switch")
struct KillSwitchTests {
    @Test("any non-empty APNS_RELAY_DISABLE_RETRY engages it; empty does not")
    func environment() {
        #expect(KillSwitch(environment: { $0 == "APNS_RELAY_DISABLE_RETRY" ? "1" : nil }).source == .environment)
        #expect(KillSwitch(environment: { $0 == "APNS_RELAY_DISABLE_RETRY" ? "no" : nil }).isEngaged)
        #expect(!KillSwitch(environment: { $0 == "APNS_RELAY_DISABLE_RETRY" ? "" : nil }).isEngaged)
        #expect(!KillSwitch(environment: { _ in nil }).isEngaged)
    }

    @Test("the SDK's variable is honoured as an alias")
    func alias() {
        let killSwitch = KillSwitch(environment: { $0 == "MOBILE_SURFACES_PUSH_DISABLE_RETRY" ? "true" : nil })
        #expect(killSwitch.isEngaged)
        #expect(killSwitch.environmentVariable == "MOBILE_SURFACES_PUSH_DISABLE_RETRY")
    }

    @Test("runtime toggle engages and releases; the environment wins")
    func runtime() {
        let killSwitch = KillSwitch(environment: { _ in nil })
        #expect(killSwitch.setRuntime(engaged: true))
        #expect(killSwitch.source == .runtime)
        #expect(!killSwitch.setRuntime(engaged: false))
        let pinned = KillSwitch(environment: { $0 == "APNS_RELAY_DISABLE_RETRY" ? "1" : nil })
        #expect(pinned.setRuntime(engaged: false))
        #expect(pinned.source == .environment)
    }
}

@Suite("HTTP dates, Retry-After and clock skew")
struct HTTPDateTests {
    @Test("parses the three HTTP date forms to the same instant")
    func forms() {
        let expected: Int64 = 784_111_777  // RFC 9110's example: 1994-11-06 08:49:37 UTC
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == expected)
        #expect(HTTPDate.parse("Sun, 31 Feb 1994 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("yesterday") == nil)
    }

    @Test("formats IMF-fixdate and round-trips across leap years")
    func roundTrip() {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(1_709_164_800) == "Thu, 29 Feb 2024 00:00:00 GMT")
        for seconds in stride(from: Int64(0), to: 4_102_444_800, by: 7_777_777) {
            #expect(HTTPDate.parse(HTTPDate.format(seconds)) == seconds)
        }
    }

    @Test("Retry-After: seconds, a date, a past date, garbage")
    func retryAfter() {
        let now: Int64 = 1_700_000_000
        #expect(RetryAfter.seconds(from: "7", now: now) == 7)
        #expect(RetryAfter.seconds(from: HTTPDate.format(now + 30), now: now) == 30)
        #expect(RetryAfter.seconds(from: HTTPDate.format(now - 30), now: now) == 0)
        #expect(RetryAfter.seconds(from: "soon", now: now) == nil)
        #expect(RetryAfter.seconds(from: nil, now: now) == nil)
    }
}
