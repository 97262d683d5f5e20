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
    /// Every attempt carries the request's apns-id (APNs does not
    /// deduplicate by it: a resend is a second push). Whether and when to
    /// try again is ``RetryPolicy/decide(_:_:random:)``'s
    /// call, from the reason catalog's rule; this loop only carries it out
    /// (re-minting the JWT when told to). Cancellation wakes a backoff sleep
    /// at once. A request a GOAWAY left unprocessed was already resent by
    /// the transport's pool; it is not resent here.
    public func send(_ request: APNsRequest, context: SendContext = SendContext()) async throws(SendFailure)
        -> SendResult
    {
        var run = SendRun(client: self, request: request, context: context)
        return try await run.execute()
    }
}

/// The state of one send through its attempts.
struct SendRun: Sendable {
    let client: APNsClient
    let request: APNsRequest
    let descriptor: SendDescriptor
    let span: any Span
    /// Sets the send span's attributes (one at a time where the span takes
    /// them so); nil for a span that records nothing (not even asked: the
    /// cast costs a send that exports no span a few thousand instructions).
    let spanAttributes: SpanAttributeWriter?
    /// The send span as a starter of its attempts' spans, when it is one
    /// (asked once, for a span that records): no context built per attempt.
    let childSpans: (any ChildSpanStarting)?
    /// The send span's `traceparent` (its trace and span ids), read once: a
    /// span's ids do not change, and each read cast the span (issue 26).
    let traceParent: TraceParent?
    /// The configured policy, stretched for the request's priority.
    let policy: RetryPolicy
    let clock = ContinuousClock()
    let start: ContinuousClock.Instant
    let startedAt: UInt64

    var attempt = 0
    /// Retries spent, the token refresh, the kill switch as it was when the send began.
    var retry: RetryPolicy.State
    var trapHits: [TrapID] = []
    var attemptLog: [AttemptSummary] = []
    /// Where the durable record of this send's completion goes when it runs
    /// with others (``RelayService/run(_:completingWith:)``); nil: recorded
    /// on its own before the send returns.
    var completions: SendCompletions?

    init(client: APNsClient, request: APNsRequest, context: SendContext) {
        self.client = client
        self.request = request
        startedAt = UnixTime.nowNanoseconds()
        start = clock.now
        retry = RetryPolicy.State(
            retriesDisabled: client.killSwitch.isEngaged, secondsLeft: client.configuration.sendDeadline,
            atMostOnce: context.idempotencyKeyHash != nil || request.operation == .broadcast)
        policy = client.configuration.retryPolicy.effective(for: request.priority)
        let parent = context.instrumentation ?? InstrumentationContext.current ?? .topLevel
        let started = client.spans.start("apns.send", context: parent, ofKind: .client)
        (span, spanAttributes, childSpans, traceParent) = (started.span, started.attributes, started.children, started.traceParent)
        descriptor = SendDescriptor(
            app: client.configuration.app, environment: client.configuration.environment,
            operation: request.operation, apnsID: request.apnsID, pushType: request.pushType,
            priority: request.priority, topic: request.topic, tokenFingerprint: request.tokenFingerprint,
            channelID: request.channelID, snapshotID: context.snapshotID, surfaceID: context.surfaceID,
            payloadBytes: request.body.count, caller: context.caller,
            traceID: traceParent?.traceID,
            idempotencyKeyHash: context.idempotencyKeyHash)
        // A span nobody will export (the log exporter below `info`, an unsampled trace) takes no attributes.
        if let spanAttributes { Self.describe(spanAttributes, request, client: client, context: context) }
    }

    private static func describe(_ attributes: SpanAttributeWriter, _ request: APNsRequest, client: APNsClient, context: SendContext) {
        attributes.set(
            SendSpanAttributes(
                operation: request.operation.rawValue, app: client.configuration.app,
                environment: client.configuration.environment.rawValue, apnsID: request.apnsID.value,
                payloadBytes: request.body.count, pushType: request.pushType?.rawValue,
                priority: request.priority?.rawValue, tokenFingerprint: request.tokenFingerprint,
                channelID: request.channelID, snapshotID: context.snapshotID))
    }

    var elapsedSeconds: Double { (clock.now - start).seconds }

    mutating func execute() async throws(SendFailure) -> SendResult {
        // The intent is durable before anything leaves: if the relay dies
        // after APNs answered and before the result is recorded, the send
        // still gets a row (outcome `unknown`) instead of none.
        // And when it cannot be made durable, nothing leaves: a send the
        // relay could not prove it made is refused (503), not sent blind.
        guard await client.observers.recordIntent(descriptor, startedAt: startedAt) else { throw refuseUndurable() }
        return try await executeAnnounced()
    }

