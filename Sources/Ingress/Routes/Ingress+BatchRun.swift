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

        /// The position of the next send to start; nil once every send has
        /// started or the batch stopped.
        func claim() -> Int? {
            state.withLock { state in
                guard state.run.stop == nil, state.next < sendPositions.count else { return nil }
                defer { state.next += 1 }
                return Int(sendPositions[state.next])
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
                return Ingress.batchEntry(item: Int(send.item), tokenIndex: plan.tokenIndex(of: Int(position)), result: .failure(error)).encoded()
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

    private enum BatchEvent: Sendable {
        /// A worker ended (nothing left to start, the batch stopped, or its lane went to another batch).
        case workerEnded
        case deadline
    }

    /// Runs the admitted sends of `plan`; gives back every budget unit and lane it took.
    ///
    /// The sends run on at most ``Configuration/effectiveBatchConcurrency``
    /// workers, each a child task that runs sends one after another, not one
    /// child task per send. The coordinator starts a worker when it gets a
    /// lane of ``batchLanes``; a worker gives its lane back after every send
    /// and waits in line for the next (``BatchLanes/acquireUnlessCancelled()``),
    /// so batches still share the lanes first come, first served. Before each
    /// send a worker checks whether the batch should stop (client gone,
    /// drain, deadline), as the coordinator does; the deadline cancels the
    /// workers, waiting ones included.
    func runBatch(_ plan: BatchPlan, sends: Int, call: Call, deadline: ContinuousClock.Instant) async -> BatchRun {
        let progress = BatchProgress(plan: plan)
        defer { sendBudget.release(progress.unsettled) }
        // Refused items do not depend on the run: answered before it.
        for position in 0..<plan.count {
            if let (item, error) = plan.refusal(at: position) {
                progress.answer(position: position, entry: Self.batchEntry(item: item, tokenIndex: nil, result: .failure(error)).encoded())
            }
        }
        let concurrency = configuration.effectiveBatchConcurrency

        await withTaskGroup(of: BatchEvent.self) { group in
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
                return .deadline
            }
            var workers = 0
            func startWorker() {
                workers += 1
                group.addTask { [self] in
                    await batchWorker(progress, call: call, deadline: deadline)
                    return .workerEnded
                }
            }

            while true {
                if let reason = batchStopReason(call: call, deadline: deadline) { stopBatch(progress, reason) }
                if progress.hasMore, workers < concurrency {
                    while workers < concurrency, progress.hasMore, batchLanes.tryAcquire() { startWorker() }
                    guard workers < concurrency, progress.hasMore else { continue }
                    // Room for more workers but no lane free: wait in line for one
                    // (a worker keeps its place between sends and never ends while
                    // sends remain, so no event would come to start more), re-checking
                    // now and then whether to stop instead. Workers that ended
                    // meanwhile are counted at the next event: until then fewer start.
                    if await batchLanes.acquire(patience: .milliseconds(100)) {
                        if batchStopReason(call: call, deadline: deadline) == nil, progress.hasMore { startWorker() } else { batchLanes.release(1) }
                    }
                    continue
                }
                if workers == 0 { break }
                guard let event = await group.next() else { break }
                switch event {
                case .workerEnded:
                    workers -= 1
                case .deadline:
                    // Past the deadline the caller stops waiting: what is still
                    // running is cancelled (each answers Cancelled with its apnsId
                    // and keeps its audit row).
                    stopBatch(progress, .deadline)
                    group.cancelAll()
                }
            }
            group.cancelAll()
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

    /// One worker of a batch: entered holding a lane; runs sends until none
    /// is left, the batch stops, or its lane goes to another batch.
    private func batchWorker(_ progress: BatchProgress, call: Call, deadline: ContinuousClock.Instant) async {
        let plan = progress.plan
        while true {
            if let reason = batchStopReason(call: call, deadline: deadline) { stopBatch(progress, reason) }
            guard let position = progress.claim() else {
                batchLanes.release(1)
                return
            }
            guard case .send(let item, let tokenIndex, let app, let environment, let operation) = plan.resolve(position) else { continue }
            if let keyed = plan.keys[item] {
                let (entry, ok, answer) = await performKeyedItem(keyed, item: item, call) { call throws(IngressError) in
                    try await performAdmitted(app, environment, operation, call)
                }
                progress.finish(position: position, entry: entry.encoded(), ok: ok, answer: answer)
            } else {
                let entry: [UInt8]
                let ok: Bool
                do throws(IngressError) {
                    let result = try await performAdmitted(app, environment, operation, call)
                    entry = Self.batchEntry(item: item, tokenIndex: tokenIndex, result: .success(result)).encoded()
                    ok = true
                } catch {
                    entry = Self.batchEntry(item: item, tokenIndex: tokenIndex, result: .failure(error)).encoded()
                    ok = false
                }
                progress.finish(position: position, entry: entry, ok: ok, answer: nil)
            }
            sendBudget.release(1)
            // The lane goes to the longest waiting batch (or worker); this worker
            // then waits in line behind it for its next one. Ending here instead
            // and starting a worker per lane cost a child task and a patience
            // timer per send once batches contend for the lanes.
            batchLanes.release(1)
            guard progress.hasMore, await batchLanes.acquireUnlessCancelled() else { return }
        }
    }
}
