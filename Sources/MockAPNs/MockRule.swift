/// A scripted behaviour: requests it matches get outcomes in sequence.
///
/// The sequence advances per logical send (per `apns-id`, or per path when a
/// request carries none), so "first two attempts 503, then 200" means exactly
/// that for every send the rule matches, however sends interleave.
public struct MockRule: Sendable {
    /// Which requests a rule applies to.
    public enum Match: Sendable, Hashable {
        case any
        /// Device sends whose token starts with this prefix.
        case tokenPrefix(String)
        /// Requests whose path starts with this prefix.
        case pathPrefix(String)
    }

    public var match: Match
    /// Attempt *n* of a send gets `outcomes[n]`; attempts past the end get the last one.
    public var outcomes: [MockOutcome]

    public init(_ match: Match, _ outcomes: [MockOutcome]) {
        precondition(!outcomes.isEmpty, "a rule needs at least one outcome")
        self.match = match
        self.outcomes = outcomes
    }

    public init(_ match: Match, always outcome: MockOutcome) {
        self.init(match, [outcome])
    }
}

/// What a scripted rule does to one attempt.
public enum MockOutcome: Sendable, Hashable {
    /// Validate and answer as usual (200 on success).
    case succeed
    /// Answer with an APNs error. `status` defaults to the catalog's status
    /// for the reason; `retryAfterSeconds` adds a Retry-After header; 410
    /// answers carry `timestamp` (ms) in the body.
    case reject(reason: String, status: Int? = nil, retryAfterSeconds: Int? = nil, timestamp: Int64? = nil)
    /// Answer with a bare status and no APNs body (a proxy's 502, say).
    case bareStatus(Int)
    case noAnswer
    /// Answer as usual, but only once ``MockAPNsEngine/releaseHeld()`` is
    /// called: a test holds a send in flight for exactly as long as it needs.
    case hold
    case resetConnection
    case goAway(graceful: Bool)

    /// 410 Unregistered with the time APNs learned the token was gone.
    public static func unregistered(at milliseconds: Int64) -> MockOutcome {
        .reject(reason: "Unregistered", status: 410, timestamp: milliseconds)
    }

    /// 429 TooManyRequests, optionally with Retry-After.
    public static func tooManyRequests(retryAfterSeconds: Int? = nil) -> MockOutcome {
        .reject(reason: "TooManyRequests", status: 429, retryAfterSeconds: retryAfterSeconds)
    }
}

/// How long the mock waits before answering.
public enum MockDelay: Sendable, Hashable {
    case none
    case fixed(milliseconds: Int)
    /// Uniform in the closed range.
    case random(minimumMilliseconds: Int, maximumMilliseconds: Int)

    func draw() -> Int {
        switch self {
        case .none: 0
        case .fixed(let milliseconds): milliseconds
        case .random(let low, let high): Int.random(in: low...max(low, high))
        }
    }
}