    /// ``execute()`` for a send whose intent is already durable: a batch
    /// records the intents of the sends it starts together
    /// (``RelayService/startSends(app:environment:_:context:)``).
    mutating func executeAnnounced() async throws(SendFailure) -> SendResult {
        while true {
            if Task.isCancelled { throw await finish(failure: .cancelled, status: nil, reason: nil) }
            attempt += 1
            // A retry is journaled before it leaves, as the intent is before
            // the first attempt: a send the relay dies during is recovered
            // with every attempt that may have reached APNs.
            if attempt > 1 { await client.observers.recordRetry(descriptor, startedAt: startedAt, attempt: attempt) }
            // The attempt's span only under a send span that records: a child
            // of one that is not exported is not exported either (the log
            // exporter below `info`, an unsampled trace), and nothing reads
            // its ids, so minting them, its context and its object was waste.
            let attemptSpan: (any Span)?
            // Attributes only for a span that will be exported (see `init`).
            let attemptAttributes: SpanAttributeWriter?
            if let childSpans {
                let child = childSpans.startChild("apns.attempt", ofKind: .client)
                (attemptSpan, attemptAttributes) = (child, child.isRecording ? SpanAttributeWriter(setter: child) : nil)
            } else if span.isRecording {
                let child = client.tracer.startSpan("apns.attempt", context: span.context, ofKind: .client)
                (attemptSpan, attemptAttributes) = (child, child.isRecording ? SpanAttributeWriter(child) : nil)
            } else {
                (attemptSpan, attemptAttributes) = (nil, nil)
            }
            attemptAttributes?.set("apns.attempt", attempt)
            let attemptStart = clock.now

            let authorization: ProviderAuthorization
            do {
                authorization = try client.authorization.currentAuthorization()
            } catch {
                attemptSpan?.setStatus(SpanStatus(code: .error, message: "credentials"))
                attemptSpan?.end()
                throw await finish(failure: .credentials("\(error)"), status: nil, reason: nil)
            }

            let remaining = client.configuration.sendDeadline - elapsedSeconds
            // The deadline, not the per-attempt timeout, bounds this attempt: a
            // timeout now means the send ran out of time (504), not that APNs
            // could not be reached (502).
            let deadlineBoundsAttempt = remaining <= client.configuration.requestTimeout
            let origin = request.origin(in: client.configuration.endpoints)
            // OpenTelemetry's semantic conventions for the peer (server.*), the relay's own under apns.*.
            attemptAttributes?.set("server.address", origin.host)
            attemptAttributes?.set("server.port", origin.port)
            var headers: [HTTPHeader] = []
            headers.reserveCapacity(request.headers.count + 1)
            headers.append(contentsOf: request.headers)
            headers.append(HTTPHeader("authorization", authorization.headerValue))
            let wireRequest = HTTP2Request(
                method: request.method.rawValue, path: request.path, authority: origin.authority,
                headers: headers,
                body: request.body, timeout: max(0.001, min(client.configuration.requestTimeout, remaining)))

            let answer: Result<HTTP2Response, TransportError>
            do {
                answer = .success(try await client.transport.send(wireRequest, to: origin))
            } catch {
                answer = .failure(error)
            }
            let duration = (clock.now - attemptStart).seconds

            let failure: RetryPolicy.Outcome
            switch answer {
            case .success(let response):
                client.clockSkew?.observe(dateHeader: response.header("date"), now: UnixTime.nowSeconds())
                attemptAttributes?.set("apns.status", response.status)
                attemptLog.append(AttemptSummary(status: response.status, reason: nil, durationSeconds: duration))
                if (200..<300).contains(response.status) {
                    attemptSpan?.end()
                    report(attemptStatus: response.status, reason: nil, errorType: nil, trap: nil, duration: duration, final: true)
                    return await succeed(response)
                }
                let error = APNsError.fromResponse(status: response.status, body: response.body, apnsID: request.apnsID)
                attemptLog[attemptLog.count - 1].reason = error.code.rawValue
                if let trap = error.trapID, !trapHits.contains(trap) { trapHits.append(trap) }
                if let attemptAttributes {
                    attemptAttributes.set("apns.reason", error.code.rawValue)
                    attemptAttributes.set("error.type", error.code.rawValue)
                    if let trap = error.trapID { attemptAttributes.set("apns.trap_ids", [trap.rawValue]) }
                }
                attemptSpan?.setStatus(SpanStatus(code: .error, message: error.code.rawValue))
                attemptSpan?.end()
                let retryAfter = RetryAfter.seconds(from: response.header("retry-after"), now: UnixTime.nowSeconds())
                failure = .rejected(error, retryAfter: retryAfter)

            case .failure(let error):
                attemptLog.append(AttemptSummary(status: nil, reason: "transport_\(error.kind.rawValue)", durationSeconds: duration))
                if let attemptAttributes {
                    attemptAttributes.set("apns.transport_error", error.kind.rawValue)
                    attemptAttributes.set("error.type", "transport_\(error.kind.rawValue)")
                }
                attemptSpan?.setStatus(SpanStatus(code: .error, message: error.kind.rawValue))
                attemptSpan?.end()
                failure = .transport(error, attemptCutByDeadline: deadlineBoundsAttempt)
            }

            retry.secondsLeft = client.configuration.sendDeadline - elapsedSeconds
            let decision = policy.decide(failure, retry)
            if decision.refreshesToken { client.authorization.invalidate(authorization) }
            report(failure, duration: duration, decision: decision)
            retry.record(decision)
            switch decision.next {
            case .retry(let wait):
                try await backoff(wait, after: failure)
            case .giveUp(let ending):
                throw await finish(givingUp: ending, on: failure)
            }
        }
    }

    /// Waits before the next attempt; a cancelled task wakes at once and fails the send.
    private func backoff(_ seconds: Double, after failure: RetryPolicy.Outcome) async throws(SendFailure) {
        guard seconds > 0 else { return }
        do {
            try await client.sleep(seconds)
        } catch {
            throw await finish(failure: .cancelled, status: failure.status, reason: failure.reason)
        }
    }
}

