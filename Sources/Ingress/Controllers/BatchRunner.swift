import Relay
import Synchronization

/// Runs the sends of admitted batches (`POST /v1/send/batch`): owns what
/// every batch shares, the relay-wide send budget (``SendBudget``), the
/// lanes batch sends run in (``BatchLanes``), the one thread that watches
/// their deadlines (``BatchDeadlines``), and the drain's window in which
/// running batches may still start sends. The batch route plans and
/// answers; this type starts, runs and stops the sends.
final class BatchRunner: Sendable {
    let service: RelayService
    let idempotency: IdempotencyGate
    /// Sends admitted and not yet finished across every request (single sends too).
    let budget: SendBudget
    let lanes: BatchLanes
    /// Every running batch's deadline, on one thread.
    let deadlines = BatchDeadlines()
    /// Sends of one batch in flight at once (``Ingress/Configuration/effectiveBatchConcurrency``).
    let concurrency: Int
    /// The drain: once it closes, batches start sends until ``startsUntil``.
    let drain: DrainGate
    /// While draining, batches start sends until then (see ``allowStarts(for:)``).
    let startsUntil = Mutex<ContinuousClock.Instant?>(nil)
    /// Batch sends answered NotSent since start-up, by reason.
    let notSent = Mutex<[String: Int]>([:])

    init(configuration: Ingress.Configuration, service: RelayService, idempotency: IdempotencyGate, drain: DrainGate) {
        self.service = service
        self.idempotency = idempotency
        self.drain = drain
        budget = SendBudget(limit: configuration.maximumSendsInFlight)
        lanes = BatchLanes(capacity: configuration.maximumBatchSendsRunning)
        concurrency = configuration.effectiveBatchConcurrency
    }

    /// Lets running batches start sends for `seconds` more once the drain
    /// closes; called just before it does.
    func allowStarts(for seconds: Double) {
        startsUntil.withLock { $0 = ContinuousClock.now + .milliseconds(Int(max(0, seconds) * 1000)) }
    }

    /// Counts sends a stopped batch answered NotSent, by why it stopped.
    func countNotSent(_ count: Int, _ reason: BatchStop) {
        notSent.withLock { $0[reason.rawValue, default: 0] += count }
    }

    /// Sends a worker of a batch starts together at most (its chunk): their
    /// intents are journaled with one write and the batch's stop checks
    /// (drain, deadline, client gone) run once per chunk, not once per send.
    static let batchChunk = 16

    /// Runs the admitted sends of `plan`; gives back every budget unit and lane it took.
    ///
    /// The sends run on workers, each a child task holding up to
    /// ``batchChunk`` lanes of ``lanes`` (together at most
    /// ``concurrency``): a worker claims as many
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
    /// The deadline is watched by ``deadlines`` (one thread for every
    /// batch, no timer per batch): it cancels this task, and with it every
    /// send of the batch still running or waiting for a lane. After the run
    /// the handler only encodes its answer, which no cancellation touches.
    func runBatch(_ plan: BatchPlan, sends: Int, call: Ingress.Call, deadline: ContinuousClock.Instant) async -> BatchRun {
        let progress = BatchProgress(plan: plan)
        defer { budget.release(progress.unsettled) }
        // Refused items do not depend on the run: answered before it.
        for position in 0..<plan.count {
            if let (item, error) = plan.refusal(at: position) {
                progress.answer(position: position, entry: SendAnswers.batchEntry(item: item, tokenIndex: nil, result: .failure(error)))
            }
        }
        guard !progress.sendPositions.isEmpty else { return progress.result() }
        let task = withUnsafeCurrentTask { $0.map(RunningBatchTask.init) }
        let ticket = deadlines.register(deadline) { task?.cancel() }
        // Deregistered before this function returns: the task is alive whenever the action can run.
        defer { deadlines.deregister(ticket) }
        let chunk = min(Self.batchChunk, concurrency)

        if progress.sendPositions.count == 1, lanes.tryAcquire() {
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
                        let lanes = self.lanes.tryAcquire(upTo: quota)
                        guard lanes > 0 else { break }
                        startWorker(lanes: lanes, quota: quota)
                    }
                    guard quotas < concurrency, progress.hasMore else { continue }
                    // Room for more workers but no lane free: wait in line for one
                    // (a worker keeps its place between chunks and never ends while
                    // sends remain, so no event would come to start more), re-checking
                    // now and then whether to stop instead. Workers that ended
                    // meanwhile are counted at the next event: until then fewer start.
                    if await lanes.acquire(patience: .milliseconds(100)) {
                        if batchStopReason(call: call, deadline: deadline) == nil, progress.hasMore {
                            startWorker(lanes: 1, quota: min(chunk, concurrency - quotas))
                        } else {
                            lanes.release(1)
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
    private func batchStopReason(call: Ingress.Call, deadline: ContinuousClock.Instant) -> BatchStop? {
        if drain.isDraining, startsUntil.withLock({ $0.map { ContinuousClock.now >= $0 } ?? true }) { return .draining }
        if ContinuousClock.now >= deadline { return .deadline }
        if call.request.isClientGone { return .clientGone }
        return nil
    }

    /// Stops the batch and gives back the budget of the sends it will not start.
    private func stopBatch(_ progress: BatchProgress, _ reason: BatchStop) {
        guard !progress.isStopped else { return }
        budget.release(progress.stop(reason))
    }

    /// One worker of a batch: entered holding `lanes` lanes (at most
    /// `quota`); runs chunks of sends until none is left or the batch stops.
    private func batchWorker(_ progress: BatchProgress, quota: Int, lanes: Int, call: Ingress.Call, deadline: ContinuousClock.Instant) async {
        var lanes = lanes
        while true {
            if let reason = batchStopReason(call: call, deadline: deadline) { stopBatch(progress, reason) }
            let positions = progress.claim(upTo: lanes)
            if positions.count < lanes { self.lanes.release(lanes - positions.count) }
            guard !positions.isEmpty else { return }
            await runChunk(positions, progress, call: call)
            // Each send gave its lane back as it ended, to the longest waiting
            // batch (or worker) first; this worker waits in line behind them
            // for one, then takes what else is free, up to its quota. Ending
            // here instead and starting a worker per lane cost a child task
            // and a patience timer per send once batches contend for the lanes.
            guard progress.hasMore, await self.lanes.acquireUnlessCancelled() else { return }
            lanes = 1 + self.lanes.tryAcquire(upTo: quota - 1)
        }
    }
}
