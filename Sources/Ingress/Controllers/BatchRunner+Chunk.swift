import APNs
import Relay

extension BatchRunner {
    /// Starts the sends at `positions` together and runs them at once, each
    /// holding one lane and one budget unit that it gives back as it ends.
    func runChunk(_ positions: [Int], _ progress: BatchProgress, call: Ingress.Call) async {
        let plan = progress.plan
        var orders: [SendOrder] = []
        orders.reserveCapacity(positions.count)
        var ordered: [ChunkSend] = []
        ordered.reserveCapacity(positions.count)
        var keyed: [(send: ChunkSend, key: KeyedSend, order: SendOrder)] = []
        for position in positions {
            guard case .send(let item, let tokenIndex, let app, let environment, let operation) = plan.resolve(position) else {
                settle(progress, ChunkSend(position: position, item: 0, tokenIndex: nil), entry: [], ok: false)
                continue
            }
            let send = ChunkSend(position: position, item: item, tokenIndex: tokenIndex)
            let order = SendOrder(app: app, environment: environment, operation: operation)
            // A keyed item claims its key before it sends: it starts on its own.
            if let key = plan.keys[item] {
                keyed.append((send, key, order))
            } else {
                orders.append(order)
                ordered.append(send)
            }
        }
        var started: [(ChunkSend, StartedSend)] = []
        if !orders.isEmpty {
            var refused = false
            for (send, result) in zip(ordered, await service.startSends(orders, context: call.context)) {
                switch result {
                case .success(let run): started.append((send, run))
                case .failure(let failure):
                    // Refused before any I/O: its row must be durable before the answer.
                    if !refused { await service.waitUntilRecorded() }
                    refused = true
                    settle(progress, send, result: .failure(answer(to: failure)))
                }
            }
        }
        // The chunk's completions are journaled together once all of its
        // sends have run: before the batch is answered, which is only after
        // every chunk has run.
        let completions = SendCompletions(capacity: started.count)
        if keyed.isEmpty, started.count <= 1 {
            if let (send, run) = started.first {
                await runStarted(run, send, progress, completions)
                await service.recordCompletions(completions)
            }
            return
        }
        await withDiscardingTaskGroup { group in
            for (send, key, order) in keyed {
                group.addTask { [self] in
                    let (entry, ok, answer) = await performKeyedItem(key, item: send.item, call) { call throws(IngressError) in
                        try await performAdmitted(order.app, order.environment, order.operation, call)
                    }
                    settle(progress, send, entry: entry, ok: ok, answer: answer)
                }
            }
            for (send, run) in started.dropFirst() {
                group.addTask { [self] in await runStarted(run, send, progress, completions) }
            }
            // The first runs on the worker itself: one child task fewer per chunk.
            if let (send, run) = started.first { await runStarted(run, send, progress, completions) }
        }
        await service.recordCompletions(completions)
    }

    /// A send already counted in the budget (a keyed batch item's, or `/v1/send`'s).
    func performAdmitted(_ app: String, _ environment: Environment, _ operation: RelayOperation, _ call: Ingress.Call) async throws(IngressError) -> SendResult {
        do {
            return try await service.send(app: app, environment: environment, operation, context: call.context)
        } catch {
            throw answer(to: error)
        }
    }

    /// The answer to a send that failed (see ``SendAnswers/answer(to:draining:)``).
    func answer(to error: SendFailure) -> IngressError {
        SendAnswers.answer(to: error, draining: drain.isDraining)
    }

    /// One keyed batch item: its result entry, whether it succeeded, and the
    /// answer an item repeating its key in the same batch gets (nil when
    /// nothing was sent).
    func performKeyedItem(
        _ keyed: KeyedSend, item: Int, _ call: Ingress.Call, _ send: (Ingress.Call) async throws(IngressError) -> SendResult
    ) async -> (entry: [UInt8], ok: Bool, answer: IdempotentAnswer?) {
        do throws(IngressError) {
            switch try await idempotency.runKeyed(keyed, call, send) {
            case .replay(let answer):
                return (SendAnswers.replayEntry(item: item, answer), answer.httpStatus == 200, answer)
            case .sent(let result):
                let answer = await idempotency.recordKeyed(keyed, result, SendAnswers.sendResponse(result))
                let ok = if case .success = result { true } else { false }
                return (SendAnswers.batchEntry(item: item, tokenIndex: nil, result: result), ok, answer)
            }
        } catch {
            return (SendAnswers.batchEntry(item: item, tokenIndex: nil, result: .failure(error)), false, nil)
        }
    }

    /// Where a send of a chunk answers in the batch.
    private struct ChunkSend: Sendable {
        var position: Int
        var item: Int
        var tokenIndex: Int?
    }

    private func runStarted(_ run: StartedSend, _ send: ChunkSend, _ progress: BatchProgress, _ completions: SendCompletions) async {
        do throws(SendFailure) {
            settle(progress, send, result: .success(try await service.run(run, completingWith: completions)))
        } catch {
            settle(progress, send, result: .failure(answer(to: error)))
        }
    }

    /// Records a send's result and gives back its budget unit and lane.
    private func settle(_ progress: BatchProgress, _ send: ChunkSend, result: Result<SendResult, IngressError>) {
        let ok = if case .success = result { true } else { false }
        settle(progress, send, entry: SendAnswers.batchEntry(item: send.item, tokenIndex: send.tokenIndex, result: result), ok: ok)
    }

    private func settle(_ progress: BatchProgress, _ send: ChunkSend, entry: [UInt8], ok: Bool, answer: IdempotentAnswer? = nil) {
        progress.finish(position: send.position, entry: entry, ok: ok, answer: answer)
        budget.release(1)
        lanes.release(1)
    }
}

/// The task running a batch, for its deadline's action to cancel from the
/// watcher's thread. Only used while the batch is registered with
/// ``BatchDeadlines``, which the batch leaves before its task can end.
struct RunningBatchTask: @unchecked Sendable {
    let task: UnsafeCurrentTask

    func cancel() { task.cancel() }
}
