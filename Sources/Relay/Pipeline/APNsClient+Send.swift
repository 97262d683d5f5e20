public import APNs
import HTTP2
import Instrumentation
import Logging
import Tracing
import RelayBasics

extension APNsClient {
    /// Sends `request` until APNs accepts it, rejects it for good, or the
    /// retry budget or deadline runs out. Exactly one ``SendEvent`` is
    /// reported per call, whatever happens.
    ///
    /// Every attempt carries the request's apns-id, so APNs deduplicates
    /// retries. An ExpiredProviderToken answer re-mints the JWT and retries
    /// once; transport failures and every 5xx retry with backoff; Retry-After
    /// is a floor on the wait; cancellation wakes a backoff sleep at once.
    public func send(_ request: APNsRequest, context: SendContext = SendContext()) async throws(SendFailure)
        -> SendResult
    {
        var run = SendRun(client: self, request: request, context: context)
        return try await run.execute()
    }
}

/// The state of one send through its attempts.
struct SendRun {
    let client: APNsClient
    let request: APNsRequest
    let descriptor: SendDescriptor
    let span: any Span
    let policy: RetryPolicy
    let clock = ContinuousClock()
    let start: ContinuousClock.Instant
    let startedAt: UInt64
    /// The kill switch was engaged when the send began (its policy has no retries).
    let retriesDisabled: Bool

    var attempt = 0
    var retriesUsed = 0
    var unprocessedResends = 0
    var refreshedToken = false
    var trapHits: [TrapID] = []
    var attemptLog: [AttemptSummary] = []

    init(client: APNsClient, request: APNsRequest, context: SendContext) {
        self.client = client
        self.request = request
        startedAt = UnixTime.nowNanoseconds()
        start = clock.now
        retriesDisabled = client.killSwitch.isEngaged
        policy = client.effectivePolicy(for: request.priority)
        let parent = context.instrumentation ?? InstrumentationContext.current ?? .topLevel
        span = client.tracer.startSpan("apns.send", context: parent, ofKind: .client)
        descriptor = SendDescriptor(
            app: client.configuration.app, environment: client.configuration.environment,
            operation: request.operation, apnsID: request.apnsID, pushType: request.pushType,
            priority: request.priority, topic: request.topic, tokenFingerprint: request.tokenFingerprint,
            channelID: request.channelID, snapshotID: context.snapshotID, surfaceID: context.surfaceID,
            payloadBytes: request.body.count, caller: context.caller,
            traceID: client.tracer.traceParentHeader(for: span.context).flatMap { TraceParent(header: $0)?.traceID })
        span.updateAttributes { attributes in
            attributes["apns.operation"] = request.operation.rawValue
            attributes["apns.app"] = client.configuration.app
            attributes["apns.environment"] = client.configuration.environment.rawValue
            attributes["apns.id"] = request.apnsID.value
            attributes["apns.payload_bytes"] = request.body.count
            if let pushType = request.pushType { attributes["apns.push_type"] = pushType.rawValue }
            if let priority = request.priority { attributes["apns.priority"] = priority.rawValue }
            if let fingerprint = request.tokenFingerprint { attributes["apns.token_fingerprint"] = fingerprint }
            if let channel = request.channelID { attributes["apns.channel_id"] = channel }
            if let snapshot = context.snapshotID { attributes["surface.snapshot_id"] = snapshot }
        }
    }

    var elapsedSeconds: Double { (clock.now - start).seconds }

