import APNs
import HTTP2
import Tracing
import RelayBasics

extension SendRun {
    /// Tells every observer about the attempt that just ended.
    func report(
        attemptStatus: Int?, reason: String?, errorType: String?, trap: TrapID?, duration: Double, final: Bool,
        backoff: Double?
    ) {
        let event = AttemptEvent(
            send: descriptor, attempt: attempt, isFinalAttempt: final, status: attemptStatus, reason: reason,
            errorType: errorType, trapID: trap, durationSeconds: duration, backoffSeconds: backoff)
        for observer in client.observers { observer.attemptFinished(event) }
    }

    /// Ends the send successfully: span, send event (durable), result.
    func succeed(_ response: HTTP2Response) async -> SendResult {
        let finishedAt = UnixTime.nowNanoseconds()
        let latency = elapsedSeconds
        let uniqueID = response.header("apns-unique-id")
        span.attributes["apns.status"] = response.status
        span.attributes["apns.attempts"] = attempt
        span.setStatus(SpanStatus(code: .ok))
        span.end()
        await publish(SendEvent(
            send: descriptor, outcome: .success, status: response.status, reason: nil, errorType: nil,
            attempts: attempt, trapHits: trapHits, latencySeconds: latency, startedAt: startedAt,
            finishedAt: finishedAt, apnsUniqueID: uniqueID, unregisteredAt: nil, dropsToken: false,
            attemptLog: attemptLog, deadToken: nil))
        return SendResult(
            apnsID: request.apnsID, status: response.status, timestamp: Int64(finishedAt / 1_000_000),
            attempts: attempt, latencyMilliseconds: latency * 1000, trapHits: trapHits, apnsUniqueID: uniqueID,
            channelID: response.header("apns-channel-id"), body: response.body)
    }

    /// Ends the send with a failure: span, send event, the error to throw.
    func finish(failure cause: SendFailure.Cause, status: Int?, reason: String?, error: APNsError? = nil) async -> SendFailure {
        let finishedAt = UnixTime.nowNanoseconds()
        let latency = elapsedSeconds
        let failure = SendFailure(
            cause: cause, apnsID: request.apnsID, attempts: attempt, latencyMilliseconds: latency * 1000,
            trapHits: trapHits, timestamp: Int64(finishedAt / 1_000_000))
        let outcome: SendOutcome = switch cause {
        case .apns: .rejected
        case .cancelled: .cancelled
        case .transport, .credentials, .deadlineExceeded: .failed
        case .invalidSnapshot, .configuration: .rejected
        }
        span.attributes["apns.attempts"] = attempt
        if let status { span.attributes["apns.status"] = status }
        if let reason { span.attributes["apns.reason"] = reason }
        span.setStatus(SpanStatus(code: .error, message: failure.errorType))
        span.end()
        await publish(SendEvent(
            send: descriptor, outcome: outcome, status: status, reason: reason, errorType: failure.errorType,
            attempts: attempt, trapHits: trapHits, latencySeconds: latency, startedAt: startedAt,
            finishedAt: finishedAt, apnsUniqueID: nil, unregisteredAt: error?.unregisteredAt,
            dropsToken: error?.dropsToken ?? false, attemptLog: attemptLog, deadToken: deadToken(error)))
        return failure
    }

    /// The fix for the APNs answer that ended the send, saying what the relay
    /// actually did about it: a retryable answer's catalog fix says what the
    /// operator should do; this puts first whether it was retried, how often,
    /// and why not again (kill switch, retry budget, send deadline).
    func fix(afterGivingUpOn error: APNsError, cutByDeadline: Bool) -> String {
        let retries = retriesUsed
        let decision: String
        if error.code.rawValue == "ExpiredProviderToken" {
            if refreshedToken, retries > 0 {
                decision = "The relay minted a fresh JWT and retried; APNs refused that one too."
            } else if retriesDisabled {
                decision = "Not retried with a fresh JWT: retries are disabled (kill switch)."
            } else if cutByDeadline {
                decision = "Not retried with a fresh JWT: the send deadline left no time."
            } else {
                decision = "Not retried with a fresh JWT: the retry policy allows no retry."
            }
        } else if !error.isRetryable {
            return error.fix
        } else if retriesDisabled {
            decision = "Not retried: retries are disabled (kill switch)."
        } else if cutByDeadline {
            decision = retries == 0
                ? "Not retried: the send deadline left no time for another attempt."
                : "Retried \(retries) time(s) with backoff until the send deadline left no time for another attempt."
        } else {
            decision = retries == 0
                ? "Not retried: the retry policy allows no retry."
                : "Retried \(retries) time(s) with backoff; APNs answered \(error.code.rawValue) every time."
        }
        return "\(decision) \(error.fix)"
    }

    /// The token of a device send that APNs rejected for good.
    private func deadToken(_ error: APNsError?) -> DeadToken? {
        let prefix = "/3/device/"
        guard let error, error.dropsToken, request.path.hasPrefix(prefix), let fingerprint = request.tokenFingerprint
        else { return nil }
        return DeadToken(
            token: String(request.path.dropFirst(prefix.count)), fingerprint: fingerprint, reason: error.code.rawValue,
            apnsTimestampMilliseconds: error.unregisteredAt)
    }

    /// Hands the event to every observer and returns once the durable ones
    /// (the audit journal) hold it on disk: the caller is answered only then.
    private func publish(_ event: SendEvent) async {
        await client.observers.publishDurably(event)
    }
}
