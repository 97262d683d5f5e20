public import APNs

extension RetryPolicy.Decision.Ending {
    /// The fix for the APNs answer a send gave up on, saying what the relay
    /// actually did about it: a retryable answer's catalog fix says what the
    /// operator should do; this puts first whether it was retried, how often
    /// (`retries`), and why not again (kill switch, retry budget, deadline).
    public func fix(afterGivingUpOn error: APNsError, retries: Int) -> String {
        let decision: String
        switch (RetryPolicy.rule(for: error), self) {
        case (.never, _), (_, .notRetryable), (_, .cancelled), (_, .mayHaveReachedAPNs):
            return error.fix
        case (.onceWithFreshToken, .freshTokenRefused):
            decision = "The relay minted a fresh JWT and retried; APNs refused that one too."
        case (.onceWithFreshToken, .retriesDisabled):
            decision = "Not retried with a fresh JWT: retries are disabled (kill switch)."
        case (.onceWithFreshToken, .outOfTime):
            decision = "Not retried with a fresh JWT: the send deadline left no time."
        case (.onceWithFreshToken, _):
            decision = retries == 0
                ? "Not retried with a fresh JWT: the retry policy allows no retry."
                : "Not retried with a fresh JWT: earlier answers used the retry policy's \(retries) retries."
        case (_, .retriesDisabled):
            decision = "Not retried: retries are disabled (kill switch)."
        case (_, .outOfTime):
            decision = retries == 0
                ? "Not retried: the send deadline left no time for another attempt."
                : "Retried \(retries) time(s) with backoff until the send deadline left no time for another attempt."
        case (_, .budgetSpent), (_, .freshTokenRefused):
            decision = retries == 0
                ? "Not retried: the retry policy allows no retry."
                : "Retried \(retries) time(s) with backoff; APNs answered \(error.code.rawValue) every time."
        }
        return "\(decision) \(error.fix)"
    }
}
