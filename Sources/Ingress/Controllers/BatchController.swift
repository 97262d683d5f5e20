import APNs
import HTTPServer
import Logging
import Relay
import RelayJSON

/// `POST /v1/send/batch`: reads the batch into a ``BatchPlan``, admits it
/// whole against the send budget and the caller's rate, hands it to the
/// ``BatchRunner`` and answers every send in order.
struct BatchController: Sendable {
    let configuration: Ingress.Configuration
    let service: RelayService
    let sends: SendController
    let limiter: RateLimiter
    let logger: Logger

    var batches: BatchRunner { sends.batches }
    var idempotency: IdempotencyGate { sends.idempotency }
    var sendBudget: SendBudget { sends.batches.budget }

    /// `POST /v1/send/batch`: up to ``Configuration/maximumBatchItems`` items,
    /// each a send (or a fan-out over `tokens`), answered with one result per
    /// send in order. A bad item fails alone; a bad envelope fails the batch.
    ///
    /// The batch is admitted whole against ``Configuration/maximumSendsInFlight``
    /// or refused whole (503 Overloaded, nothing sent). It then runs its sends
    /// on at most ``Configuration/batchConcurrency`` workers (``BatchRunner/runBatch(_:sends:call:deadline:)``),
    /// within the relay-wide ``Configuration/maximumBatchSendsRunning``, and stops starting sends when
    /// the client hangs up, the relay's drain says so, or ``Configuration/batchDeadlineSeconds``
    /// pass: sends never started are answered `NotSent` (and have no audit row,
    /// since nothing was attempted); sends still running at the deadline are cancelled.
    @Sendable func batch(_ call: Ingress.Call) async throws(IngressError) -> HTTPResponse {
        let started = ContinuousClock.now
        // Reading a large batch costs CPU and memory before its size is known:
        // with the budget already spent, refuse before parsing anything.
        guard sendBudget.inUse < sendBudget.batchLimit else { throw sends.overloaded(sends: nil) }
        // A batch that waited for a thread while its client gave up is not read at all.
        guard !call.request.isClientGone else {
            var error = IngressError(status: 503, type: .notSent, message: BatchStop.clientGone.message)
            error.reason = BatchStop.clientGone.rawValue
            throw error
        }
        let plan = try planBatch(call)
        // Items refused with an audit row (an invalid snapshot) are answered in
        // this batch's results: their rows must be durable before it.
        if plan.items.contains(where: { if case .refused(let error) = $0 { error.isRecordedRefusal } else { false } }) {
            await service.waitUntilRecorded()
        }
        let sends = plan.sendCount
        // The guard charged one request; the rest of the batch's sends count too.
        if let rate = call.key.ratePerSecond, plan.count > 1 {
            let burst = call.key.burst ?? rate
            // A bucket never holds more than the burst, so a bigger batch could never
            // be charged in full: a Retry-After would invite the same 429 forever.
            guard Double(plan.count) <= burst else { throw Self.batchOverBurst(sends: plan.count, key: call.key, burst: burst) }
            if let wait = limiter.acquire(key: call.key.name, ratePerSecond: rate, burst: burst, cost: Double(plan.count - 1)) {
                var error = IngressError(status: 429, type: .rateLimited, message: "this batch of \(plan.count) sends is over API key \(call.key.name)'s \(rate) sends/s limit")
                error.retryAfter = wait
                throw error
            }
        }
        guard sendBudget.admit(sends, batch: true) else { throw self.sends.overloaded(sends: sends) }

        var run = await batches.runBatch(plan, sends: sends, call: call, deadline: started + .milliseconds(Int(configuration.batchDeadlineSeconds * 1000)))
        if let stop = run.stop, run.notSent > 0 {
            batches.countNotSent(run.notSent, stop)
            logger.notice("batch stopped before every send started", metadata: [
                "caller": "\(call.key.name)", "why": "\(stop.rawValue)", "sends": "\(sends)", "not_sent": "\(run.notSent)",
            ])
        }

        answerRepeats(plan, &run)

        // Each result was encoded as it came in: the batch keeps ~200 bytes per
        // send instead of a JSON tree per result.
        var body: [UInt8] = []
        body.reserveCapacity(run.entries.reduce(64) { $0 + $1.count + 1 })
        body.append(contentsOf: #"{"results":["#.utf8)
        for (index, entry) in run.entries.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body.append(contentsOf: entry)
        }
        body.append(contentsOf: #"],"summary":"#.utf8)
        var summary: [(String, JSONValue)] = [
            ("total", .integer(Int64(run.entries.count))),
            ("succeeded", .integer(Int64(run.succeeded))),
            ("failed", .integer(Int64(run.entries.count - run.succeeded))),
        ]
        // Only when it happened: a batch that ran to the end answers as it always did.
        if run.notSent > 0 { summary.append(("notSent", .integer(Int64(run.notSent)))) }
        JSONValue.object(JSONObject(summary)).encode(into: &body)
        body.append(UInt8(ascii: "}"))
        return .json(200, body)
    }

    /// Decodes the envelope and every item. The request's JSON tree lives only
    /// in here: what a running batch keeps is the plan.
    private func planBatch(_ call: Ingress.Call) throws(IngressError) -> BatchPlan {
        var reader = try FieldReader(try RequestReading.parseBody(call.request), path: "")
        guard let items = try reader.array("items") else { throw .invalid("items", "is required: an array of sends") }
        try reader.rejectUnknown(allowed: "items")
        guard !items.isEmpty else { throw .invalid("items", "must hold at least one send") }
        guard items.count <= configuration.maximumBatchItems else {
            var error = IngressError.invalid("items", "holds \(items.count) sends; at most \(configuration.maximumBatchItems) per batch")
            error.status = 413
            error.type = .payloadTooLarge
            throw error
        }
        // A batch larger than the batches' whole share of the budget could never be admitted: 413, not 503.
        let maximumSends = min(configuration.maximumBatchSends, sendBudget.batchLimit)
        var plan = BatchPlan()
        var firstWithKey: [String: Int] = [:]
        let snapshots = SendRequestDecoder.SnapshotMemo()
        for (index, item) in items.enumerated() {
            do {
                var item = item
                let key = try IdempotencyKeys.itemIdempotencyKey(&item, path: "items[\(index)]")
                let request = try sends.decodeSend(item, call, path: "items[\(index)]", allowFanOut: true, snapshots: snapshots)
                let fanOut = request.operations.count > 1 || (item["tokens"] != nil)
                if let key {
                    let keyed = try planKeyedItem(key, item: item, index: index, app: request.app, fanOut: fanOut, call: call, plan: &plan, firstWithKey: &firstWithKey)
                    guard keyed else { continue }
                }
                plan.items.append(.send(app: request.app, environment: request.environment, template: request.operations[0], fanOut: fanOut))
                // A single send is its template as it is: no token to swap in when it runs.
                for (tokenIndex, operation) in request.operations.enumerated() {
                    plan.sends.append(.init(item: Int32(index), tokenIndex: Int32(tokenIndex), token: fanOut ? operation.deviceToken : nil))
                }
            } catch {
                plan.items.append(.refused(error))
                plan.sends.append(.init(item: Int32(index), tokenIndex: 0, token: nil))
            }
            if plan.count > maximumSends {
                var error = IngressError.invalid("items", "fans out to more than \(maximumSends) sends")
                error.status = 413
                error.type = .payloadTooLarge
                throw error
            }
        }
        return plan
    }

    /// 429 `BatchExceedsBurst`, without Retry-After: the batch must be split, not retried.
    static func batchOverBurst(sends: Int, key: APIKey, burst: Double) -> IngressError {
        let limit = Int(exactly: burst.rounded(.down)).map(String.init) ?? "\(burst)"
        return IngressError(
            status: 429, type: .batchExceedsBurst,
            message: "items: this batch fans out to \(sends) sends, more than API key \(key.name)'s burst of \(limit); "
                + "it can never pass as is: split it into batches of at most \(limit) sends",
            field: "items")
    }

    /// Plans a keyed batch item: true when it is to be sent (or replayed from
    /// the store) like any item; false when it repeats the key of an earlier
    /// item of this batch with the same send, and was planned as that item's
    /// repeat. The same key with another send is refused (422).
    func planKeyedItem(
        _ key: String, item: JSONValue, index: Int, app: String, fanOut: Bool, call: Ingress.Call, plan: inout BatchPlan, firstWithKey: inout [String: Int]
    ) throws(IngressError) -> Bool {
        let field = "items[\(index)].idempotencyKey"
        // One key names one send, as one apnsId does.
        guard !fanOut else { throw .invalid(field, "names one send: give it with token, not tokens") }
        let keyed = IdempotencyKeys.keyedSend(key, field: field, app: app, call: call, canonical: IdempotencyKeys.canonical("send", [], item))
        guard let first = firstWithKey[keyed.claim.keyHash] else {
            firstWithKey[keyed.claim.keyHash] = index
            plan.keys[index] = keyed
            return true
        }
        guard plan.keys[first]?.claim.requestHash == keyed.claim.requestHash else { throw IdempotencyGate.keyReused(keyed) }
        plan.repeats.append((position: plan.sends.count, item: index, first: first))
        // A placeholder until the batch has run; nothing is sent for it.
        plan.items.append(.refused(IngressError(status: 409, type: .idempotencyKeyInFlight, message: "\(field) repeats items[\(first)]'s key", field: field)))
        plan.sends.append(.init(item: Int32(index), tokenIndex: 0, token: nil))
        return false
    }

    /// Answers each item that repeated an earlier item's key with that item's
    /// answer, marked as a replay; nothing was sent for it.
    func answerRepeats(_ plan: BatchPlan, _ run: inout BatchRun) {
        for entry in plan.repeats {
            if let answer = run.answers[entry.first] {
                run.entries[entry.position] = SendAnswers.replayEntry(item: entry.item, answer)
                if answer.httpStatus == 200 { run.succeeded += 1 }
                idempotency.onReplay?(plan.keys[entry.first]?.app ?? "")
            } else {
                var error = IngressError(
                    status: 409, type: .idempotencyKeyInFlight,
                    message: "items[\(entry.item)].idempotencyKey repeats items[\(entry.first)]'s key, which was not sent; retry with the key to send it once",
                    field: "items[\(entry.item)].idempotencyKey")
                error.retryAfter = 1
                run.entries[entry.position] = SendAnswers.batchEntry(item: entry.item, tokenIndex: nil, result: .failure(error))
            }
        }
    }
}

extension RelayOperation {
    /// The device token the operation sends to; nil for broadcasts and channel management.
    var deviceToken: String? {
        switch self {
        case .alert(let token, _, _), .notification(let token, _, _), .background(let token, _, _), .start(let token, _, _, _, _, _),
            .update(let token, _, _, _), .end(let token, _, _, _), .raw(let token, _, _, _), .widget(let token, _, _):
            token
        case .broadcast, .createChannel, .listChannels, .readChannel, .deleteChannel, .rawChannel:
            nil
        }
    }

    /// The same operation to another device token (a batch fan-out's sends differ only in it).
    func replacingDeviceToken(_ token: String) -> RelayOperation {
        switch self {
        case .alert(_, let snapshot, let options): .alert(token: token, snapshot: snapshot, options: options)
        case .notification(_, let snapshot, let options): .notification(token: token, snapshot: snapshot, options: options)
        case .background(_, let customData, let options): .background(token: token, customData: customData, options: options)
        case .start(_, let snapshot, let attributes, let attributesType, let live, let options):
            .start(token: token, snapshot: snapshot, attributes: attributes, attributesType: attributesType, live: live, options: options)
        case .update(_, let snapshot, let live, let options): .update(token: token, snapshot: snapshot, live: live, options: options)
        case .end(_, let snapshot, let live, let options): .end(token: token, snapshot: snapshot, live: live, options: options)
        case .raw(_, let payload, let headers, let bytes): .raw(token: token, payload: payload, headers: headers, bytes: bytes)
        case .widget(_, let snapshot, let options): .widget(token: token, snapshot: snapshot, options: options)
        case .broadcast, .createChannel, .listChannels, .readChannel, .deleteChannel, .rawChannel: self
        }
    }
}
