import Relay
import Synchronization

extension Ingress {
    /// What a finished batch run gives the route to answer with.
    struct BatchRun {
        /// Each result's encoded JSON, in request order.
        var entries: [[UInt8]]
        var succeeded = 0
        var notSent = 0
        /// The answers of keyed items that were sent or replayed, by item.
        var answers: [Int: IdempotentAnswer] = [:]
        var stop: BatchStop?
    }

    /// One running batch, shared by its coordinator and its workers: the
    /// next send to start, why the batch stopped starting sends, and the
    /// results so far. Every change is one short critical section; nothing
    /// awaits under the lock.
    final class BatchProgress: Sendable {
        private struct State {
            /// Index into ``sendPositions`` of the next send to start.
            var next = 0
            var run: BatchRun
            /// Sends finished or answered NotSent: their budget is given back.
            var settled = 0
        }

        let plan: BatchPlan
        /// The plan's positions that are sends (not refused items), in order.
        let sendPositions: [Int32]
        private let state: Mutex<State>

        init(plan: BatchPlan) {
            self.plan = plan
            sendPositions = plan.sendPositions
            state = Mutex(State(run: BatchRun(entries: [[UInt8]](repeating: [], count: plan.count))))
        }

        /// The positions of the next sends to start, at most `count` of
        /// them (a worker's chunk); empty once every send has started or the
        /// batch stopped.
        func claim(upTo count: Int) -> [Int] {
            state.withLock { state in
                guard state.run.stop == nil, state.next < sendPositions.count else { return [] }
                let end = min(sendPositions.count, state.next + count)
                defer { state.next = end }
                return sendPositions[state.next..<end].map { Int($0) }
            }
        }

        /// Whether sends remain to start (false once the batch stopped).
        var hasMore: Bool { state.withLock { $0.run.stop == nil && $0.next < sendPositions.count } }

        var isStopped: Bool { state.withLock { $0.run.stop != nil } }

        /// Records the result of a send that ran.
        func finish(position: Int, entry: [UInt8], ok: Bool, answer: IdempotentAnswer?) {
            state.withLock { state in
                state.run.entries[position] = entry
                if ok { state.run.succeeded += 1 }
                if let answer { state.run.answers[Int(plan.sends[position].item)] = answer }
                state.settled += 1
            }
        }

        /// Writes the answer of a position that never runs (a refused item).
        func answer(position: Int, entry: [UInt8]) {
            state.withLock { $0.run.entries[position] = entry }
        }

        /// Stops starting sends (the first reason wins) and answers every
        /// send not started yet NotSent; returns how many, whose budget the
        /// caller gives back.
        func stop(_ reason: BatchStop) -> Int {
            guard let unstarted = state.withLock({ state -> ArraySlice<Int32>? in
                guard state.run.stop == nil else { return nil }
                state.run.stop = reason
                defer { state.next = sendPositions.count }
                return sendPositions[state.next...]
            }) else { return 0 }
            // Encoded outside the lock: the workers' results need not wait for these.
            let entries = unstarted.map { position -> [UInt8] in
                var error = IngressError(status: 503, type: .notSent, message: reason.message)
                error.reason = reason.rawValue
                let send = plan.sends[Int(position)]
                return Ingress.batchEntry(item: Int(send.item), tokenIndex: plan.tokenIndex(of: Int(position)), result: .failure(error))
            }
            state.withLock { state in
                for (position, entry) in zip(unstarted, entries) { state.run.entries[Int(position)] = entry }
                state.run.notSent += entries.count
                state.settled += entries.count
            }
            return entries.count
        }

        /// Sends whose budget is still held: admitted, not finished, not answered NotSent.
        var unsettled: Int { state.withLock { sendPositions.count - $0.settled } }

        /// The results; called once every worker has ended.
        func result() -> BatchRun { state.withLock { $0.run } }
    }

    /// Sends a worker of a batch starts together at most (its chunk): their
    /// intents are journaled with one write and the batch's stop checks
    /// (drain, deadline, client gone) run once per chunk, not once per send.
    static let batchChunk = 16

