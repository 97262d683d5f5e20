import APNs
import HTTP2
import Logging
import Tracing
import RelayBasics

extension SendRun {
    /// Tells every observer about a failed attempt and what was decided after it.
    func report(_ failure: RetryPolicy.Outcome, duration: Double, decision: RetryPolicy.Decision) {
        report(
            attemptStatus: failure.status, reason: failure.reason, errorType: failure.errorType, trap: failure.trapID,
            duration: duration, final: decision.delay == nil)
    }

    /// Tells every observer about the attempt that just ended.
    func report(attemptStatus: Int?, reason: String?, errorType: String?, trap: TrapID?, duration: Double, final: Bool) {
        let event = AttemptEvent(
            send: descriptor, attempt: attempt, isFinalAttempt: final, status: attemptStatus, reason: reason,
            errorType: errorType, trapID: trap, durationSeconds: duration)
        for observer in client.observers.all { observer.attemptFinished(event) }
    }

    /// Ends the send successfully: span, send event (durable), result.
    func succeed(_ response: HTTP2Response) async -> SendResult {
        let finishedAt = UnixTime.nowNanoseconds()
        let latency = elapsedSeconds
        let uniqueID = response.header("apns-unique-id")
        if let spanAttributes, span.isRecording {
            spanAttributes.set("apns.status", response.status)
            spanAttributes.set("apns.attempts", attempt)
            if !trapHits.isEmpty { spanAttributes.set("apns.trap_ids", trapHits.map(\.rawValue)) }
        }
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
        case .auditUnavailable: .failed
        }
        if let spanAttributes, span.isRecording {
            spanAttributes.set("apns.attempts", attempt)
            if let status { spanAttributes.set("apns.status", status) }
            if let reason { spanAttributes.set("apns.reason", reason) }
            if !trapHits.isEmpty { spanAttributes.set("apns.trap_ids", trapHits.map(\.rawValue)) }
            spanAttributes.set("error.type", failure.errorType)
        }
        span.setStatus(SpanStatus(code: .error, message: failure.errorType))
        span.end()
        await publish(SendEvent(
            send: descriptor, outcome: outcome, status: status, reason: reason, errorType: failure.errorType,
            attempts: attempt, trapHits: trapHits, latencySeconds: latency, startedAt: startedAt,
            finishedAt: finishedAt, apnsUniqueID: nil, unregisteredAt: error?.unregisteredAt,
            dropsToken: error?.dropsToken ?? false, attemptLog: attemptLog, deadToken: deadToken(error)))
        return failure
    }

    /// Ends a send whose intent could not be made durable, before its first
    /// attempt: nothing was sent. Only the plain observers (metrics) hear
    /// of it: the journal that refused its intent would refuse its row too,
    /// and a row held in memory for every refusal would grow without bound
    /// while the disk stays full.
    func refuseUndurable() -> SendFailure {
        let finishedAt = UnixTime.nowNanoseconds()
        let failure = SendFailure(
            cause: .auditUnavailable("the audit journal cannot be written (its disk is full, read-only, failing, or not finishing its syncs): nothing was sent"),
            apnsID: request.apnsID, attempts: 0, latencyMilliseconds: elapsedSeconds * 1000, trapHits: [],
            timestamp: Int64(finishedAt / 1_000_000))
        spanAttributes?.set("error.type", failure.errorType)
        span.setStatus(SpanStatus(code: .error, message: failure.errorType))
        span.end()
        client.observers.publishToPlainObservers(SendEvent(
            send: descriptor, outcome: .failed, status: nil, reason: nil, errorType: failure.errorType,
            attempts: 0, trapHits: [], latencySeconds: elapsedSeconds, startedAt: startedAt,
            finishedAt: finishedAt, apnsUniqueID: nil, unregisteredAt: nil,
            dropsToken: false, attemptLog: [], deadToken: nil))
        return failure
    }

    /// Ends the send with the failure its retry decision gave up on.
    func finish(givingUp ending: RetryPolicy.Decision.Ending, on failure: RetryPolicy.Outcome) async -> SendFailure {
        switch failure {
        case .rejected(var error, _):
            error.fix = ending.fix(afterGivingUpOn: error, retries: retry.retriesUsed)
            return await finish(failure: .apns(error), status: error.status, reason: error.code.rawValue, error: error)
        case .transport(var error, _):
            if ending == .mayHaveReachedAPNs {
                error.message += "; the request had gone out whole, so APNs may have taken it: not resent, since this send goes out at most once (an idempotency key, or a broadcast)"
            }
            let cause: SendFailure.Cause = switch ending {
            case .cancelled: .cancelled
            case .outOfTime: .deadlineExceeded
            default: .transport(error)
            }
            return await finish(failure: cause, status: nil, reason: nil)
        }
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
    ///
    /// A send run with ``completions`` (a batch's chunk) hands its event to
    /// the plain observers at once and leaves the durable record to its
    /// group: ``RelayService/recordCompletions(_:)`` journals the chunk's
    /// completions together, before any of them is answered.
    private func publish(_ event: SendEvent) async {
        if let completions {
            client.observers.publishToPlainObservers(event)
            completions.append(event)
        } else {
            await client.observers.publishDurably(event)
        }
        // One line per send, with the ids that find it in the tracing backend
        // and the audit (span lines of the `log` exporter are written at debug; a send logs
        // nothing else when it goes well). The send's span is not the task's
        // current context, so its ids are given here.
        guard client.logger.logLevel <= .info else { return }
        // Its fields in key order, on the stack: the relay's JSON handler
        // writes them straight into the line's bytes, with no metadata
        // dictionary built (twelve keys hashed, its storage allocated) and
        // sorted for it (issue 26); another handler gets the dictionary.
        withUnsafeTemporaryAllocation(of: LogField.self, capacity: Self.sendLineFieldLimit) { storage in
            let count = Self.sendLineFields(of: event, traceParent: traceParent, into: storage)
            defer { _ = storage.baseAddress!.deinitialize(count: count) }
            let fields = UnsafeBufferPointer(rebasing: storage[..<count])
            if let sorted = client.sortedFieldsLogger {
                sorted.log(level: .info, message: "send finished", sortedFields: fields)
            } else {
                client.logger.info("send finished", metadata: Logger.Metadata(fields))
            }
        }
    }

    /// The most fields ``sendLineFields(of:traceParent:into:)`` writes.
    static let sendLineFieldLimit = 12

    /// The `send finished` line's fields, sorted by key, into `storage`
    /// (uninitialized, ``sendLineFieldLimit`` long); returns how many.
    ///
    /// The ids that find the send in the tracing backend and the audit
    /// (span lines of the `log` exporter are written at debug; a send logs
    /// nothing else when it goes well). The send's span is not the task's
    /// current context, so its ids are given here. The device only as its
    /// fingerprint, never the token: on-call asks "what happened to pushes
    /// to this device" of the logs too.
    static func sendLineFields(
        of event: SendEvent, traceParent: TraceParent?, into storage: UnsafeMutableBufferPointer<LogField>
    ) -> Int {
        var count = 0
        func add(_ key: StaticString, _ value: String?) {
            guard let value else { return }
            storage.initializeElement(at: count, to: LogField(key, value))
            count += 1
        }
        // In the UTF-8 order of the keys (the handler checks it in debug builds).
        add("apns_id", event.send.apnsID.value)
        add("app", event.send.app)
        add("attempts", String(event.attempts))
        add("channel_id", event.send.channelID)
        add("latency_ms", String((event.latencySeconds * 1000 * 1000).rounded() / 1000))
        add("operation", event.send.operation.rawValue)
        add("outcome", event.outcome.rawValue)
        add("reason", event.reason ?? event.errorType)
        add("span_id", traceParent?.spanID)
        add("status", event.status.map { String($0) })
        add("token_fingerprint", event.send.tokenFingerprint)
        add("trace_id", traceParent?.traceID)
        return count
    }
}

extension RetryPolicy.Outcome {
    /// APNs' status, for an answer.
    var status: Int? {
        if case .rejected(let error, _) = self { return error.status }
        return nil
    }

    /// APNs' reason, for an answer.
    var reason: String? {
        if case .rejected(let error, _) = self { return error.code.rawValue }
        return nil
    }

    /// The attempt's `error_type`: APNs' reason, or `transport_<kind>`.
    var errorType: String {
        switch self {
        case .rejected(let error, _): error.code.rawValue
        case .transport(let error, _): "transport_\(error.kind.rawValue)"
        }
    }

    /// The trap APNs' answer maps to.
    var trapID: TrapID? {
        if case .rejected(let error, _) = self { return error.trapID }
        return nil
    }
}
