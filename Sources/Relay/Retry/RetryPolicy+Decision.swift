public import APNs

extension RetryPolicy {
    /// How an attempt failed, as far as the retry decision cares.
    public enum Outcome: Sendable, Hashable {
        /// APNs answered with a non-2xx status; `retryAfter` is the answer's
        /// `Retry-After` in seconds from now, when it carried a readable one.
        case rejected(APNsError, retryAfter: Double? = nil)
        /// No HTTP answer. `attemptCutByDeadline`: the attempt's timeout was
        /// the send deadline's (it was shorter than the per-attempt timeout),
        /// so a timeout means the send ran out of time.
        ///
        /// `.unprocessed` arrives here only after `HTTP2Pool` spent its own
        /// bound of resends on fresh connections: the send loop does not
        /// resend it again (one owner, one bound: docs/architecture.md).
        case transport(TransportError, attemptCutByDeadline: Bool = false)
    }

    /// Where a send stands when an attempt has failed.
    public struct State: Sendable, Hashable {
        /// Retries made so far; the next one is retry number `retriesUsed` (from 0).
        public var retriesUsed: Int
        /// A fresh provider token was already asked for during this send.
        public var tokenRefreshed: Bool
        /// The kill switch was engaged when the send began: no retry at all.
        public var retriesDisabled: Bool
        /// Seconds until the send deadline, now.
        public var secondsLeft: Double
        /// The send must reach APNs at most once: it carries an idempotency
        /// key (the caller was promised one push per key), or it is a
        /// broadcast (a second one reaches every subscriber of the channel).
        /// An attempt APNs may have taken is then never resent.
        public var atMostOnce: Bool

        public init(
            retriesUsed: Int = 0, tokenRefreshed: Bool = false, retriesDisabled: Bool = false, secondsLeft: Double,
            atMostOnce: Bool = false
        ) {
            self.retriesUsed = retriesUsed
            self.tokenRefreshed = tokenRefreshed
            self.retriesDisabled = retriesDisabled
            self.secondsLeft = secondsLeft
            self.atMostOnce = atMostOnce
        }

        /// Carries a decision into the state: a retry spends one from the
        /// budget, a token refresh is remembered (the rule allows one).
        public mutating func record(_ decision: Decision) {
            if decision.refreshesToken { tokenRefreshed = true }
            if case .retry = decision.next { retriesUsed += 1 }
        }
    }

    /// What to do after a failed attempt.
    public struct Decision: Sendable, Hashable, CustomStringConvertible {
        public enum Next: Sendable, Hashable {
            /// Send again after this many seconds (0: at once).
            case retry(afterSeconds: Double)
            /// Stop: the send ends with the attempt's failure, for this reason.
            case giveUp(Ending)
        }

        /// Why a send stopped retrying.
        public enum Ending: String, Sendable, Hashable {
            /// The failure is not worth another attempt: the catalog's rule
            /// says never, a 4xx reason the catalog does not know, or a
            /// transport failure resending cannot fix (TLS, queue full,
            /// closed, or unprocessed after the pool's own resends).
            case notRetryable
            /// The kill switch is engaged.
            case retriesDisabled
            /// The policy's retries are used up, or it allows none.
            case budgetSpent
            /// The reason allows one retry with a fresh provider token, and
            /// APNs refused the fresh one too.
            case freshTokenRefused
            /// The send deadline: the wait would end past it, or the attempt's
            /// timeout was the deadline's.
            case outOfTime
            /// The caller cancelled the send.
            case cancelled
            /// The attempt got no answer after the whole request went out, so
            /// APNs may have taken it, and the send must go out at most once
            /// (``State/atMostOnce``): resending could push it twice.
            case mayHaveReachedAPNs
        }

        public var next: Next
        /// Drop the provider token the attempt carried, so the next attempt
        /// (of this send or any other) signs with a freshly minted JWT. Set
        /// whenever APNs refused the token as expired, retried or not.
        public var refreshesToken: Bool

        public init(next: Next, refreshesToken: Bool = false) {
            self.next = next
            self.refreshesToken = refreshesToken
        }

        /// Send again after `seconds`.
        public static func retry(after seconds: Double) -> Decision { Decision(next: .retry(afterSeconds: seconds)) }
        /// Mint a fresh provider token and send again at once.
        public static let refreshTokenAndRetry = Decision(next: .retry(afterSeconds: 0), refreshesToken: true)
        /// Stop with the attempt's failure.
        public static func giveUp(_ ending: Ending, refreshingToken: Bool = false) -> Decision {
            Decision(next: .giveUp(ending), refreshesToken: refreshingToken)
        }

        /// The wait before the next attempt, or nil when the send ends.
        public var delay: Double? {
            if case .retry(let seconds) = next { return seconds }
            return nil
        }

        public var description: String {
            let action = switch next {
            case .retry(let seconds): "retry after \(seconds) s"
            case .giveUp(let ending): "give up (\(ending.rawValue))"
            }
            return refreshesToken ? "refresh the token, \(action)" : action
        }
    }
}
