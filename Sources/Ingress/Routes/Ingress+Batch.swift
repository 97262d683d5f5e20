import APNs
import HTTPServer
import Logging
import Relay
import RelayJSON

extension Ingress {
    /// One planned send of a batch, or the reason its item was refused.
    enum PlannedSend: Sendable {
        case send(item: Int, tokenIndex: Int?, app: String, environment: Environment, operation: RelayOperation)
        case refused(item: Int, error: IngressError)
        /// Already handed to its task (the operation is not kept twice).
        case started

        var isSend: Bool {
            if case .send = self { return true }
            return false
        }
    }

    /// Why a batch stopped starting its items before the end.
    enum BatchStop: String, Sendable {
        case draining = "Draining"
        case clientGone = "ClientGone"
        case deadline = "BatchDeadline"

        var message: String {
            switch self {
            case .draining: "not sent: the relay began shutting down before this send started; retry it on another instance"
            case .clientGone: "not sent: the client closed the connection before this send started"
            case .deadline: "not sent: the batch deadline (ingress.batch_deadline_seconds) passed before this send started; retry it in a smaller batch"
            }
        }
    }

    /// `POST /v1/send/batch`: up to ``Configuration/maximumBatchItems`` items,
    /// each a send (or a fan-out over `tokens`), answered with one result per
    /// send in order. A bad item fails alone; a bad envelope fails the batch.
    ///
    /// The batch is admitted whole against ``Configuration/maximumSendsInFlight``
    /// or refused whole (503 Overloaded, nothing sent). It then runs at most
    /// ``Configuration/batchConcurrency`` sends at a time, within the relay-wide
    /// ``Configuration/maximumBatchSendsRunning``, and stops starting sends when
    /// the client hangs up, the relay's drain says so, or ``Configuration/batchDeadlineSeconds``
    /// pass: sends never started are answered `NotSent` (and have no audit row,
    /// since nothing was attempted); sends still running at the deadline are cancelled.
    @Sendable func batch(_ call: Call) async throws(IngressError) -> HTTPResponse {
        let started = ContinuousClock.now
        // Reading a large batch costs CPU and memory before its size is known:
        // with the budget already spent, refuse before parsing anything.
        guard sendBudget.inUse < sendBudget.batchLimit else { throw overloaded(sends: nil) }
        var plan = try planBatch(call)
        let sends = plan.count(where: \.isSend)
        // The guard charged one request; the rest of the batch's sends count too.
        if let rate = call.key.ratePerSecond, plan.count > 1 {
            let burst = call.key.burst ?? rate
            if let wait = limiter.acquire(key: call.key.name, ratePerSecond: rate, burst: burst, cost: min(Double(plan.count - 1), burst)) {
                var error = IngressError(status: 429, type: "RateLimited", message: "this batch of \(plan.count) sends is over API key \(call.key.name)'s \(rate) sends/s limit")
                error.retryAfter = wait
                throw error
            }
        }
        guard sendBudget.admit(sends, batch: true) else { throw overloaded(sends: sends) }

        let run = await runBatch(&plan, sends: sends, call: call, deadline: started + .milliseconds(Int(configuration.batchDeadlineSeconds * 1000)))
        if let stop = run.stop, run.notSent > 0 {
            logger.notice("batch stopped before every send started", metadata: [
                "caller": "\(call.key.name)", "why": "\(stop.rawValue)", "sends": "\(sends)", "not_sent": "\(run.notSent)",
            ])
        }

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
    private func planBatch(_ call: Call) throws(IngressError) -> [PlannedSend] {
        var reader = try FieldReader(try body(call.request), path: "")
        guard let items = try reader.array("items") else { throw .invalid("items", "is required: an array of sends") }
        try reader.rejectUnknown(allowed: "items")
        guard !items.isEmpty else { throw .invalid("items", "must hold at least one send") }
        guard items.count <= configuration.maximumBatchItems else {
            var error = IngressError.invalid("items", "holds \(items.count) sends; at most \(configuration.maximumBatchItems) per batch")
            error.status = 413
            error.type = "PayloadTooLarge"
            throw error
        }
        var plan: [PlannedSend] = []
        for (index, item) in items.enumerated() {
            do {
                let request = try decodeSend(item, call, path: "items[\(index)]", allowFanOut: true)
                let fanOut = request.operations.count > 1 || (item["tokens"] != nil)
                for (tokenIndex, operation) in request.operations.enumerated() {
                    plan.append(.send(item: index, tokenIndex: fanOut ? tokenIndex : nil, app: request.app, environment: request.environment, operation: operation))
                }
            } catch {
                plan.append(.refused(item: index, error: error))
            }
            // A batch larger than the whole send budget could never be admitted: 413, not 503.
            let maximumSends = min(configuration.maximumBatchSends, sendBudget.batchLimit)
            if plan.count > maximumSends {
                var error = IngressError.invalid("items", "fans out to more than \(maximumSends) sends")
                error.status = 413
                error.type = "PayloadTooLarge"
                throw error
            }
        }
        return plan
    }

    struct BatchRun {
        /// Each result's encoded JSON, in request order.
        var entries: [[UInt8]]
        var succeeded = 0
        var notSent = 0
        var stop: BatchStop?
    }

    private enum BatchEvent: Sendable {
        case finished(position: Int, entry: [UInt8], ok: Bool)
        case deadline
    }

    /// Runs the admitted sends of `plan`; gives back every budget unit and lane it took.
    private func runBatch(_ plan: inout [PlannedSend], sends: Int, call: Call, deadline: ContinuousClock.Instant) async -> BatchRun {
        var run = BatchRun(entries: [[UInt8]](repeating: [], count: plan.count))
        var unfinished = sends
        defer { sendBudget.release(unfinished) }

        await withTaskGroup(of: BatchEvent.self) { group in
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
                return .deadline
            }
            var next = 0
            var running = 0

            /// Why the batch should start nothing more, if it should.
            func stopReason() -> BatchStop? {
                if isDraining, batchStartsUntil.withLock({ $0.map { ContinuousClock.now >= $0 } ?? true }) { return .draining }
                if ContinuousClock.now >= deadline { return .deadline }
                if call.request.isClientGone { return .clientGone }
                return nil
            }
            /// Answers refused items up to the next send; false at the end of the plan.
            func skipRefused() -> Bool {
                while next < plan.count {
                    guard case .refused(let item, let error) = plan[next] else { return true }
                    run.entries[next] = Self.batchEntry(item: item, tokenIndex: nil, result: .failure(error)).encoded()
                    next += 1
                }
                return false
            }
            /// Starts the next send on a lane already taken.
            func startNext() {
                let position = next
                next += 1
                running += 1
                guard case .send(let item, let tokenIndex, let app, let environment, let operation) = plan[position] else { return }
                plan[position] = .started
                group.addTask { [self] in
                    let entry: JSONValue
                    let ok: Bool
                    do throws(IngressError) {
                        let result = try await performAdmitted(app, environment, operation, call)
                        entry = Self.batchEntry(item: item, tokenIndex: tokenIndex, result: .success(result))
                        ok = true
                    } catch {
                        entry = Self.batchEntry(item: item, tokenIndex: tokenIndex, result: .failure(error))
                        ok = false
                    }
                    return .finished(position: position, entry: entry.encoded(), ok: ok)
                }
            }

            /// Answers every send not started yet and gives their budget back at once.
            func answerUnstarted(_ stop: BatchStop) {
                while next < plan.count {
                    switch plan[next] {
                    case .refused(let item, let error):
                        run.entries[next] = Self.batchEntry(item: item, tokenIndex: nil, result: .failure(error)).encoded()
                    case .send(let item, let tokenIndex, _, _, _):
                        var error = IngressError(status: 503, type: "NotSent", message: stop.message)
                        error.reason = stop.rawValue
                        run.entries[next] = Self.batchEntry(item: item, tokenIndex: tokenIndex, result: .failure(error)).encoded()
                        run.notSent += 1
                        unfinished -= 1
                        sendBudget.release(1)
                    case .started:
                        break
                    }
                    plan[next] = .started
                    next += 1
                }
            }

            while true {
                if run.stop == nil, let reason = stopReason() {
                    run.stop = reason
                    answerUnstarted(reason)
                }
                if run.stop == nil {
                    while running < configuration.batchConcurrency, skipRefused(), batchLanes.tryAcquire() { startNext() }
                    if running == 0, skipRefused() {
                        // No lane free and nothing of ours running: wait in line,
                        // re-checking now and then whether to stop instead.
                        if await batchLanes.acquire(patience: .milliseconds(100)) {
                            if stopReason() == nil { startNext() } else { batchLanes.release(1) }
                        }
                        continue
                    }
                }
                if running == 0 { break }
                guard let event = await group.next() else { break }
                switch event {
                case .finished(let position, let entry, let ok):
                    run.entries[position] = entry
                    if ok { run.succeeded += 1 }
                    running -= 1
                    unfinished -= 1
                    sendBudget.release(1)
                    batchLanes.release(1)
                case .deadline:
                    // Past the deadline the caller stops waiting: what is still
                    // running is cancelled (each answers Cancelled with its apnsId
                    // and keeps its audit row).
                    if run.stop == nil {
                        run.stop = .deadline
                        answerUnstarted(.deadline)
                    }
                    group.cancelAll()
                }
            }
            group.cancelAll()
        }
        return run
    }

    static func batchEntry(item: Int, tokenIndex: Int?, result: Result<SendResult, IngressError>) -> JSONValue {
        var members: [(String, JSONValue)] = [("item", .integer(Int64(item)))]
        if let tokenIndex { members.append(("tokenIndex", .integer(Int64(tokenIndex)))) }
        switch result {
        case .success(let result):
            members.append(("ok", .bool(true)))
            members += successBody(result).members.map { ($0.key, $0.value) }
        case .failure(let error):
            members.append(("ok", .bool(false)))
            members.append(("error", error.object))
        }
        return .object(JSONObject(members))
    }
}
