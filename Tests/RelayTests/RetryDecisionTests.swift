import APNs
import Relay
import Testing

/// `RetryPolicy.decide` as a table: one row per case the send loop meets.
/// A new reason with its own rule is a catalog row plus a row here.
@Suite("Retry decision table")
struct RetryDecisionTests {
    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let outcome: RetryPolicy.Outcome
        var retriesUsed = 0
        var tokenRefreshed = false
        var killSwitch = false
        var secondsLeft = 30.0
        var priority: Priority? = nil
        /// A policy allowing more retries than the default 3.
        var maxRetries: Int? = nil
        /// Draw the jitter's upper bound instead of its lower one.
        var fullJitter = false
        /// The send carries an idempotency key or is a broadcast.
        var atMostOnce = false
        let expected: RetryPolicy.Decision

        var testDescription: String { "\(name) → \(expected)" }
    }

    static func apns(_ reason: String, _ status: Int, retryAfter: Double? = nil) -> RetryPolicy.Outcome {
        .rejected(.fromResponse(status: status, body: Array(#"{"reason":"\#(reason)"}"#.utf8), apnsID: nil), retryAfter: retryAfter)
    }

    static func transport(_ kind: TransportError.Kind, cutByDeadline: Bool = false, written: Bool = false) -> RetryPolicy.Outcome {
        .transport(TransportError(kind, "test", mayHaveReachedAPNs: written), attemptCutByDeadline: cutByDeadline)
    }

    static let rows: [Row] = [
        // Backoff: 100 ms doubling to the 5 s cap, jitter 0…100 ms on top.
        Row(name: "503 ServiceUnavailable, first retry", outcome: apns("ServiceUnavailable", 503), expected: .retry(after: 0.1)),
        Row(name: "503, second retry", outcome: apns("ServiceUnavailable", 503), retriesUsed: 1, expected: .retry(after: 0.2)),
        Row(name: "503, full jitter", outcome: apns("ServiceUnavailable", 503), retriesUsed: 1, fullJitter: true, expected: .retry(after: 0.3)),
        Row(name: "500 InternalServerError, backoff capped at 5 s", outcome: apns("InternalServerError", 500), retriesUsed: 7, maxRetries: 10,
            expected: .retry(after: 5)),
        // Retry-After is a floor on every retryable answer's wait.
        Row(name: "429 TooManyRequests without Retry-After", outcome: apns("TooManyRequests", 429), expected: .retry(after: 0.1)),
        Row(name: "429 TooManyRequests, Retry-After 7", outcome: apns("TooManyRequests", 429, retryAfter: 7), expected: .retry(after: 7)),
        Row(name: "503 with Retry-After 1", outcome: apns("ServiceUnavailable", 503, retryAfter: 1), expected: .retry(after: 1)),
        Row(name: "Retry-After shorter than the backoff", outcome: apns("TooManyRequests", 429, retryAfter: 0.05), retriesUsed: 2,
            expected: .retry(after: 0.4)),
        Row(name: "503 Shutdown: a new connection, backoff", outcome: apns("Shutdown", 503), expected: .retry(after: 0.1)),
        Row(name: "400 IdleTimeout", outcome: apns("IdleTimeout", 400), expected: .retry(after: 0.1)),
        // Reasons outside the catalog, and 5xx whatever the body says.
        Row(name: "502 with no body", outcome: .rejected(.fromResponse(status: 502, body: [], apnsID: nil)), expected: .retry(after: 0.1)),
        Row(name: "503 with an HTML body", outcome: .rejected(.fromResponse(status: 503, body: Array("<html>".utf8), apnsID: nil)),
            expected: .retry(after: 0.1)),
        Row(name: "a 5xx reason the catalog does not know", outcome: apns("BrandNewOutage", 503), expected: .retry(after: 0.1)),
        Row(name: "a catalog never-reason answered as 500", outcome: apns("BadDeviceToken", 500), expected: .retry(after: 0.1)),
        Row(name: "a 4xx reason the catalog does not know", outcome: apns("BrandNewRule", 400), expected: .giveUp(.notRetryable)),
        // Never.
        Row(name: "410 Unregistered", outcome: apns("Unregistered", 410), expected: .giveUp(.notRetryable)),
        Row(name: "400 BadDeviceToken", outcome: apns("BadDeviceToken", 400), expected: .giveUp(.notRetryable)),
        Row(name: "403 InvalidProviderToken", outcome: apns("InvalidProviderToken", 403), expected: .giveUp(.notRetryable)),
        Row(name: "429 TooManyProviderTokenUpdates", outcome: apns("TooManyProviderTokenUpdates", 429), expected: .giveUp(.notRetryable)),
        Row(name: "a preflight error", outcome: .rejected(.preflight(.payloadTooLarge, field: "payload", rule: "too big")),
            expected: .giveUp(.notRetryable)),
        Row(name: "410 with the kill switch: never comes first", outcome: apns("Unregistered", 410), killSwitch: true,
            expected: .giveUp(.notRetryable)),
        // Budget, kill switch, deadline, priority.
        Row(name: "503, retries used up", outcome: apns("ServiceUnavailable", 503), retriesUsed: 3, expected: .giveUp(.budgetSpent)),
        Row(name: "503, kill switch", outcome: apns("ServiceUnavailable", 503), killSwitch: true, expected: .giveUp(.retriesDisabled)),
        Row(name: "503, the wait would end at the deadline", outcome: apns("ServiceUnavailable", 503), secondsLeft: 0.1,
            expected: .giveUp(.outOfTime)),
        Row(name: "503, the wait ends just before the deadline", outcome: apns("ServiceUnavailable", 503), secondsLeft: 0.11,
            expected: .retry(after: 0.1)),
        Row(name: "429, Retry-After past the deadline", outcome: apns("TooManyRequests", 429, retryAfter: 600),
            expected: .giveUp(.outOfTime)),
        Row(name: "priority 10: doubled delays", outcome: apns("ServiceUnavailable", 503), priority: .immediate, expected: .retry(after: 0.2)),
        Row(name: "priority 10: at most 2 retries", outcome: apns("ServiceUnavailable", 503), retriesUsed: 2, priority: .immediate,
            expected: .giveUp(.budgetSpent)),
        // ExpiredProviderToken: drop the JWT always, retry at once, once.
        Row(name: "ExpiredProviderToken", outcome: apns("ExpiredProviderToken", 403), expected: .refreshTokenAndRetry),
        Row(name: "ExpiredProviderToken ignores Retry-After", outcome: apns("ExpiredProviderToken", 403, retryAfter: 5),
            expected: .refreshTokenAndRetry),
        Row(name: "ExpiredProviderToken after two other retries", outcome: apns("ExpiredProviderToken", 403), retriesUsed: 2,
            expected: .refreshTokenAndRetry),
        Row(name: "ExpiredProviderToken again after the fresh one", outcome: apns("ExpiredProviderToken", 403), retriesUsed: 1,
            tokenRefreshed: true, expected: .giveUp(.freshTokenRefused, refreshingToken: true)),
        Row(name: "ExpiredProviderToken, kill switch", outcome: apns("ExpiredProviderToken", 403), killSwitch: true,
            expected: .giveUp(.retriesDisabled, refreshingToken: true)),
        Row(name: "ExpiredProviderToken, retries used up", outcome: apns("ExpiredProviderToken", 403), retriesUsed: 3,
            expected: .giveUp(.budgetSpent, refreshingToken: true)),
        Row(name: "ExpiredProviderToken, deadline passed", outcome: apns("ExpiredProviderToken", 403), secondsLeft: 0,
            expected: .giveUp(.outOfTime, refreshingToken: true)),
        // Transport failures.
        Row(name: "timeout", outcome: transport(.timeout), expected: .retry(after: 0.1)),
        Row(name: "connection reset, third retry", outcome: transport(.connection), retriesUsed: 2, expected: .retry(after: 0.4)),
        Row(name: "connection, retries used up", outcome: transport(.connection), retriesUsed: 3, expected: .giveUp(.budgetSpent)),
        Row(name: "connection, kill switch", outcome: transport(.connection), killSwitch: true, expected: .giveUp(.retriesDisabled)),
        Row(name: "connection, the wait would pass the deadline", outcome: transport(.connection), secondsLeft: 0.05,
            expected: .giveUp(.outOfTime)),
        Row(name: "timeout the deadline imposed, retries used up", outcome: transport(.timeout, cutByDeadline: true), retriesUsed: 3,
            expected: .giveUp(.outOfTime)),
        Row(name: "timeout the deadline imposed, kill switch", outcome: transport(.timeout, cutByDeadline: true), killSwitch: true,
            expected: .giveUp(.outOfTime)),
        Row(name: "timeout the deadline imposed, no time left", outcome: transport(.timeout, cutByDeadline: true), secondsLeft: 0,
            expected: .giveUp(.outOfTime)),
        Row(name: "GOAWAY-unprocessed: the pool already resent it", outcome: transport(.unprocessed), expected: .giveUp(.notRetryable)),
        Row(name: "TLS failure", outcome: transport(.tls), expected: .giveUp(.notRetryable)),
        Row(name: "queue full", outcome: transport(.queueFull), expected: .giveUp(.notRetryable)),
        Row(name: "transport closed", outcome: transport(.closed), expected: .giveUp(.notRetryable)),
        Row(name: "cancelled", outcome: transport(.cancelled), expected: .giveUp(.cancelled)),
        // At most once (a key, a broadcast): an attempt APNs may have taken is not resent; one that never went out whole is.
        Row(name: "timeout after the request went out, no key: retried (at least once)", outcome: transport(.timeout, written: true),
            expected: .retry(after: 0.1)),
        Row(name: "connection lost after the request went out, no key: retried", outcome: transport(.connection, written: true),
            expected: .retry(after: 0.1)),
        Row(name: "timeout after the request went out, at most once", outcome: transport(.timeout, written: true), atMostOnce: true,
            expected: .giveUp(.mayHaveReachedAPNs)),
        Row(name: "connection lost after the request went out, at most once", outcome: transport(.connection, written: true),
            atMostOnce: true, expected: .giveUp(.mayHaveReachedAPNs)),
        Row(name: "stream reset after the request went out, at most once", outcome: transport(.connection, written: true),
            retriesUsed: 2, atMostOnce: true, expected: .giveUp(.mayHaveReachedAPNs)),
        Row(name: "timeout before the request went out whole, at most once: retried", outcome: transport(.timeout), atMostOnce: true,
            expected: .retry(after: 0.1)),
        Row(name: "connect failed, at most once: retried", outcome: transport(.connection), atMostOnce: true, expected: .retry(after: 0.1)),
        Row(name: "timeout the deadline imposed after the request went out, at most once", outcome: transport(.timeout, cutByDeadline: true, written: true),
            atMostOnce: true, expected: .giveUp(.outOfTime)),
        Row(name: "after the request went out, at most once, kill switch", outcome: transport(.timeout, written: true), killSwitch: true,
            atMostOnce: true, expected: .giveUp(.retriesDisabled)),
    ]

    @Test("decide", arguments: rows)
    func decide(_ row: Row) {
        var configured = RetryPolicy()
        if let maxRetries = row.maxRetries { configured.maxRetries = maxRetries }
        let policy = configured.effective(for: row.priority)
        let state = RetryPolicy.State(
            retriesUsed: row.retriesUsed, tokenRefreshed: row.tokenRefreshed, retriesDisabled: row.killSwitch,
            secondsLeft: row.secondsLeft, atMostOnce: row.atMostOnce)
        let decision = policy.decide(row.outcome, state, random: { row.fullJitter ? $0.upperBound : $0.lowerBound })
        if let delay = decision.delay, let expected = row.expected.delay {
            // Doubling 0.1 is not exact in binary: compare the waits to the microsecond.
            #expect(abs(delay - expected) < 1e-6, "\(decision)")
            #expect(decision.refreshesToken == row.expected.refreshesToken)
        } else {
            #expect(decision == row.expected)
        }
    }

    /// Every catalog row, answered with its own status and again as a 500: the
    /// rule alone decides a 4xx, and any 5xx is worth another try (the only
    /// statement of "retryable" there is; APNsError and APNsReason carry none).
    @Test("every catalog reason: its rule decides, a 5xx always retries", arguments: APNsReason.catalog)
    func catalogRow(_ reason: APNsReason) {
        let policy = RetryPolicy()
        let fresh = RetryPolicy.State(secondsLeft: 30)
        func decision(status: Int) -> RetryPolicy.Decision {
            let error = APNsError.fromResponse(status: status, body: Array(#"{"reason":"\#(reason.name)"}"#.utf8), apnsID: nil)
            return policy.decide(.rejected(error), fresh, random: { $0.lowerBound })
        }
        let own = decision(status: reason.status)
        let asServerError = decision(status: 500)
        switch reason.retry {
        case .never:
            #expect(own == (reason.status >= 500 ? .retry(after: 0.1) : .giveUp(.notRetryable)))
            #expect(asServerError == .retry(after: 0.1))
        case .withBackoff, .honouringRetryAfter, .onNewConnection:
            #expect(own == .retry(after: 0.1))
            #expect(asServerError == .retry(after: 0.1))
        case .onceWithFreshToken:
            #expect(own == .refreshTokenAndRetry)
            #expect(asServerError == .refreshTokenAndRetry)
        }
    }

    @Test("recording a decision: a retry spends one, a token refresh is remembered")
    func record() {
        var state = RetryPolicy.State(secondsLeft: 30)
        state.record(.refreshTokenAndRetry)
        #expect(state.retriesUsed == 1 && state.tokenRefreshed)
        state.record(.retry(after: 0.2))
        #expect(state.retriesUsed == 2)
        state.record(.giveUp(.budgetSpent))
        #expect(state.retriesUsed == 2)
    }

    struct FixRow: Sendable, CustomTestStringConvertible {
        let reason: String
        let status: Int
        let ending: RetryPolicy.Decision.Ending
        let retries: Int
        /// The start of the fix; nil: the catalog's fix alone.
        let opening: String?

        var testDescription: String { "\(reason) \(ending.rawValue) after \(retries)" }
    }

    static let fixRows: [FixRow] = [
        FixRow(reason: "Unregistered", status: 410, ending: .notRetryable, retries: 0, opening: nil),
        FixRow(reason: "ServiceUnavailable", status: 503, ending: .retriesDisabled, retries: 0,
               opening: "Not retried: retries are disabled (kill switch)."),
        FixRow(reason: "ServiceUnavailable", status: 503, ending: .budgetSpent, retries: 0,
               opening: "Not retried: the retry policy allows no retry."),
        FixRow(reason: "ServiceUnavailable", status: 503, ending: .budgetSpent, retries: 3,
               opening: "Retried 3 time(s) with backoff; APNs answered ServiceUnavailable every time."),
        FixRow(reason: "TooManyRequests", status: 429, ending: .outOfTime, retries: 0,
               opening: "Not retried: the send deadline left no time for another attempt."),
        FixRow(reason: "TooManyRequests", status: 429, ending: .outOfTime, retries: 2,
               opening: "Retried 2 time(s) with backoff until the send deadline left no time for another attempt."),
        FixRow(reason: "ExpiredProviderToken", status: 403, ending: .freshTokenRefused, retries: 1,
               opening: "The relay minted a fresh JWT and retried; APNs refused that one too."),
        FixRow(reason: "ExpiredProviderToken", status: 403, ending: .retriesDisabled, retries: 0,
               opening: "Not retried with a fresh JWT: retries are disabled (kill switch)."),
        FixRow(reason: "ExpiredProviderToken", status: 403, ending: .outOfTime, retries: 0,
               opening: "Not retried with a fresh JWT: the send deadline left no time."),
        FixRow(reason: "ExpiredProviderToken", status: 403, ending: .budgetSpent, retries: 0,
               opening: "Not retried with a fresh JWT: the retry policy allows no retry."),
    ]

    @Test("the fix says what the relay did before giving up", arguments: fixRows)
    func fix(_ row: FixRow) {
        let error = APNsError.fromResponse(status: row.status, body: Array(#"{"reason":"\#(row.reason)"}"#.utf8), apnsID: nil)
        let fix = row.ending.fix(afterGivingUpOn: error, retries: row.retries)
        if let opening = row.opening {
            #expect(fix == "\(opening) \(error.fix)")
        } else {
            #expect(fix == error.fix)
        }
    }
}