    /// Runs the admitted sends of `plan`; gives back every budget unit and lane it took.
    ///
    /// The sends run on workers, each a child task holding up to
    /// ``batchChunk`` lanes of ``batchLanes`` (together at most
    /// ``Configuration/effectiveBatchConcurrency``): a worker claims as many
    /// sends as it holds lanes, starts them together
    /// (``RelayService/startSends(_:context:)``: prepared, their intents
    /// recorded at once) and runs them at once; each send gives its lane
    /// back as it ends, to the longest waiting batch first, and the worker
    /// then waits in line (``BatchLanes/acquireUnlessCancelled()``) and takes
    /// what else is free for its next chunk, so batches still share the
    /// lanes first come, first served. Before each chunk a worker checks
    /// whether the batch should stop (client gone, drain, deadline), as the
    /// coordinator does. A batch of one send runs on the request's task,
    /// without a task group.
    ///
    /// The deadline is watched by ``batchDeadlines`` (one thread for every
    /// batch, no timer per batch): it cancels this task, and with it every
    /// send of the batch still running or waiting for a lane. After the run
    /// the handler only encodes its answer, which no cancellation touches.
    func runBatch(_ plan: BatchPlan, sends: Int, call: Call, deadline: ContinuousClock.Instant) async -> BatchRun {
        let progress = BatchProgress(plan: plan)
        defer { sendBudget.release(progress.unsettled) }
        // Refused items do not depend on the run: answered before it.
        for position in 0..<plan.count {
            if let (item, error) = plan.refusal(at: position) {
                progress.answer(position: position, entry: Self.batchEntry(item: item, tokenIndex: nil, result: .failure(error)))
            }
        }
        guard !progress.sendPositions.isEmpty else { return progress.result() }
        let task = withUnsafeCurrentTask { $0.map(RunningBatchTask.init) }
        let ticket = batchDeadlines.register(deadline) { task?.cancel() }
        // Deregistered before this function returns: the task is alive whenever the action can run.
        defer { batchDeadlines.deregister(ticket) }
        let concurrency = configuration.effectiveBatchConcurrency
        let chunk = min(Self.batchChunk, concurrency)

        if progress.sendPositions.count == 1, batchLanes.tryAcquire() {
            await batchWorker(progress, quota: 1, lanes: 1, call: call, deadline: deadline)
            return progress.result()
        }

        await withTaskGroup(of: Int.self) { group in
            // Lanes the running workers may hold together. Each holds a quota
            // of at least one (chunk ≥ 1 and quotas < concurrency when one
            // starts), so no worker runs exactly when this is 0.
            var quotas = 0
            func startWorker(lanes: Int, quota: Int) {
                quotas += quota
                group.addTask { [self] in
                    await batchWorker(progress, quota: quota, lanes: lanes, call: call, deadline: deadline)
                    return quota
                }
            }

            while true {
                if let reason = batchStopReason(call: call, deadline: deadline) { stopBatch(progress, reason) }
                if progress.hasMore, quotas < concurrency {
                    while quotas < concurrency, progress.hasMore {
                        let quota = min(chunk, concurrency - quotas)
                        let lanes = batchLanes.tryAcquire(upTo: quota)
                        guard lanes > 0 else { break }
                        startWorker(lanes: lanes, quota: quota)
                    }
                    guard quotas < concurrency, progress.hasMore else { continue }
                    // Room for more workers but no lane free: wait in line for one
                    // (a worker keeps its place between chunks and never ends while
                    // sends remain, so no event would come to start more), re-checking
                    // now and then whether to stop instead. Workers that ended
                    // meanwhile are counted at the next event: until then fewer start.
                    if await batchLanes.acquire(patience: .milliseconds(100)) {
                        if batchStopReason(call: call, deadline: deadline) == nil, progress.hasMore {
                            startWorker(lanes: 1, quota: min(chunk, concurrency - quotas))
                        } else {
                            batchLanes.release(1)
                        }
                    }
                    continue
                }
                if quotas == 0 { break }
                guard let quota = await group.next() else { break }
                quotas -= quota
            }
        }
        return progress.result()
    }

    /// Why the batch should start nothing more, if it should.
    private func batchStopReason(call: Call, deadline: ContinuousClock.Instant) -> BatchStop? {
        if isDraining, batchStartsUntil.withLock({ $0.map { ContinuousClock.now >= $0 } ?? true }) { return .draining }
        if ContinuousClock.now >= deadline { return .deadline }
        if call.request.isClientGone { return .clientGone }
        return nil
    }

    /// Stops the batch and gives back the budget of the sends it will not start.
    private func stopBatch(_ progress: BatchProgress, _ reason: BatchStop) {
        guard !progress.isStopped else { return }
        sendBudget.release(progress.stop(reason))
    }

    /// One worker of a batch: entered holding `lanes` lanes (at most
    /// `quota`); runs chunks of sends until none is left or the batch stops.
    private func batchWorker(_ progress: BatchProgress, quota: Int, lanes: Int, call: Call, deadline: ContinuousClock.Instant) async {
        var lanes = lanes
        while true {
            if let reason = batchStopReason(call: call, deadline: deadline) { stopBatch(progress, reason) }
            let positions = progress.claim(upTo: lanes)
            if positions.count < lanes { batchLanes.release(lanes - positions.count) }
            guard !positions.isEmpty else { return }
            await runChunk(positions, progress, call: call)
            // Each send gave its lane back as it ended, to the longest waiting
            // batch (or worker) first; this worker waits in line behind them
            // for one, then takes what else is free, up to its quota. Ending
            // here instead and starting a worker per lane cost a child task
            // and a patience timer per send once batches contend for the lanes.
            guard progress.hasMore, await batchLanes.acquireUnlessCancelled() else { return }
            lanes = 1 + batchLanes.tryAcquire(upTo: quota - 1)
        }
    }

    /// Starts the sends at `positions` together and runs them at once, each
    /// holding one lane and one budget unit that it gives back as it ends.
    private func runChunk(_ positions: [Int], _ progress: BatchProgress, call: Call) async {
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
        settle(progress, send, entry: Self.batchEntry(item: send.item, tokenIndex: send.tokenIndex, result: result), ok: ok)
    }

    private func settle(_ progress: BatchProgress, _ send: ChunkSend, entry: [UInt8], ok: Bool, answer: IdempotentAnswer? = nil) {
        progress.finish(position: send.position, entry: entry, ok: ok, answer: answer)
        sendBudget.release(1)
        batchLanes.release(1)
    }
}

/// The task running a batch, for its deadline's action to cancel from the
/// watcher's thread. Only used while the batch is registered with
/// ``BatchDeadlines``, which the batch leaves before its task can end.
private struct RunningBatchTask: @unchecked Sendable {
    let task: UnsafeCurrentTask

    func cancel() { task.cancel() }
}
