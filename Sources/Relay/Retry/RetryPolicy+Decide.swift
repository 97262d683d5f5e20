public import APNs

extension RetryPolicy {
    /// The one place a failed attempt becomes "retry after *n* seconds",
    /// "refresh the token and retry" or "give up, and why". Pure: the send
    /// loop (`SendRun`) carries out what it returns and records it in `state`.
    ///
    /// APNs answers follow the reason catalog's ``APNsReason/RetryRule``
    /// (`APNsReason+Catalog.swift`), never a reason name:
    /// - `never`: give up. A 5xx is retried with backoff whatever its body
    ///   says, and a reason the catalog does not know is retried only as a 5xx.
    /// - `withBackoff`, `honouringRetryAfter`, `onNewConnection`: the
    ///   exponential backoff with jitter, never shorter than the answer's
    ///   `Retry-After` (any answer's, not only a 429's); the pool opens the
    ///   new connection by itself.
    /// - `onceWithFreshToken`: drop the JWT (always, retried or not) and
    ///   retry at once, once per send.
    ///
    /// Every retry spends the budget (`maxRetries`; none while the kill
    /// switch is engaged) and must start before the send deadline. Transport
    /// failures: timeouts and connection failures back off like `withBackoff`,
    /// except one after the whole request went out (APNs may have taken it)
    /// for a send that must go out at most once (a key, a broadcast); the
    /// rest end the send, cancellation as `cancelled`.
    ///
    /// Adding a reason with its own rule is one catalog row (mirrored in
    /// `docs/reference/apns-reasons.tsv`) plus one row in the decision table
    /// test (`RetryDecisionTests`); a new kind of rule is a `RetryRule` case,
    /// which this switch then must handle, plus its rows.
    public func decide(
        _ outcome: Outcome, _ state: State, random: (ClosedRange<Double>) -> Double = { Double.random(in: $0) }
    ) -> Decision {
        switch outcome {
        case .rejected(let error, let retryAfter):
            switch Self.rule(for: error) {
            case .never:
                return .giveUp(.notRetryable)
            case .onceWithFreshToken:
                if state.tokenRefreshed { return .giveUp(.freshTokenRefused, refreshingToken: true) }
                if let spent = budgetEnding(state) { return .giveUp(spent, refreshingToken: true) }
                return 0 < state.secondsLeft ? .refreshTokenAndRetry : .giveUp(.outOfTime, refreshingToken: true)
            case .withBackoff, .honouringRetryAfter, .onNewConnection:
                if let spent = budgetEnding(state) { return .giveUp(spent) }
                return within(state, delay(beforeRetry: state.retriesUsed, retryAfter: retryAfter, random: random))
            }
        case .transport(let error, let attemptCutByDeadline):
            if error.kind == .cancelled { return .giveUp(.cancelled) }
            // A timeout the deadline imposed ends the send as out of time,
            // whatever else would have stopped a retry.
            guard error.kind == .timeout || error.kind == .connection else { return .giveUp(.notRetryable) }
            let timedOutAtDeadline = error.kind == .timeout && attemptCutByDeadline
            if let spent = budgetEnding(state) { return .giveUp(timedOutAtDeadline ? .outOfTime : spent) }
            // Retrying is at-least-once: a request APNs took and was slow to
            // answer would go out again. A send promised at most once stops.
            if error.mayHaveReachedAPNs, state.atMostOnce { return .giveUp(timedOutAtDeadline ? .outOfTime : .mayHaveReachedAPNs) }
            return within(state, delay(beforeRetry: state.retriesUsed, random: random))
        }
    }

    /// The rule an APNs answer falls under: the catalog's for its reason,
    /// with any 5xx worth another try.
    static func rule(for error: APNsError) -> APNsReason.RetryRule {
        guard error.stage == .apns else { return .never }
        let rule = APNsReason.named(error.code.rawValue)?.retry ?? .never
        return rule == .never && error.status >= 500 ? .withBackoff : rule
    }

    /// Why no retry is left in the budget, or nil when one is.
    private func budgetEnding(_ state: State) -> Decision.Ending? {
        if state.retriesDisabled { return .retriesDisabled }
        return state.retriesUsed < maxRetries ? nil : .budgetSpent
    }

    /// A retry after `wait`, unless it would start at or past the deadline.
    private func within(_ state: State, _ wait: Double) -> Decision {
        wait < state.secondsLeft ? .retry(after: wait) : .giveUp(.outOfTime)
    }
}