    mutating func execute() async throws(SendFailure) -> SendResult {
        // The intent is durable before anything leaves: if the relay dies
        // after APNs answered and before the result is recorded, the send
        // still gets a row (outcome `unknown`) instead of none.
        await client.observers.recordIntent(descriptor, startedAt: startedAt)
        while true {
            if Task.isCancelled { throw await finish(failure: .cancelled, status: nil, reason: nil) }
            attempt += 1
            let attemptSpan = client.tracer.startSpan("apns.attempt", context: span.context, ofKind: .client)
            attemptSpan.attributes["apns.attempt"] = attempt
            let attemptStart = clock.now

            let authorization: ProviderAuthorization
            do {
                authorization = try client.authorization.currentAuthorization()
            } catch {
                attemptSpan.setStatus(SpanStatus(code: .error, message: "credentials"))
                attemptSpan.end()
                throw await finish(failure: .credentials("\(error)"), status: nil, reason: nil)
            }

            let remaining = client.configuration.sendDeadline - elapsedSeconds
            // The deadline, not the per-attempt timeout, bounds this attempt: a
            // timeout now means the send ran out of time (504), not that APNs
            // could not be reached (502).
            let deadlineBoundsAttempt = remaining <= client.configuration.requestTimeout
            let origin = request.origin(in: client.configuration.endpoints)
            let wireRequest = HTTP2Request(
                method: request.method.rawValue, path: request.path, authority: origin.authority,
                headers: request.headers + [HTTPHeader("authorization", authorization.headerValue)],
                body: request.body, timeout: max(0.001, min(client.configuration.requestTimeout, remaining)))

            let answer: Result<HTTP2Response, TransportError>
            do {
                answer = .success(try await client.transport.send(wireRequest, to: origin))
            } catch {
                answer = .failure(error)
            }
            let duration = (clock.now - attemptStart).seconds

            switch answer {
            case .success(let response):
                client.clockSkew?.observe(dateHeader: response.header("date"), now: UnixTime.nowSeconds())
                attemptSpan.attributes["apns.status"] = response.status
                attemptLog.append(AttemptSummary(status: response.status, reason: nil, durationSeconds: duration))
                if (200..<300).contains(response.status) {
                    attemptSpan.end()
                    report(attemptStatus: response.status, reason: nil, errorType: nil, trap: nil, duration: duration, final: true, backoff: nil)
                    return await succeed(response)
                }
                let error = APNsError.fromResponse(status: response.status, body: response.body, apnsID: request.apnsID)
                attemptLog[attemptLog.count - 1].reason = error.code.rawValue
                if let trap = error.trapID, !trapHits.contains(trap) { trapHits.append(trap) }
                attemptSpan.attributes["apns.reason"] = error.code.rawValue
                attemptSpan.setStatus(SpanStatus(code: .error, message: error.code.rawValue))
                attemptSpan.end()

                var delay: Double? = nil
                if error.code.rawValue == "ExpiredProviderToken" {
                    client.authorization.invalidate(authorization)
                    if !refreshedToken, retriesUsed < policy.maxRetries { delay = 0 }
                    refreshedToken = true
                } else if policy.isRetryable(error), retriesUsed < policy.maxRetries {
                    let retryAfter = RetryAfter.seconds(from: response.header("retry-after"), now: UnixTime.nowSeconds())
                    delay = policy.delay(beforeRetry: retriesUsed, retryAfter: retryAfter)
                }
                var cutByDeadline = false
                if let wait = delay, elapsedSeconds + wait >= client.configuration.sendDeadline {
                    delay = nil
                    cutByDeadline = true
                }
                report(attemptStatus: response.status, reason: error.code.rawValue, errorType: error.code.rawValue,
                       trap: error.trapID, duration: duration, final: delay == nil, backoff: delay)
                guard let wait = delay else {
                    var final = error
                    final.fix = fix(afterGivingUpOn: error, cutByDeadline: cutByDeadline)
                    throw await finish(failure: .apns(final), status: response.status, reason: error.code.rawValue, error: final)
                }
                retriesUsed += 1
                try await backoff(wait, lastFailure: .apns(error), status: response.status, reason: error.code.rawValue)

            case .failure(let error):
                attemptLog.append(AttemptSummary(status: nil, reason: "transport_\(error.kind.rawValue)", durationSeconds: duration))
                attemptSpan.attributes["apns.transport_error"] = error.kind.rawValue
                attemptSpan.setStatus(SpanStatus(code: .error, message: error.kind.rawValue))
                attemptSpan.end()
                if error.kind == .cancelled {
                    report(attemptStatus: nil, reason: nil, errorType: "transport_cancelled", trap: nil, duration: duration, final: true, backoff: nil)
                    throw await finish(failure: .cancelled, status: nil, reason: nil)
                }
                var delay: Double? = nil
                var spendsBudget = true
                if error.kind == .unprocessed, unprocessedResends < client.configuration.maximumUnprocessedResends {
                    // The server never saw it: resend at once, free of retry budget.
                    delay = 0
                    spendsBudget = false
                } else if error.isRetryable, retriesUsed < policy.maxRetries {
                    delay = policy.delay(beforeRetry: retriesUsed)
                }
                // Out of time: the attempt's timeout was the deadline's, or a retry
                // the budget allowed would start past the deadline.
                var outOfTime = error.kind == .timeout && deadlineBoundsAttempt
                if let wait = delay, elapsedSeconds + wait >= client.configuration.sendDeadline {
                    delay = nil
                    outOfTime = true
                }
                report(attemptStatus: nil, reason: nil, errorType: "transport_\(error.kind.rawValue)", trap: nil,
                       duration: duration, final: delay == nil, backoff: delay)
                guard let wait = delay else {
                    throw await finish(failure: outOfTime ? .deadlineExceeded : .transport(error), status: nil, reason: nil)
                }
                if spendsBudget { retriesUsed += 1 } else { unprocessedResends += 1 }
                try await backoff(wait, lastFailure: .transport(error), status: nil, reason: nil)
            }
        }
    }

    /// Waits before the next attempt; a cancelled task wakes at once and fails the send.
    private func backoff(_ seconds: Double, lastFailure: SendFailure.Cause, status: Int?, reason: String?) async throws(SendFailure) {
        guard seconds > 0 else { return }
        do {
            try await client.sleep(seconds)
        } catch {
            throw await finish(failure: .cancelled, status: status, reason: reason)
        }
    }
}

